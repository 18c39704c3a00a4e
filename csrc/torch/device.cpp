#include "device.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "pto_check.h"

namespace pto::torch_glue {
namespace {

struct StreamPool {
  std::array<std::once_flag, kStreamPoolSize> created;
  std::array<ptoStream, kStreamPoolSize> streams{};
  std::atomic<uint32_t> next{0};
};

std::vector<std::unique_ptr<StreamPool>>& pools() {
  static std::vector<std::unique_ptr<StreamPool>> all = [] {
    std::vector<std::unique_ptr<StreamPool>> made(deviceCount());
    for (auto& pool : made) pool = std::make_unique<StreamPool>();
    return made;
  }();
  return all;
}

// Current stream id per device for this thread (0, the default stream, until set).
std::vector<c10::StreamId>& currentStreamIds() {
  thread_local std::vector<c10::StreamId> ids(deviceCount(), 0);
  return ids;
}

}  // namespace

c10::DeviceIndex deviceCount() noexcept {
  int32_t count = 0;
  return ptoGetDeviceCount(&count) == PTO_SUCCESS ? static_cast<c10::DeviceIndex>(count) : 0;
}

void checkDeviceIndex(c10::DeviceIndex index) {
  const auto count = deviceCount();
  TORCH_CHECK(index >= 0 && index < count, "pto:", static_cast<int>(index),
              " is not a valid device: there are ", static_cast<int>(count),
              " pto device(s)");
}

c10::DeviceIndex currentDevice() {
  int32_t device = 0;
  PTO_CHECK(ptoGetDevice(&device));
  return static_cast<c10::DeviceIndex>(device);
}

int64_t deviceAttribute(c10::DeviceIndex index, ptoDeviceAttribute attribute) {
  checkDeviceIndex(index);
  int64_t value = 0;
  PTO_CHECK(ptoDeviceGetAttribute(&value, attribute, index));
  return value;
}

void setCurrentDevice(c10::DeviceIndex index) {
  checkDeviceIndex(index);
  PTO_CHECK(ptoSetDevice(index));
}

c10::DeviceIndex resolveDeviceIndex(c10::DeviceIndex index) {
  if (index < 0) return currentDevice();
  checkDeviceIndex(index);
  return index;
}

c10::Stream defaultStream(c10::DeviceIndex index) {
  index = resolveDeviceIndex(index);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::kPrivateUse1, index), 0);
}

c10::Stream streamFromPool(c10::DeviceIndex index) {
  index = resolveDeviceIndex(index);
  const auto slot = pools()[index]->next.fetch_add(1) % kStreamPoolSize;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::kPrivateUse1, index),
                     static_cast<c10::StreamId>(slot + 1));
}

c10::Stream currentStream(c10::DeviceIndex index) {
  index = resolveDeviceIndex(index);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::kPrivateUse1, index),
                     currentStreamIds()[index]);
}

void setCurrentStream(c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == c10::kPrivateUse1, "expected a pto stream, got ", stream);
  const auto index = resolveDeviceIndex(stream.device_index());
  TORCH_CHECK(stream.id() >= 0 && stream.id() <= kStreamPoolSize, "invalid pto stream id ",
              stream.id());
  currentStreamIds()[index] = stream.id();
}

ptoStream nativeStream(c10::Stream stream) {
  const auto index = resolveDeviceIndex(stream.device_index());
  const auto id = stream.id();
  TORCH_CHECK(id >= 0 && id <= kStreamPoolSize, "invalid pto stream id ", id);
  if (id == 0) {
    ptoStream native = nullptr;
    PTO_CHECK(ptoGetDefaultStream(index, &native));
    return native;
  }
  StreamPool& pool = *pools()[index];
  std::call_once(pool.created[id - 1], [&] {
    int32_t previous = 0;
    PTO_CHECK(ptoGetDevice(&previous));
    PTO_CHECK(ptoSetDevice(index));
    const ptoError status = ptoStreamCreate(&pool.streams[id - 1]);
    PTO_CHECK(ptoSetDevice(previous));
    PTO_CHECK(status);
  });
  return pool.streams[id - 1];
}

}  // namespace pto::torch_glue
