#include "mem_pool.h"

#include <thread>

#include "device.h"
#include "device_allocator.h"
#include "pto_graph.h"

namespace pto::torch_glue {

MemPool::MemPool(std::shared_ptr<PluggableAllocator> allocator, bool use_on_oom, bool no_split)
    : allocator_(std::move(allocator)), id_(graphPoolHandle()), device_(currentDevice()) {
  deviceAllocator().retainPool(id_, allocator_, use_on_oom, no_split);
}

MemPool::~MemPool() { deviceAllocator().releasePool(device_, id_); }

int MemPool::useCount() const { return deviceAllocator().poolUseCount(id_); }

void beginAllocateCurrentThreadToPool(c10::DeviceIndex device, c10::MempoolId_t id) {
  const std::thread::id thread = std::this_thread::get_id();
  deviceAllocator().beginAllocateToPool(
      resolveDeviceIndex(device), id, [thread](c10::Stream) { return std::this_thread::get_id() == thread; },
      CachingDeviceAllocator::OutsidePool::kAllow);
}

}  // namespace pto::torch_glue
