#include "device.h"

#include <algorithm>
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
  // Streams created outside torch, by id - kStreamPoolSize - 1; only ever added to.
  std::mutex external_mutex;
  std::vector<ptoStream> external;
};

std::vector<std::unique_ptr<StreamPool>>& pools() {
  static std::vector<std::unique_ptr<StreamPool>> all = [] {
    std::vector<std::unique_ptr<StreamPool>> made(deviceCount());
    for (auto& pool : made) pool = std::make_unique<StreamPool>();
    return made;
  }();
  return all;
}

// This thread's current stream on a device: its id (0, the default stream, until set)
// and, once a launch has asked, its runtime handle. A stream id names one handle for
// the life of the process (the default and pool streams are created once and never
// replaced, external ones only added), so the handle never goes stale.
struct CurrentStream {
  c10::StreamId id = 0;
  ptoStream native = nullptr;
};

std::vector<CurrentStream>& currentStreams() {
  thread_local std::vector<CurrentStream> streams(deviceCount());
  return streams;
}

// This thread's current stream on device `index` (-1: the current device, resolved in
// place); a valid index skips the runtime's device checks, which every launch would pay.
CurrentStream& currentStreamOf(c10::DeviceIndex& index) {
  std::vector<CurrentStream>& streams = currentStreams();
  if (index < 0 || static_cast<size_t>(index) >= streams.size()) index = resolveDeviceIndex(index);
  return streams[static_cast<size_t>(index)];
}

c10::Stream makeStream(c10::DeviceIndex index, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::kPrivateUse1, index), id);
}

// The stream created outside torch that `id` stands for on `index`, or null.
ptoStream externalNative(c10::DeviceIndex index, c10::StreamId id) {
  StreamPool& pool = *pools()[index];
  const std::lock_guard<std::mutex> lock(pool.external_mutex);
  const c10::StreamId position = id - kStreamPoolSize - 1;
  const bool known = position >= 0 && position < static_cast<c10::StreamId>(pool.external.size());
  return known ? pool.external[position] : nullptr;
}

void checkStreamId(c10::DeviceIndex index, c10::StreamId id) {
  const bool known = (id >= 0 && id <= kStreamPoolSize) || externalNative(index, id) != nullptr;
  TORCH_CHECK(known, "invalid pto stream id ", id);
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
  return makeStream(index, 0);
}

c10::Stream streamFromPool(c10::DeviceIndex index) {
  index = resolveDeviceIndex(index);
  const auto slot = pools()[index]->next.fetch_add(1) % kStreamPoolSize;
  return makeStream(index, static_cast<c10::StreamId>(slot + 1));
}

c10::Stream currentStream(c10::DeviceIndex index) {
  const CurrentStream& current = currentStreamOf(index);
  return makeStream(index, current.id);
}

ptoStream currentNativeStream(c10::DeviceIndex index) {
  CurrentStream& current = currentStreamOf(index);
  if (current.native == nullptr) current.native = nativeStream(makeStream(index, current.id));
  return current.native;
}

c10::Stream externalStream(ptoStream native, c10::DeviceIndex index) {
  index = resolveDeviceIndex(index);
  // The runtime's null stream is the default one (pto_runtime.h).
  if (native == nullptr) return defaultStream(index);
  int32_t owner = 0;
  PTO_CHECK(ptoStreamGetDevice(native, &owner));  // refuses a handle that is no stream
  TORCH_CHECK(owner == index, "ExternalStream: the stream was created on pto:", owner, ", not on pto:",
              static_cast<int>(index));
  StreamPool& pool = *pools()[index];
  const std::lock_guard<std::mutex> lock(pool.external_mutex);
  auto found = std::find(pool.external.begin(), pool.external.end(), native);
  if (found == pool.external.end()) found = pool.external.insert(found, native);
  return makeStream(index, kStreamPoolSize + 1 + (found - pool.external.begin()));
}

void setCurrentStream(c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == c10::kPrivateUse1, "expected a pto stream, got ", stream);
  const auto index = resolveDeviceIndex(stream.device_index());
  checkStreamId(index, stream.id());
  currentStreams()[index] = CurrentStream{stream.id(), nullptr};
}

ptoStream nativeStream(c10::Stream stream) {
  const auto index = resolveDeviceIndex(stream.device_index());
  const auto id = stream.id();
  if (id > kStreamPoolSize) {
    const ptoStream external = externalNative(index, id);
    TORCH_CHECK(external != nullptr, "invalid pto stream id ", id);
    return external;
  }
  TORCH_CHECK(id >= 0, "invalid pto stream id ", id);
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
