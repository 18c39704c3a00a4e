// The caching device allocator of pto, as torch.cuda's: device memory is taken
// from the runtime in segments, split into blocks, and cached on free so that
// steady-state allocation never calls the runtime. Blocks are reused only on the
// stream they were allocated for, unless recorded on other streams (record_stream)
// and those streams have passed the free. PYTORCH_ALLOC_CONF tunes it
// (allocator_config.h); private pools serve graph capture and torch.pto.MemPool.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <functional>
#include <memory>
#include <vector>

#include "allocator_history.h"

namespace pto::torch_glue {

class PluggableAllocator;

class CachingDeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t mempool_id) override;
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override;
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override;

  void free(void* ptr);
  bool hasAllocated() const;  // whether it has handed out memory (change_current_allocator's rule)

  // torch.pto.set_per_process_memory_fraction: the device's segments may total at most
  // fraction x its capacity; beyond it an allocation empties the cache, then fails.
  void setMemoryFraction(c10::DeviceIndex device, double fraction);
  double memoryFraction(c10::DeviceIndex device);

  // Private pools for graph capture, as CUDACachingAllocator's: between begin and
  // end, allocations on `device` from a stream `filter` accepts come from pool
  // `id`, whose memory nothing else shares (a captured graph replays into it).
  // `outside` says what happens meanwhile to an allocation on `device` the filter
  // refuses. releasePool drops one user of the pool (a graph); once it has none,
  // its memory returns to the device as its blocks are freed.
  // A user's pool (torch.pto.MemPool) is retainPool's: one user more, created on
  // first use with segments from `allocator` (null: the runtime); `use_on_oom`: its
  // cached blocks serve an allocation outside every pool that found no memory;
  // `no_split`: a segment serves one block. use_mem_pool routes a thread's
  // allocations to it.
  enum class OutsidePool { kAllow, kRefuseOnThisThread, kRefuse };
  void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id, std::function<bool(c10::Stream)> filter,
                           OutsidePool outside);
  void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id);
  void releasePool(c10::DeviceIndex device, c10::MempoolId_t id);
  void retainPool(c10::MempoolId_t id, std::shared_ptr<PluggableAllocator> allocator, bool use_on_oom,
                  bool no_split);
  int poolUseCount(c10::MempoolId_t id);
  std::vector<history::SegmentState> segments();  // for torch.pto.memory._snapshot()
};

CachingDeviceAllocator& deviceAllocator();

}  // namespace pto::torch_glue
