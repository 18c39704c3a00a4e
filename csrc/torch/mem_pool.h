// torch.pto.MemPool's native half, as c10::cuda::MemPool: a private pool of the
// caching allocator (the machinery graph capture uses) that lives while this
// object, a graph capturing into it or a use_mem_pool context uses it. Its
// memory returns to the device (or to its allocator) once none does and its
// blocks are freed.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <memory>

#include "pluggable_allocator.h"

namespace pto::torch_glue {

class MemPool {
 public:
  // `allocator`: where the pool's segments come from (null: the runtime, as the shared
  // cache). `use_on_oom`: its cached blocks are the last resort of allocations outside
  // every pool. `no_split`: each segment serves one block of its own size.
  MemPool(std::shared_ptr<PluggableAllocator> allocator, bool use_on_oom, bool no_split);
  ~MemPool();
  MemPool(const MemPool&) = delete;
  MemPool& operator=(const MemPool&) = delete;

  c10::MempoolId_t id() const { return id_; }
  const std::shared_ptr<PluggableAllocator>& allocator() const { return allocator_; }
  int useCount() const;  // this object, graphs and use_mem_pool contexts using the pool

 private:
  std::shared_ptr<PluggableAllocator> allocator_;
  c10::MempoolId_t id_;
  c10::DeviceIndex device_;
};

// use_mem_pool's entry: allocations on `device` made by this thread come from pool `id`
// until endAllocateToPool; the pool gains a user meanwhile (releasePool drops it).
void beginAllocateCurrentThreadToPool(c10::DeviceIndex device, c10::MempoolId_t id);

}  // namespace pto::torch_glue
