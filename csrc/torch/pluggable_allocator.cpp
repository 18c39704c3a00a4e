#include "pluggable_allocator.h"

#include <c10/core/AllocatorConfig.h>
#include <c10/core/DeviceGuard.h>

#include <atomic>

#include "device.h"
#include "device_allocator.h"
#include "pto_check.h"

namespace pto::torch_glue {
namespace {

using c10::CachingAllocator::StatType;

// What a DataPtr of the pluggable allocator must hand back to the library's free.
struct Allocation {
  PluggableAllocator* allocator;
  void* ptr;
  size_t size;
  c10::DeviceIndex device;
  void* stream;
};

void deleteAllocation(void* context) {
  auto* allocation = static_cast<Allocation*>(context);
  allocation->allocator->release(allocation->ptr, allocation->size, allocation->device, allocation->stream);
  delete allocation;
}

void update(c10::CachingDeviceAllocator::DeviceStats& stats, size_t size, bool increase) {
  const auto pool = static_cast<size_t>(size <= c10::CachingAllocator::kSmallSize ? StatType::SMALL_POOL
                                                                                  : StatType::LARGE_POOL);
  for (auto* stat : {&stats.allocation, &stats.segment, &stats.active}) {
    for (size_t index : {static_cast<size_t>(StatType::AGGREGATE), pool}) {
      if (increase) (*stat)[index].increase(1);
      else (*stat)[index].decrease(1);
    }
  }
  for (auto* stat : {&stats.allocated_bytes, &stats.reserved_bytes, &stats.active_bytes, &stats.requested_bytes}) {
    for (size_t index : {static_cast<size_t>(StatType::AGGREGATE), pool}) {
      if (increase) (*stat)[index].increase(size);
      else (*stat)[index].decrease(size);
    }
  }
}

// Installed allocators live as long as the process: tensors they allocated may die at shutdown.
std::atomic<c10::DeviceAllocator*> current{nullptr};

}  // namespace

PluggableAllocator::PluggableAllocator(AllocFn alloc, FreeFn free)
    : alloc_(alloc), free_(free), stats_(deviceCount()) {
  TORCH_CHECK(alloc != nullptr && free != nullptr, "PTOPluggableAllocator: alloc and free must be functions");
}

void* PluggableAllocator::rawAlloc(size_t size, c10::DeviceIndex device, void* stream) const {
  return alloc_(size, static_cast<int>(device), stream);
}

void PluggableAllocator::rawFree(void* ptr, size_t size, c10::DeviceIndex device, void* stream) const {
  free_(ptr, size, static_cast<int>(device), stream);
}

c10::DataPtr PluggableAllocator::allocate(size_t nbytes) {
  const c10::DeviceIndex device = currentDevice();
  const c10::Device where(c10::kPrivateUse1, device);
  if (nbytes == 0) return c10::DataPtr(nullptr, where);
  void* stream = currentNativeStream(device);
  void* ptr = rawAlloc(nbytes, device, stream);
  if (ptr == nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_[device].num_ooms;
  }
  TORCH_CHECK_WITH(OutOfMemoryError, ptr != nullptr, "PTO out of memory on pto:", static_cast<int>(device),
                   ". The PTOPluggableAllocator's alloc returned no memory for ", nbytes, " bytes.");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_[device].num_device_alloc;
    update(stats_[device], nbytes, true);
  }
  return c10::DataPtr(ptr, new Allocation{this, ptr, nbytes, device, stream}, &deleteAllocation, where);
}

void PluggableAllocator::release(void* ptr, size_t size, c10::DeviceIndex device, void* stream) {
  rawFree(ptr, size, device, stream);
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_[device].num_device_free;
  update(stats_[device], size, false);
}

void PluggableAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  PTO_CHECK(ptoMemcpy(dest, src, count, PTO_MEMCPY_DEVICE_TO_DEVICE));
}

c10::CachingDeviceAllocator::DeviceStats PluggableAllocator::getDeviceStats(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_.at(resolveDeviceIndex(device));
}

void PluggableAllocator::resetAccumulatedStats(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& stats = stats_.at(resolveDeviceIndex(device));
  for (auto* array : {&stats.allocation, &stats.segment, &stats.active, &stats.allocated_bytes,
                      &stats.reserved_bytes, &stats.active_bytes, &stats.requested_bytes}) {
    for (auto& stat : *array) stat.reset_accumulated();
  }
  stats.num_device_alloc = stats.num_device_free = stats.num_ooms = 0;
}

void PluggableAllocator::resetPeakStats(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& stats = stats_.at(resolveDeviceIndex(device));
  for (auto* array : {&stats.allocation, &stats.segment, &stats.active, &stats.allocated_bytes,
                      &stats.reserved_bytes, &stats.active_bytes, &stats.requested_bytes}) {
    for (auto& stat : *array) stat.reset_peak();
  }
}

std::pair<size_t, size_t> PluggableAllocator::getMemoryInfo(c10::DeviceIndex device) {
  return deviceAllocator().getMemoryInfo(device);
}

void changeCurrentAllocator(std::shared_ptr<PluggableAllocator> allocator) {
  TORCH_CHECK(!deviceAllocator().hasAllocated() && current.load() == nullptr,
              "Can't swap an already initialized allocator");
  auto* installed = new std::shared_ptr<PluggableAllocator>(std::move(allocator));  // kept for the process
  current.store(installed->get());
  c10::SetAllocator(c10::DeviceType::PrivateUse1, installed->get());
}

c10::DeviceAllocator& currentDeviceAllocator() {
  c10::DeviceAllocator* installed = current.load();
  return installed != nullptr ? *installed : deviceAllocator();
}

}  // namespace pto::torch_glue
