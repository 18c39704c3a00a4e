// An allocator loaded from a user's shared library, as torch.cuda's
// CUDAPluggableAllocator: two C functions,
//   void* alloc(size_t size, int device, void* stream);
//   void free(void* ptr, size_t size, int device, void* stream);
// (stream: the device's current ptoStream). change_current_allocator makes it
// torch's allocator for pto, every tensor's memory coming from `alloc` with no
// cache in between; a MemPool created with it takes its segments from it and
// caches them as the caching allocator does. What `alloc` returns must be device
// memory the runtime knows (ptoMalloc's, or a range inside it).
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <memory>
#include <mutex>
#include <vector>

namespace pto::torch_glue {

class PluggableAllocator final : public c10::DeviceAllocator {
 public:
  using AllocFn = void* (*)(size_t size, int device, void* stream);
  using FreeFn = void (*)(void* ptr, size_t size, int device, void* stream);

  PluggableAllocator(AllocFn alloc, FreeFn free);

  // The library's functions, for a pool's segments: `alloc` returns null when it has no memory.
  void* rawAlloc(size_t size, c10::DeviceIndex device, void* stream) const;
  void rawFree(void* ptr, size_t size, c10::DeviceIndex device, void* stream) const;

  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }  // each DataPtr carries its own
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override {}  // nothing is cached
  void recordStream(const c10::DataPtr&, c10::Stream) override {}  // frees go to the library at once
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override;

  void release(void* ptr, size_t size, c10::DeviceIndex device, void* stream);  // a DataPtr's deleter

 private:
  AllocFn alloc_;
  FreeFn free_;
  std::mutex mutex_;
  // Every allocation is its own segment: allocated, active and reserved bytes are equal.
  std::vector<c10::CachingDeviceAllocator::DeviceStats> stats_;
};

// torch.pto.memory.change_current_allocator: only before the caching allocator has
// handed out memory, as CUDA's rule.
void changeCurrentAllocator(std::shared_ptr<PluggableAllocator> allocator);

// The allocator new pto tensors come from: the caching one, or the one
// change_current_allocator installed.
c10::DeviceAllocator& currentDeviceAllocator();

}  // namespace pto::torch_glue
