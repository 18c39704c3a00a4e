// Pinned host memory for pto (tensor.pin_memory(), non_blocking copies): page
// aligned memory from ptoMallocHost, cached by size, and reused only after the
// streams that copied from or to it (record_event) have passed that copy. Its
// statistics are torch.cuda's HostStats (torch.pto.host_memory_stats).
#include <ATen/core/CachingHostAllocator.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "device.h"
#include "pto_check.h"

namespace pto::torch_glue {
namespace {

struct PinnedBlock {
  size_t size = 0;
  std::vector<ptoEvent> events;  // copies in flight that use this block
};

// Microseconds `call` takes, for HostStats' host_alloc_time and host_free_time.
template <typename Call>
int64_t microseconds(Call&& call) {
  const auto start = std::chrono::steady_clock::now();
  call();
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
}

size_t bucketSize(size_t size) {
  size_t bucket = 4096;
  while (bucket < size) bucket <<= 1;
  return bucket;
}

void deletePinned(void* ptr);

class PinnedHostAllocator final : public at::HostAllocator {
 public:
  at::DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return {nullptr, nullptr, &deletePinned, at::DeviceType::CPU};
    const size_t size = bucketSize(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    void* ptr = takeCached(size);
    if (ptr == nullptr) {
      stats_.host_alloc_time.increase(microseconds([&] { PTO_CHECK(ptoMallocHost(&ptr, size)); }));
      blocks_[ptr].size = size;
      ++stats_.num_host_alloc;
      stats_.allocations.increase(1);
      stats_.allocated_bytes.increase(size);
    }
    stats_.active_requests.increase(1);
    stats_.active_bytes.increase(size);
    return {ptr, ptr, &deletePinned, at::DeviceType::CPU};
  }

  at::DeleterFnPtr raw_deleter() const override { return &deletePinned; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

  void free(void* ptr) {
    if (ptr == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(ptr);
    TORCH_INTERNAL_ASSERT(it != blocks_.end(), "pinned allocator: freeing unknown pointer");
    stats_.active_requests.decrease(1);
    stats_.active_bytes.decrease(it->second.size);
    free_.emplace(it->second.size, ptr);
  }

  bool record_event(void* ptr, void* ctx, c10::Stream stream) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(ctx);
    if (it == blocks_.end()) return false;
    ptoEvent event = nullptr;
    PTO_CHECK(ptoEventCreate(&event));
    PTO_CHECK(ptoEventRecord(event, nativeStream(stream)));
    it->second.events.push_back(event);
    return true;
  }

  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, ptr] : free_) {
      PinnedBlock& block = blocks_[ptr];
      for (ptoEvent event : block.events) {
        // A copy that failed still ends; its stream reports the failure.
        ptoEventSynchronize(event);
        PTO_CHECK(ptoEventDestroy(event));
      }
      stats_.host_free_time.increase(microseconds([&] { PTO_CHECK(ptoFreeHost(ptr)); }));
      stats_.allocations.decrease(1);
      stats_.allocated_bytes.decrease(size);
      ++stats_.num_host_free;
      blocks_.erase(ptr);
    }
    free_.clear();
  }

  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void reset_accumulated_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto* stat : {&stats_.active_requests, &stats_.active_bytes, &stats_.allocations,
                       &stats_.allocated_bytes}) {
      stat->reset_accumulated();
    }
    stats_.host_alloc_time.reset_accumulated();
    stats_.host_free_time.reset_accumulated();
    stats_.num_host_alloc = 0;
    stats_.num_host_free = 0;
  }

  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto* stat : {&stats_.active_requests, &stats_.active_bytes, &stats_.allocations,
                       &stats_.allocated_bytes}) {
      stat->reset_peak();
    }
    stats_.host_alloc_time.reset_peak();
    stats_.host_free_time.reset_peak();
  }

 private:
  // A cached block of this size whose recorded copies have all completed.
  void* takeCached(size_t size) {
    auto [first, last] = free_.equal_range(size);
    for (auto it = first; it != last; ++it) {
      PinnedBlock& block = blocks_[it->second];
      bool idle = true;
      // A failed copy is over too: its stream, not this block, reports the failure.
      for (ptoEvent event : block.events) idle = idle && ptoEventQuery(event) != PTO_ERROR_NOT_READY;
      if (!idle) continue;
      for (ptoEvent event : block.events) PTO_CHECK(ptoEventDestroy(event));
      block.events.clear();
      void* ptr = it->second;
      free_.erase(it);
      return ptr;
    }
    return nullptr;
  }

  std::mutex mutex_;
  std::map<void*, PinnedBlock> blocks_;
  std::multimap<size_t, void*> free_;
  at::HostStats stats_;
};

PinnedHostAllocator& pinnedAllocator() {
  static auto* allocator = new PinnedHostAllocator;  // outlives every pinned tensor
  return *allocator;
}

void deletePinned(void* ptr) { pinnedAllocator().free(ptr); }

const bool registered = [] {
  at::setHostAllocator(at::kPrivateUse1, &pinnedAllocator());
  return true;
}();

}  // namespace
}  // namespace pto::torch_glue
