#include "pto_graph.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <exception>

#include "compile_options.h"
#include "device.h"
#include "device_allocator.h"
#include "pto_check.h"

namespace pto::torch_glue {
namespace {

// Ids of pools: a graph's own are (n, 0), shared handles (0, n), as CUDA's.
std::atomic<c10::CaptureId_t> next_pool_id{1};

ptoStreamCaptureMode parseCaptureMode(const std::string& name) {
  if (name == "global") return PTO_CAPTURE_MODE_GLOBAL;
  if (name == "thread_local") return PTO_CAPTURE_MODE_THREAD_LOCAL;
  if (name == "relaxed") return PTO_CAPTURE_MODE_RELAXED;
  TORCH_CHECK_VALUE(false, "capture_error_mode must be 'global', 'thread_local' or 'relaxed', got '", name, "'");
}

CachingDeviceAllocator::OutsidePool outsidePool(ptoStreamCaptureMode mode) {
  switch (mode) {
    case PTO_CAPTURE_MODE_GLOBAL: return CachingDeviceAllocator::OutsidePool::kRefuse;
    case PTO_CAPTURE_MODE_THREAD_LOCAL: return CachingDeviceAllocator::OutsidePool::kRefuseOnThisThread;
    case PTO_CAPTURE_MODE_RELAXED: return CachingDeviceAllocator::OutsidePool::kAllow;
  }
  return CachingDeviceAllocator::OutsidePool::kRefuse;
}

ptoStreamCaptureStatus captureStatus(c10::Stream stream, uint64_t* capture_id = nullptr) {
  ptoStreamCaptureStatus status = PTO_CAPTURE_STATUS_NONE;
  PTO_CHECK(ptoStreamGetCaptureInfo(nativeStream(stream), &status, capture_id));
  return status;
}

}  // namespace

PTOGraph::~PTOGraph() {
  try {
    reset();
  } catch (const std::exception& error) {
    TORCH_WARN("PTOGraph: releasing the graph failed: ", error.what());
  }
}

void PTOGraph::captureBegin(std::optional<c10::MempoolId_t> pool, const std::string& mode_name) {
  TORCH_CHECK(!capture_stream_ && graph_ == nullptr,
              "PTOGraph.capture_begin: this graph holds a capture already; reset() it first");
  const ptoStreamCaptureMode mode = parseCaptureMode(mode_name);
  device_ = currentDevice();
  const c10::Stream stream = currentStream(device_);
  TORCH_CHECK(stream != defaultStream(device_),
              "PTOGraph.capture_begin: the current stream is pto:", static_cast<int>(device_),
              "'s default stream, which cannot capture (as with CUDA); capture under torch.pto.graph, which uses "
              "a side stream, or under a torch.pto.stream(torch.pto.Stream())");
  PTO_CHECK(ptoStreamBeginCapture(nativeStream(stream), mode));
  uint64_t capture_id = 0;
  captureStatus(stream, &capture_id);
  const c10::MempoolId_t id = pool.value_or(c10::MempoolId_t{next_pool_id++, 0});
  // The pool serves the capturing stream and every stream that joins its capture.
  deviceAllocator().beginAllocateToPool(
      device_, id,
      [stream, capture_id](c10::Stream s) {
        uint64_t joined = 0;
        return s == stream || (captureStatus(s, &joined) != PTO_CAPTURE_STATUS_NONE && joined == capture_id);
      },
      outsidePool(mode));
  pool_ = id;
  capture_stream_ = stream;
}

void PTOGraph::captureEnd() {
  TORCH_CHECK(capture_stream_, "PTOGraph.capture_end: no capture is running (call capture_begin first)");
  const ptoError status = ptoStreamEndCapture(nativeStream(*capture_stream_), &graph_);
  std::string why = status == PTO_SUCCESS ? "" : ptoGetRecentErrMsg();
  if (status == PTO_SUCCESS && optimize_) {
    try {
      compileCaptured();  // its workspace still comes from the pool
    } catch (const std::exception& error) {
      why = std::string("optimize=True: ") + error.what();
    }
  }
  deviceAllocator().endAllocateToPool(device_, *pool_);
  capture_stream_.reset();
  if (!why.empty()) {
    releaseEverything();
    TORCH_CHECK(false, "PTOGraph capture failed: ", why);
  }
}

void PTOGraph::compileCaptured() {
  rt::CapturedProgram captured;
  PTO_CHECK(rt::capturedProgram(graph_, &captured));
  compiled_ = std::make_shared<const isa::ScheduledProgram>(compiler::compile(captured.program, compileOptionsFor(device_)));
  PTO_CHECK(rt::loadProgram(compiled_, &loaded_));
  memory_ = std::move(captured.memory);
  memory_bytes_.clear();
  for (const isa::Buffer& buffer : captured.program.buffers) memory_bytes_.push_back(buffer.bytes);
  workspace_ = deviceAllocator().allocate(compiled_->workspace_bytes);
}

void PTOGraph::abortCapture() {
  if (!capture_stream_) return;
  ptoStreamEndCapture(nativeStream(*capture_stream_), &graph_);  // whether valid or not, nothing is kept
  deviceAllocator().endAllocateToPool(device_, *pool_);
  capture_stream_.reset();
  releaseEverything();
}

void PTOGraph::replay() {
  TORCH_CHECK(graph_ != nullptr, "PTOGraph.replay: nothing was captured (or the graph was reset)");
  const ptoStream stream = currentNativeStream(device_);
  if (loaded_ != nullptr) {
    PTO_CHECK(ptoProgramLaunch(loaded_, stream, memory_.data(), memory_bytes_.data(), memory_.size(), workspace_.get()));
  } else {
    PTO_CHECK(ptoGraphLaunch(graph_, stream));
  }
}

void PTOGraph::reset() {
  abortCapture();
  releaseEverything();
}

void PTOGraph::releaseEverything() {
  PTO_CHECK(ptoProgramRelease(std::exchange(loaded_, nullptr)));
  compiled_.reset();
  memory_.clear();
  memory_bytes_.clear();
  workspace_.clear();  // before the pool goes
  PTO_CHECK(ptoGraphDestroy(std::exchange(graph_, nullptr)));
  if (pool_) deviceAllocator().releasePool(device_, *std::exchange(pool_, std::nullopt));
}

c10::MempoolId_t PTOGraph::pool() const {
  TORCH_CHECK(pool_, "PTOGraph.pool: the graph has no pool (it has not captured, or was reset)");
  return *pool_;
}

size_t PTOGraph::nodeCount() const {
  size_t count = 0;
  if (graph_ != nullptr) PTO_CHECK(ptoGraphGetNodeCount(graph_, &count));
  return count;
}

std::string PTOGraph::program() const {
  TORCH_CHECK(graph_ != nullptr, "PTOGraph.program: nothing was captured (or the graph was reset)");
  if (compiled_ != nullptr) return isa::print(compiled_->program);
  rt::CapturedProgram captured;
  PTO_CHECK(rt::capturedProgram(graph_, &captured));
  return isa::print(captured.program);
}

c10::MempoolId_t graphPoolHandle() { return {0, next_pool_id++}; }

bool isStreamCapturing(c10::Stream stream) { return captureStatus(stream) != PTO_CAPTURE_STATUS_NONE; }

bool isCurrentStreamCapturing(c10::DeviceIndex device) { return isStreamCapturing(currentStream(device)); }

void rethrowNamingCapture(const c10::Error& error, const std::string& what) {
  // Rethrown as caught (a c10::IndexError stays Python's IndexError): callers are
  // catch blocks, and `throw error` would slice it to a plain c10::Error.
  if (captureStatus(currentStream(currentDevice())) != PTO_CAPTURE_STATUS_INVALIDATED) throw;
  TORCH_CHECK(false, what, " cannot be captured in a PTOGraph; the capture is invalidated.\n",
              error.what_without_backtrace());
}

}  // namespace pto::torch_glue
