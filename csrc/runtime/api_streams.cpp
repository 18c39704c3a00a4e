// The C entry points for work in stream order: copies, fills, host functions,
// streams and events. Each checks its arguments, resolves the null stream, and
// goes through the capture (capture.h) before it calls the driver.
#include "capture.h"
#include "entry_point.h"
#include "profiler.h"

namespace {

ptoError checkMemcpyKind(const ptoMemcpyKind& kind) {
  const int value = pto::rt::enumValue(kind);
  if (value < PTO_MEMCPY_HOST_TO_HOST || value > PTO_MEMCPY_DEVICE_TO_DEVICE) {
    return pto::rt::failf(PTO_ERROR_INVALID_VALUE, "invalid memcpy kind ", value);
  }
  return PTO_SUCCESS;
}

}  // namespace

using pto::rt::GraphNode;

extern "C" {

ptoError ptoMemcpyAsync(void* dst, const void* src, size_t count, ptoMemcpyKind kind,
                        ptoStream stream) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_RETURN_IF_ERROR(checkMemcpyKind(kind));
  if (count == 0) return PTO_SUCCESS;
  PTO_REQUIRE(dst != nullptr && src != nullptr, "ptoMemcpyAsync: null pointer for ", count,
              " bytes");
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  return pto::rt::issueOrRecord(
      stream, "ptoMemcpyAsync",
      [&](GraphNode& node) {
        if (kind != PTO_MEMCPY_DEVICE_TO_DEVICE && kind != PTO_MEMCPY_HOST_TO_DEVICE) {
          PTO_RETURN_IF_ERROR(pto::rt::refusePageableCopy(driver, stream, dst, "into", kind));
        }
        if (kind != PTO_MEMCPY_DEVICE_TO_DEVICE && kind != PTO_MEMCPY_DEVICE_TO_HOST) {
          PTO_RETURN_IF_ERROR(pto::rt::refusePageableCopy(driver, stream, src, "from", kind));
        }
        node.kind = GraphNode::Kind::kMemcpy;
        node.dst = dst;
        node.src = src;
        node.bytes = count;
        node.copy_kind = kind;
        return PTO_SUCCESS;
      },
      [&] {
        const pto::rt::profiler::LaunchScope launch("ptoMemcpyAsync");
        return driver->memcpyAsync(dst, src, count, kind, stream);
      });
}

ptoError ptoMemcpy(void* dst, const void* src, size_t count, ptoMemcpyKind kind) {
  ptoStream stream = nullptr;
  PTO_RETURN_IF_ERROR(pto::rt::refuseWhileCapturing("ptoMemcpy (a synchronous copy)", stream, -1));
  PTO_RETURN_IF_ERROR(ptoMemcpyAsync(dst, src, count, kind, stream));
  return count == 0 ? PTO_SUCCESS : ptoStreamSynchronize(stream);
}

ptoError ptoMemsetAsync(void* ptr, int value, size_t count, ptoStream stream) {
  PTO_DRIVER_OR_RETURN(driver);
  if (count == 0) return PTO_SUCCESS;
  PTO_REQUIRE(ptr != nullptr, "ptoMemsetAsync: null pointer for ", count, " bytes");
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  return pto::rt::issueOrRecord(
      stream, "ptoMemsetAsync",
      [&](GraphNode& node) {
        node.kind = GraphNode::Kind::kMemset;
        node.dst = ptr;
        node.bytes = count;
        node.fill_value = value;
        return PTO_SUCCESS;
      },
      [&] {
        const pto::rt::profiler::LaunchScope launch("ptoMemsetAsync");
        return driver->memsetAsync(ptr, value, count, stream);
      });
}

ptoError ptoMemset(void* ptr, int value, size_t count) {
  PTO_RETURN_IF_ERROR(pto::rt::refuseWhileCapturing("ptoMemset (a synchronous fill)", nullptr, -1));
  PTO_RETURN_IF_ERROR(ptoMemsetAsync(ptr, value, count, nullptr));
  return count == 0 ? PTO_SUCCESS : ptoStreamSynchronize(nullptr);
}

ptoError ptoLaunchHostFunc(ptoStream stream, ptoHostFn fn, void* user_data) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(fn != nullptr, "ptoLaunchHostFunc: function is null");
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  return pto::rt::issueOrRecord(
      stream, "ptoLaunchHostFunc",
      [&](GraphNode& node) {
        node.kind = GraphNode::Kind::kHostFunc;
        node.host_fn = fn;
        node.user_data = user_data;
        return PTO_SUCCESS;
      },
      [&] { return driver->launchHostFunc(stream, fn, user_data); });
}

ptoError ptoStreamCreate(ptoStream* stream) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(stream != nullptr, "ptoStreamCreate: stream is null");
  return driver->streamCreate(pto::rt::tls_current_device, stream);
}

ptoError ptoStreamDestroy(ptoStream stream) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(stream != nullptr, "ptoStreamDestroy: the default stream cannot be destroyed");
  PTO_REQUIRE(!pto::rt::isCapturing(stream),
              "ptoStreamDestroy: the stream is capturing a graph (end the capture first)");
  return driver->streamDestroy(stream);
}

ptoError ptoStreamSynchronize(ptoStream stream) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  PTO_RETURN_IF_ERROR(pto::rt::refuseWhileCapturing("ptoStreamSynchronize", stream, -1));
  return driver->streamSynchronize(stream);
}

ptoError ptoStreamQuery(ptoStream stream) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  PTO_RETURN_IF_ERROR(pto::rt::refuseWhileCapturing("ptoStreamQuery", stream, -1));
  return driver->streamQuery(stream);
}

ptoError ptoStreamWaitEvent(ptoStream stream, ptoEvent event) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(event != nullptr, "ptoStreamWaitEvent: event is null");
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  bool handled = false;
  PTO_RETURN_IF_ERROR(pto::rt::waitEventInCapture(stream, event, &handled));
  if (handled) return PTO_SUCCESS;
  return driver->streamWaitEvent(stream, event);
}

ptoError ptoStreamGetDevice(ptoStream stream, int32_t* device) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(device != nullptr, "ptoStreamGetDevice: device is null");
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  return driver->streamGetDevice(stream, device);
}

ptoError ptoGetDefaultStream(int32_t device, ptoStream* stream) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(stream != nullptr, "ptoGetDefaultStream: stream is null");
  PTO_RETURN_IF_ERROR(pto::rt::checkDevice(driver, device));
  return driver->defaultStream(device, stream);
}

ptoError ptoEventCreate(ptoEvent* event) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(event != nullptr, "ptoEventCreate: event is null");
  return driver->eventCreate(event);
}

ptoError ptoEventDestroy(ptoEvent event) {
  PTO_DRIVER_OR_RETURN(driver);
  if (event == nullptr) return PTO_SUCCESS;
  return driver->eventDestroy(event);
}

ptoError ptoEventRecord(ptoEvent event, ptoStream stream) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(event != nullptr, "ptoEventRecord: event is null");
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  if (pto::rt::recordEventIntoCapture(event, stream)) return PTO_SUCCESS;
  return driver->eventRecord(event, stream);
}

ptoError ptoEventSynchronize(ptoEvent event) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(event != nullptr, "ptoEventSynchronize: event is null");
  PTO_RETURN_IF_ERROR(pto::rt::refuseCapturedEvent("ptoEventSynchronize", event));
  PTO_RETURN_IF_ERROR(pto::rt::refuseWhileCapturing("ptoEventSynchronize", nullptr, -1));
  return driver->eventSynchronize(event);
}

ptoError ptoEventQuery(ptoEvent event) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(event != nullptr, "ptoEventQuery: event is null");
  PTO_RETURN_IF_ERROR(pto::rt::refuseCapturedEvent("ptoEventQuery", event));
  return driver->eventQuery(event);
}

ptoError ptoEventElapsedTime(float* milliseconds, ptoEvent start, ptoEvent end) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(milliseconds != nullptr && start != nullptr && end != nullptr,
              "ptoEventElapsedTime: null argument");
  return driver->eventElapsedTime(milliseconds, start, end);
}

}  // extern "C"
