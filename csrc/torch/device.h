// Devices and streams of the pto backend as torch sees them, over the runtime.
//
// A c10::Stream on pto is (device, id): id 0 is the device's default stream and
// ids 1..kStreamPoolSize are the pooled streams that torch.Stream / torch.pto.Stream
// hand out round-robin, as CUDA does; the ids after them stand for streams created
// outside torch (torch.pto.ExternalStream), in the order they were first wrapped.
// The current stream is per thread and device.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include "runtime/pto_runtime.h"

namespace pto::torch_glue {

constexpr int kStreamPoolSize = 8;

c10::DeviceIndex deviceCount() noexcept;
// Whether torch has initialised the pto device (lazily: the first tensor, set_device, init()).
bool deviceInitialized();
// Whether this process is a child forked after the device started in its parent.
bool inBadFork();
c10::DeviceIndex currentDevice();
void setCurrentDevice(c10::DeviceIndex index);  // throws a clear error for a bad index
void checkDeviceIndex(c10::DeviceIndex index);
c10::DeviceIndex resolveDeviceIndex(c10::DeviceIndex index);  // -1 -> current device

c10::Stream defaultStream(c10::DeviceIndex index);
c10::Stream streamFromPool(c10::DeviceIndex index);
c10::Stream currentStream(c10::DeviceIndex index);
// The stream `native` (created by ptoStreamCreate elsewhere, on `index`) as torch
// sees it; the same handle gives the same stream. torch never destroys it.
c10::Stream externalStream(ptoStream native, c10::DeviceIndex index);
void setCurrentStream(c10::Stream stream);
ptoStream nativeStream(c10::Stream stream);
// nativeStream(currentStream(index)), kept per thread: what every launch asks.
ptoStream currentNativeStream(c10::DeviceIndex index);

// What the device can do (pto_runtime.h): asked, never inferred from the driver's name.
int64_t deviceAttribute(c10::DeviceIndex index, ptoDeviceAttribute attribute);

}  // namespace pto::torch_glue
