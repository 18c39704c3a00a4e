// The graph-capture state machine: per capturing stream, its capture and the
// nodes recorded so far; the entry points that begin, end and report a capture,
// and the hooks the other entry points call (capture.h).
//
// A stream that waits for an event recorded inside a capture joins it (as CUDA's
// fork): the work of all its streams is recorded in the order the host gave it,
// an order every wait between them already respects. Every launch asks
// `capture_count` first, so work where nothing captures pays one atomic load.
#include "capture.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "entry_point.h"
#include "handles.h"

namespace pto::rt {
namespace {

struct Capture {
  uint64_t id = 0;
  ptoStream origin = nullptr;  // the stream that began it, and ends it
  int32_t device = 0;
  ptoStreamCaptureMode mode = PTO_CAPTURE_MODE_GLOBAL;
  std::thread::id thread;
  std::string invalidated;  // why, once a refused call ended it
  std::vector<GraphNode> nodes;
  std::unordered_set<ptoEvent> recorded_events;
};

std::mutex& captures_mutex = *new std::mutex;
std::unordered_map<ptoStream, std::shared_ptr<Capture>>& captures =
    *new std::unordered_map<ptoStream, std::shared_ptr<Capture>>;
std::atomic<size_t> capture_count{0};  // captures.size()
uint64_t last_capture_id = 0;          // guarded by captures_mutex

bool anyCapture() { return capture_count.load(std::memory_order_acquire) != 0; }

// The capture `stream` records into, or null; captures_mutex is held.
Capture* captureOf(ptoStream stream) {
  auto it = captures.find(stream);
  return it == captures.end() ? nullptr : it->second.get();
}

const char* captureModeName(ptoStreamCaptureMode mode) {
  switch (mode) {
    case PTO_CAPTURE_MODE_GLOBAL: return "global";
    case PTO_CAPTURE_MODE_THREAD_LOCAL: return "thread_local";
    case PTO_CAPTURE_MODE_RELAXED: return "relaxed";
  }
  return "unknown";
}

// Marks the capture invalid and returns the refusal; captures_mutex is held.
ptoError invalidate(Capture& capture, const std::string& what) {
  const std::string message = formatMessage(what, " (pto:", capture.device, " stream ",
                                            static_cast<void*>(capture.origin), " is capturing a graph, capture mode ",
                                            captureModeName(capture.mode), "); the capture is invalidated");
  if (capture.invalidated.empty()) capture.invalidated = message;
  return fail(PTO_ERROR_CAPTURE_UNSUPPORTED, message);
}

}  // namespace

bool isCapturing(ptoStream stream) {
  if (!anyCapture()) return false;
  std::lock_guard<std::mutex> lock(captures_mutex);
  return captures.contains(stream);
}

ptoError recordNode(ptoStream stream, const char* call, GraphNode node, bool* recorded) {
  *recorded = false;
  std::lock_guard<std::mutex> lock(captures_mutex);
  Capture* capture = captureOf(stream);
  if (capture == nullptr) return PTO_SUCCESS;
  if (!capture->invalidated.empty()) {
    return failf(PTO_ERROR_CAPTURE_INVALIDATED, call, ": the capture on this stream was invalidated: ",
                 capture->invalidated);
  }
  capture->nodes.push_back(std::move(node));
  *recorded = true;
  return PTO_SUCCESS;
}

ptoError refuseWhileCapturing(const char* call, ptoStream stream, int32_t device) {
  if (!anyCapture()) return PTO_SUCCESS;
  std::lock_guard<std::mutex> lock(captures_mutex);
  ptoError refused = PTO_SUCCESS;
  for (auto& [capturing, capture] : captures) {
    const bool concerned = capturing == stream || capture->device == device ||
                           capture->mode == PTO_CAPTURE_MODE_GLOBAL ||
                           (capture->mode == PTO_CAPTURE_MODE_THREAD_LOCAL && capture->thread == std::this_thread::get_id());
    if (concerned) refused = invalidate(*capture, formatMessage(call, " is not permitted"));
  }
  return refused;
}

ptoError refuseCapturedEvent(const char* call, ptoEvent event) {
  if (!anyCapture()) return PTO_SUCCESS;
  std::lock_guard<std::mutex> lock(captures_mutex);
  for (auto& [capturing, capture] : captures) {
    if (capture->recorded_events.contains(event)) {
      return invalidate(*capture, formatMessage(call, " of an event recorded inside the capture is not permitted"));
    }
  }
  return PTO_SUCCESS;
}

ptoError refusePageableCopy(Driver* driver, ptoStream stream, const void* host, const char* side, ptoMemcpyKind kind) {
  ptoPointerAttributes attributes{};
  PTO_RETURN_IF_ERROR(driver->pointerGetAttributes(host, &attributes));
  if (attributes.type == PTO_MEMORY_HOST_PINNED) return PTO_SUCCESS;
  static constexpr const char* kKinds[] = {"host-to-host", "host-to-device", "device-to-host", "device-to-device"};
  std::lock_guard<std::mutex> lock(captures_mutex);
  return invalidate(*captures.at(stream),
                    formatMessage("ptoMemcpyAsync ", kKinds[kind], " ", side, " pageable host memory ", host,
                                  " cannot be captured (a replay would touch it again; copy through pinned "
                                  "memory or a device tensor made before the capture)"));
}

bool recordEventIntoCapture(ptoEvent event, ptoStream stream) {
  if (!anyCapture()) return false;
  std::lock_guard<std::mutex> lock(captures_mutex);
  Capture* recording = captureOf(stream);
  for (auto& [capturing, capture] : captures) {
    if (capture.get() != recording) capture->recorded_events.erase(event);
  }
  if (recording == nullptr) return false;
  recording->recorded_events.insert(event);
  return true;
}

ptoError waitEventInCapture(ptoStream stream, ptoEvent event, bool* handled) {
  *handled = false;
  if (!anyCapture()) return PTO_SUCCESS;
  std::lock_guard<std::mutex> lock(captures_mutex);
  if (Capture* capture = captureOf(stream)) {
    if (!capture->recorded_events.contains(event)) {
      return invalidate(*capture,
                        "ptoStreamWaitEvent of an event recorded outside the capture is not permitted (order other "
                        "streams' work before ptoStreamBeginCapture)");
    }
    *handled = true;
    return PTO_SUCCESS;
  }
  for (auto& [capturing, capture] : captures) {
    if (!capture->recorded_events.contains(event)) continue;
    std::shared_ptr<Capture> joined = capture;
    captures.emplace(stream, std::move(joined));
    capture_count.store(captures.size(), std::memory_order_release);
    *handled = true;
    return PTO_SUCCESS;
  }
  return PTO_SUCCESS;
}

}  // namespace pto::rt

using pto::rt::Capture;
using pto::rt::captures;
using pto::rt::captures_mutex;
using pto::rt::capture_count;

extern "C" {

ptoError ptoStreamBeginCapture(ptoStream stream, ptoStreamCaptureMode mode) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(pto::rt::enumValue(mode) >= PTO_CAPTURE_MODE_GLOBAL && pto::rt::enumValue(mode) <= PTO_CAPTURE_MODE_RELAXED,
              "ptoStreamBeginCapture: invalid capture mode ", pto::rt::enumValue(mode));
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  int32_t device = -1;
  PTO_RETURN_IF_ERROR(driver->streamGetDevice(stream, &device));
  std::lock_guard<std::mutex> lock(captures_mutex);
  PTO_REQUIRE(!captures.contains(stream), "ptoStreamBeginCapture: stream ", static_cast<void*>(stream),
              " is capturing already");
  auto capture = std::make_shared<Capture>();
  capture->id = ++pto::rt::last_capture_id;
  capture->origin = stream;
  capture->device = device;
  capture->mode = mode;
  capture->thread = std::this_thread::get_id();
  captures.emplace(stream, std::move(capture));
  capture_count.store(captures.size(), std::memory_order_release);
  return PTO_SUCCESS;
}

ptoError ptoStreamEndCapture(ptoStream stream, ptoGraph* graph) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(graph != nullptr, "ptoStreamEndCapture: graph is null");
  *graph = nullptr;
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  std::shared_ptr<Capture> capture;
  {
    std::lock_guard<std::mutex> lock(captures_mutex);
    auto it = captures.find(stream);
    PTO_REQUIRE(it != captures.end(), "ptoStreamEndCapture: stream ", static_cast<void*>(stream), " is not capturing");
    PTO_REQUIRE(it->second->origin == stream, "ptoStreamEndCapture: stream ", static_cast<void*>(stream),
                " joined the capture begun on stream ", static_cast<void*>(it->second->origin), "; end it there");
    capture = it->second;
    std::erase_if(captures, [&](const auto& entry) { return entry.second == capture; });
    capture_count.store(captures.size(), std::memory_order_release);
  }
  Capture& ended = *capture;
  if (!ended.invalidated.empty()) {
    return pto::rt::failf(PTO_ERROR_CAPTURE_INVALIDATED, "ptoStreamEndCapture: the capture was invalidated: ",
                          ended.invalidated);
  }
  auto impl = std::make_unique<ptoGraphImpl>();
  impl->device = ended.device;
  impl->nodes = std::move(ended.nodes);
  PTO_RETURN_IF_ERROR(driver->instantiateGraph(impl->device, impl->nodes, &impl->instantiated));
  *graph = impl.release();
  pto::rt::live_graphs.add(*graph);
  return PTO_SUCCESS;
}

ptoError ptoStreamGetCaptureInfo(ptoStream stream, ptoStreamCaptureStatus* status, uint64_t* capture_id) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(status != nullptr, "ptoStreamGetCaptureInfo: status is null");
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  *status = PTO_CAPTURE_STATUS_NONE;
  if (capture_id != nullptr) *capture_id = 0;
  if (!pto::rt::anyCapture()) return PTO_SUCCESS;
  std::lock_guard<std::mutex> lock(captures_mutex);
  if (const Capture* capture = pto::rt::captureOf(stream)) {
    *status = capture->invalidated.empty() ? PTO_CAPTURE_STATUS_ACTIVE : PTO_CAPTURE_STATUS_INVALIDATED;
    if (capture_id != nullptr) *capture_id = capture->id;
  }
  return PTO_SUCCESS;
}

}  // extern "C"
