// The caching device allocator of pto, as torch.cuda's: device memory is taken
// from the runtime in segments, split into blocks, and cached on free so that
// steady-state allocation never calls the runtime. Blocks are reused only on the
// stream they were allocated for, unless recorded on other streams (record_stream)
// and those streams have passed the free.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <vector>

#include "allocator_history.h"

namespace pto::backend {

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
  std::vector<history::SegmentState> segments();  // for torch.pto.memory._snapshot()
};

CachingDeviceAllocator& deviceAllocator();

}  // namespace pto::backend
