#include "autograd_exit.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include "device.h"
#include "device_allocator.h"

namespace pto::torch_glue {
namespace {

// Whether `device` ever held memory from pto's allocator: only then can a backward
// have run on its autograd thread.
bool usedForTensors(c10::DeviceIndex device) {
  constexpr auto kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  const c10::CachingDeviceAllocator::DeviceStats stats = deviceAllocator().getDeviceStats(device);
  return stats.allocation[kAll].allocated > 0 || stats.segment[kAll].current > 0;
}

}  // namespace

void settleAutogradDeviceThreads() {
  // A process that never put a tensor on pto has no work on those threads (and must
  // not start the driver now); a child forked after the device started sees no devices.
  if (!deviceAllocator().hasAllocated()) return;
  const c10::DeviceIndex devices = deviceCount();
  const at::AutoGradMode grad_mode(true);
  for (c10::DeviceIndex device = 0; device < devices; ++device) {
    if (!usedForTensors(device)) continue;
    // A backward of one node on the device: its thread runs its tasks in order, so when
    // this one is done, every earlier task has been released. Made in C++, this task
    // holds no Python object, so whichever thread releases it needs no GIL.
    const at::Tensor x = at::zeros({1}, at::device(c10::Device(c10::kPrivateUse1, device))).requires_grad_(true);
    const at::Tensor y = x * 2;
    torch::autograd::grad({y}, {x}, {at::ones_like(y)});
  }
}

}  // namespace pto::torch_glue
