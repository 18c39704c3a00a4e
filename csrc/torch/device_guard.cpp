// DeviceGuardImpl for pto: how torch switches devices and streams and drives
// events. Registered at load time for the PrivateUse1 device type.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "device.h"
#include "pluggable_allocator.h"
#include "pto_check.h"
#include "pto_graph.h"
#include "sync_debug.h"

namespace pto::torch_glue {
namespace {

struct PtoGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override { return kType; }

  c10::Device exchangeDevice(c10::Device device) const override {
    const c10::Device previous = getDevice();
    if (device.index() != previous.index()) setDevice(device);
    return previous;
  }

  c10::Device getDevice() const override { return c10::Device(kType, currentDevice()); }

  void setDevice(c10::Device device) const override {
    TORCH_CHECK(device.type() == kType, "expected a pto device, got ", device);
    setCurrentDevice(device.index());
  }

  void uncheckedSetDevice(c10::Device device) const noexcept override {
    ptoSetDevice(device.index());
  }

  c10::Stream getStream(c10::Device device) const override {
    return currentStream(device.index());
  }

  c10::Stream getDefaultStream(c10::Device device) const override {
    return defaultStream(device.index());
  }

  c10::Stream getStreamFromGlobalPool(c10::Device device, bool) const override {
    return streamFromPool(device.index());
  }

  c10::Stream getNewStream(c10::Device device, int) const override {
    return streamFromPool(device.index());
  }

  c10::Stream exchangeStream(c10::Stream stream) const override {
    const c10::Stream previous = currentStream(stream.device_index());
    setCurrentStream(stream);
    return previous;
  }

  void* getStreamNativeHandle(const c10::Stream stream) const override {
    return nativeStream(stream);
  }

  c10::DeviceIndex deviceCount() const noexcept override { return pto::torch_glue::deviceCount(); }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "event on pto:", static_cast<int>(device_index),
                " cannot be recorded on a stream of pto:", static_cast<int>(stream.device_index()));
    if (*event == nullptr) {
      ptoEvent created = nullptr;
      PTO_CHECK(ptoEventCreate(&created));
      *event = created;
    }
    PTO_CHECK(ptoEventRecord(static_cast<ptoEvent>(*event), nativeStream(stream)));
  }

  void block(void* event, const c10::Stream& stream) const override {
    if (event == nullptr) return;
    PTO_CHECK(ptoStreamWaitEvent(nativeStream(stream), static_cast<ptoEvent>(event)));
  }

  bool queryEvent(void* event) const override {
    if (event == nullptr) return true;
    const ptoError status = ptoEventQuery(static_cast<ptoEvent>(event));
    if (status == PTO_ERROR_NOT_READY) return false;
    PTO_CHECK(status);
    return true;
  }

  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    ptoEventDestroy(static_cast<ptoEvent>(event));
  }

  bool queryStream(const c10::Stream& stream) const override {
    const ptoError status = ptoStreamQuery(nativeStream(stream));
    if (status == PTO_ERROR_NOT_READY) return false;
    PTO_CHECK(status);
    return true;
  }

  void synchronizeStream(const c10::Stream& stream) const override {
    warnOrErrorOnSync();
    PTO_CHECK(ptoStreamSynchronize(nativeStream(stream)));
  }

  bool isStreamCapturing(const c10::Stream& stream) const override {
    return pto::torch_glue::isStreamCapturing(stream);
  }

  void synchronizeEvent(void* event) const override {
    if (event == nullptr) return;
    PTO_CHECK(ptoEventSynchronize(static_cast<ptoEvent>(event)));
  }

  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    const c10::DeviceIndex previous = currentDevice();
    setCurrentDevice(resolveDeviceIndex(device_index));
    const ptoError status = ptoDeviceSynchronize();
    setCurrentDevice(previous);
    PTO_CHECK(status);
  }

  void recordDataPtrOnStream(const c10::DataPtr& data_ptr,
                             const c10::Stream& stream) const override {
    currentDeviceAllocator().recordStream(data_ptr, stream);
  }

  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "both events must be recorded before calculating elapsed time");
    float milliseconds = 0;
    const ptoError status =
        ptoEventElapsedTime(&milliseconds, static_cast<ptoEvent>(start), static_cast<ptoEvent>(end));
    TORCH_CHECK(status != PTO_ERROR_NOT_READY,
                "elapsed_time: both events must have completed (synchronize first)");
    PTO_CHECK(status);
    return milliseconds;
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, PtoGuardImpl);

}  // namespace
}  // namespace pto::torch_glue
