// The C entry points of pto_runtime.h: lazy driver selection, the per-thread
// current device, argument checks, then a call into the active Driver.
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "driver.h"
#include "error.h"
#include "profiler.h"
#include "program.h"

namespace pto::rt {
namespace {

// A plain buffer, not a std::string: a thread's std::string thread-locals are
// destroyed before the process's atexit handlers run, and the driver's exit hook
// (which lets queued work finish) may still report an error on this thread.
constexpr size_t kRecentErrorBytes = 8192;
thread_local char tls_recent_error[kRecentErrorBytes] = "";
thread_local int32_t tls_current_device = 0;

// Set in a child forked after the driver started: fork copies the driver's
// state but none of its threads (stream workers, device cores), so the child
// cannot use it, as a CUDA context cannot be used after fork.
std::atomic<pid_t> forked_from{0};
pid_t driver_pid = 0;

void markForkedChild() { forked_from.store(driver_pid); }

Driver* driverOrNull(ptoError* status);

struct RegisteredDriver {
  std::string name;
  int priority;
  DriverFactory factory;
};

// Filled by the drivers' static initialisers, read at the first runtime call.
std::vector<RegisteredDriver>& registeredDrivers() {
  static std::vector<RegisteredDriver> drivers;
  return drivers;
}

// PTO_DRIVER's driver, else the registered one of highest priority that starts.
Driver* startDriver(const char* requested, std::string* why) {
  std::vector<RegisteredDriver> candidates = registeredDrivers();
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const RegisteredDriver& a, const RegisteredDriver& b) { return a.priority > b.priority; });
  std::string names;
  for (const RegisteredDriver& candidate : candidates) names += (names.empty() ? "'" : ", '") + candidate.name + "'";
  if (candidates.empty()) {
    *why = "this build has no pto driver";
    return nullptr;
  }
  for (const RegisteredDriver& candidate : candidates) {
    if (requested != nullptr && candidate.name != requested) continue;
    try {
      return candidate.factory().release();
    } catch (const std::exception& error) {
      *why += (why->empty() ? "" : "; ") + candidate.name + " driver: " + error.what();
    }
  }
  if (requested != nullptr && why->empty()) {
    *why = std::string("PTO_DRIVER=") + requested + " is not available: this build has " + names;
  }
  return nullptr;
}

// Exiting with work queued is clean, as with CUDA: before the host libraries the
// kernels call (OpenBLAS) run their destructors, every device finishes its
// queued work. Registered once the driver exists, so it runs before the
// destructors of everything constructed earlier. Errors are dropped: no one is
// left to report them to.
void drainAtExit() {
  if (forked_from.load() != 0) return;  // a forked child has no workers to wait for
  ptoError status = PTO_SUCCESS;
  Driver* driver = driverOrNull(&status);
  if (driver == nullptr) return;
  for (int32_t device = 0; device < driver->deviceCount(); ++device) driver->synchronizeDevice(device);
}

Driver* driverOrNull(ptoError* status) {
  if (const pid_t parent = forked_from.load(); parent != 0) {
    *status = failf(PTO_ERROR_NOT_INITIALIZED,
                    "the pto device cannot be used in a process forked after the device started "
                    "in its parent (pid ", parent, "); start child processes with the 'spawn' "
                    "or 'forkserver' method of multiprocessing, as with CUDA");
    return nullptr;
  }
  // Leaked on purpose: worker threads and memory live until process exit, as a
  // device driver's state does, so no static destructor races a late free.
  static std::string init_error;
  static Driver* driver = []() -> Driver* {
    Driver* made = startDriver(std::getenv("PTO_DRIVER"), &init_error);
    if (made != nullptr) {
      driver_pid = getpid();
      pthread_atfork(nullptr, nullptr, &markForkedChild);
      std::atexit(&drainAtExit);
    }
    return made;
  }();
  if (driver == nullptr) *status = fail(PTO_ERROR_NOT_INITIALIZED, init_error);
  return driver;
}

ptoError checkDevice(Driver* driver, int32_t device) {
  if (device < 0 || device >= driver->deviceCount()) {
    return failf(PTO_ERROR_INVALID_DEVICE, "invalid device index ", device, ": the ",
                 driver->name(), " driver has ", driver->deviceCount(),
                 " device(s)");
  }
  return PTO_SUCCESS;
}

ptoError resolveStream(Driver* driver, ptoStream* stream) {
  if (*stream != nullptr) return PTO_SUCCESS;
  return driver->defaultStream(tls_current_device, stream);
}

ptoError checkMemcpyKind(ptoMemcpyKind kind) {
  if (kind < PTO_MEMCPY_HOST_TO_HOST || kind > PTO_MEMCPY_DEVICE_TO_DEVICE) {
    return failf(PTO_ERROR_INVALID_VALUE, "invalid memcpy kind ", static_cast<int>(kind));
  }
  return PTO_SUCCESS;
}

}  // namespace

ptoError fail(ptoError code, std::string message) {
  // Longer messages are cut (they are for people, and 8 KiB is far more than any says).
  const size_t length = std::min(message.size(), kRecentErrorBytes - 1);
  std::memcpy(tls_recent_error, message.data(), length);
  tls_recent_error[length] = '\0';
  return code;
}

std::string recentErrorMessage() { return tls_recent_error; }

bool registerDriver(const char* name, int priority, DriverFactory factory) {
  registeredDrivers().push_back({name, priority, factory});
  return true;
}

}  // namespace pto::rt

// A loaded program: the program (for the API's launch checks) and what the
// driver made of it.
struct ptoProgramImpl {
  int32_t device = 0;
  std::shared_ptr<const pto::isa::ScheduledProgram> program;
  std::shared_ptr<pto::rt::DeviceProgram> loaded;
};

namespace {

// The live handles of one kind (programs, graphs): a released or forged one is
// refused, never dereferenced. Launches only read the set, so they share the lock.
template <class Handle>
class LiveHandles {
 public:
  explicit LiveHandles(const char* kind) : kind_(kind) {}

  void add(Handle handle) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    handles_.insert(handle);
  }
  ptoError check(Handle handle, const char* call) const {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    if (handles_.contains(handle)) return PTO_SUCCESS;
    return refuse(handle, call);
  }
  // Forgets a live handle, which the caller then deletes.
  ptoError remove(Handle handle, const char* call) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    if (handles_.erase(handle) != 0) return PTO_SUCCESS;
    return refuse(handle, call);
  }

 private:
  ptoError refuse(Handle handle, const char* call) const {
    return pto::rt::failf(PTO_ERROR_INVALID_HANDLE, call, ": ", static_cast<void*>(handle), " is not ", kind_);
  }

  const char* const kind_;
  mutable std::shared_mutex mutex_;
  std::unordered_set<Handle> handles_;
};

// Leaked, as the driver is, so that a handle released by a late destructor at
// exit still finds them.
LiveHandles<ptoProgram>& live_programs = *new LiveHandles<ptoProgram>("a loaded program");
LiveHandles<ptoGraph>& live_graphs = *new LiveHandles<ptoGraph>("a captured graph");

}  // namespace

namespace pto::rt {

ptoError loadProgram(std::shared_ptr<const isa::ScheduledProgram> program, ptoProgram* handle) {
  ptoError status = PTO_SUCCESS;
  Driver* driver = driverOrNull(&status);
  if (driver == nullptr) return status;
  if (handle == nullptr || program == nullptr) return fail(PTO_ERROR_INVALID_VALUE, "ptoProgramLoad: null argument");
  if (std::string why = isa::verify(program->program); !why.empty()) {
    return fail(PTO_ERROR_INVALID_VALUE, "ptoProgramLoad: " + why);
  }
  if (std::string why = isa::verifySchedule(*program); !why.empty()) {
    return fail(PTO_ERROR_INVALID_VALUE, "ptoProgramLoad: unsound schedule: " + why);
  }
  auto impl = std::make_unique<ptoProgramImpl>();
  impl->device = tls_current_device;
  impl->program = std::move(program);
  if (ptoError s = driver->loadProgram(impl->device, impl->program, &impl->loaded); s != PTO_SUCCESS) return s;
  *handle = impl.release();
  live_programs.add(*handle);
  return PTO_SUCCESS;
}

}  // namespace pto::rt

using pto::rt::Driver;
using pto::rt::failf;

// Every entry point starts with this: it resolves the driver or returns its error.
#define PTO_DRIVER_OR_RETURN(name)                     \
  ptoError name##_status = PTO_SUCCESS;                \
  Driver* name = pto::rt::driverOrNull(&name##_status); \
  if (name == nullptr) return name##_status

#define PTO_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ptoError pto_status_ = (expr);             \
    if (pto_status_ != PTO_SUCCESS) return pto_status_; \
  } while (0)

#define PTO_REQUIRE(cond, ...) \
  if (!(cond)) return failf(PTO_ERROR_INVALID_VALUE, __VA_ARGS__)

namespace {

// Graph capture: per capturing stream, its capture and the nodes recorded so
// far. A stream that waits for an event recorded inside a capture joins it (as
// CUDA's fork): the work of all its streams is recorded in the order the host
// gave it, an order every wait between them already respects. Every launch asks
// `capture_count` first, so work where nothing captures pays one atomic load.
struct Capture {
  uint64_t id = 0;
  ptoStream origin = nullptr;  // the stream that began it, and ends it
  int32_t device = 0;
  ptoStreamCaptureMode mode = PTO_CAPTURE_MODE_GLOBAL;
  std::thread::id thread;
  std::string invalidated;  // why, once a refused call ended it
  std::vector<pto::rt::GraphNode> nodes;
  std::unordered_set<ptoEvent> recorded_events;
};

std::mutex& captures_mutex = *new std::mutex;
std::unordered_map<ptoStream, std::shared_ptr<Capture>>& captures =
    *new std::unordered_map<ptoStream, std::shared_ptr<Capture>>;
std::atomic<size_t> capture_count{0};  // captures.size()
uint64_t last_capture_id = 0;          // guarded by captures_mutex

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
  const std::string message = pto::rt::formatMessage(
      what, " (pto:", capture.device, " stream ", static_cast<void*>(capture.origin), " is capturing a graph, capture mode ",
      captureModeName(capture.mode), "); the capture is invalidated");
  if (capture.invalidated.empty()) capture.invalidated = message;
  return pto::rt::fail(PTO_ERROR_CAPTURE_UNSUPPORTED, message);
}

// A call that waits for the device (synchronize, query) is refused while a
// capture it concerns runs: one on `stream` or on `device` (either may be
// absent: null, -1), or any capture the mode keeps from this thread.
ptoError refuseWhileCapturing(const char* call, ptoStream stream, int32_t device) {
  if (capture_count.load(std::memory_order_acquire) == 0) return PTO_SUCCESS;
  std::lock_guard<std::mutex> lock(captures_mutex);
  ptoError refused = PTO_SUCCESS;
  for (auto& [capturing, capture] : captures) {
    const bool concerned = capturing == stream || capture->device == device ||
                           capture->mode == PTO_CAPTURE_MODE_GLOBAL ||
                           (capture->mode == PTO_CAPTURE_MODE_THREAD_LOCAL && capture->thread == std::this_thread::get_id());
    if (concerned) refused = invalidate(*capture, pto::rt::formatMessage(call, " is not permitted"));
  }
  return refused;
}

// An event a capture recorded completes only in replays: waiting for it on the
// host, or on a stream outside the capture, is refused.
ptoError refuseCapturedEvent(const char* call, ptoEvent event) {
  if (capture_count.load(std::memory_order_acquire) == 0) return PTO_SUCCESS;
  std::lock_guard<std::mutex> lock(captures_mutex);
  for (auto& [capturing, capture] : captures) {
    if (capture->recorded_events.contains(event)) {
      return invalidate(*capture,
                        pto::rt::formatMessage(call, " of an event recorded inside the capture is not permitted"));
    }
  }
  return PTO_SUCCESS;
}

// Work given to `stream`: recorded (`*recorded` true) when it captures, refused
// when its capture was invalidated.
ptoError recordIfCapturing(ptoStream stream, const char* call, pto::rt::GraphNode node, bool* recorded) {
  *recorded = false;
  if (capture_count.load(std::memory_order_acquire) == 0) return PTO_SUCCESS;
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

bool isCapturing(ptoStream stream) {
  if (capture_count.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(captures_mutex);
  return captures.contains(stream);
}

// A captured copy reads and writes its host memory again at every replay, long
// after the caller let it go: only pinned memory (which lives until freed) may be.
ptoError refusePageableCopy(Driver* driver, ptoStream stream, const void* host, const char* side, ptoMemcpyKind kind) {
  ptoPointerAttributes attributes{};
  PTO_RETURN_IF_ERROR(driver->pointerGetAttributes(host, &attributes));
  if (attributes.type == PTO_MEMORY_HOST_PINNED) return PTO_SUCCESS;
  static constexpr const char* kKinds[] = {"host-to-host", "host-to-device", "device-to-host", "device-to-device"};
  std::lock_guard<std::mutex> lock(captures_mutex);
  return invalidate(*captures.at(stream),
                    pto::rt::formatMessage("ptoMemcpyAsync ", kKinds[kind], " ", side, " pageable host memory ", host,
                                           " cannot be captured (a replay would touch it again; copy through pinned "
                                           "memory or a device tensor made before the capture)"));
}

}  // namespace

// A captured graph: the nodes (for their programs and count) and what the driver made of them.
struct ptoGraphImpl {
  int32_t device = 0;
  std::vector<pto::rt::GraphNode> nodes;
  std::shared_ptr<pto::rt::DeviceGraph> instantiated;
};

extern "C" {

const char* ptoGetErrorName(ptoError error) {
  switch (error) {
    case PTO_SUCCESS: return "PTO_SUCCESS";
    case PTO_ERROR_INVALID_VALUE: return "PTO_ERROR_INVALID_VALUE";
    case PTO_ERROR_INVALID_DEVICE: return "PTO_ERROR_INVALID_DEVICE";
    case PTO_ERROR_OUT_OF_MEMORY: return "PTO_ERROR_OUT_OF_MEMORY";
    case PTO_ERROR_INVALID_HANDLE: return "PTO_ERROR_INVALID_HANDLE";
    case PTO_ERROR_NOT_READY: return "PTO_ERROR_NOT_READY";
    case PTO_ERROR_LAUNCH_FAILED: return "PTO_ERROR_LAUNCH_FAILED";
    case PTO_ERROR_NOT_INITIALIZED: return "PTO_ERROR_NOT_INITIALIZED";
    case PTO_ERROR_NOT_SUPPORTED: return "PTO_ERROR_NOT_SUPPORTED";
    case PTO_ERROR_CAPTURE_UNSUPPORTED: return "PTO_ERROR_CAPTURE_UNSUPPORTED";
    case PTO_ERROR_CAPTURE_INVALIDATED: return "PTO_ERROR_CAPTURE_INVALIDATED";
  }
  return "PTO_ERROR_UNKNOWN";
}

const char* ptoGetRecentErrMsg(void) { return pto::rt::tls_recent_error; }

ptoError ptoInit(void) {
  PTO_DRIVER_OR_RETURN(driver);
  return PTO_SUCCESS;
}

const char* ptoGetDriverName(void) {
  ptoError status = PTO_SUCCESS;
  Driver* driver = pto::rt::driverOrNull(&status);
  return driver == nullptr ? "none" : driver->name();
}

ptoError ptoGetDeviceCount(int32_t* count) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(count != nullptr, "ptoGetDeviceCount: count is null");
  *count = driver->deviceCount();
  return PTO_SUCCESS;
}

ptoError ptoDeviceGetAttribute(int64_t* value, ptoDeviceAttribute attribute, int32_t device) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(value != nullptr, "ptoDeviceGetAttribute: value is null");
  PTO_RETURN_IF_ERROR(pto::rt::checkDevice(driver, device));
  return driver->deviceAttribute(device, attribute, value);
}

ptoError ptoSetDevice(int32_t device) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_RETURN_IF_ERROR(pto::rt::checkDevice(driver, device));
  pto::rt::tls_current_device = device;
  return PTO_SUCCESS;
}

ptoError ptoGetDevice(int32_t* device) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(device != nullptr, "ptoGetDevice: device is null");
  *device = pto::rt::tls_current_device;
  return PTO_SUCCESS;
}

ptoError ptoDeviceSynchronize(void) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_RETURN_IF_ERROR(refuseWhileCapturing("ptoDeviceSynchronize", nullptr, pto::rt::tls_current_device));
  return driver->synchronizeDevice(pto::rt::tls_current_device);
}

ptoError ptoMalloc(void** ptr, size_t size) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(ptr != nullptr, "ptoMalloc: ptr is null");
  return driver->malloc(pto::rt::tls_current_device, size, ptr);
}

ptoError ptoFree(void* ptr) {
  PTO_DRIVER_OR_RETURN(driver);
  if (ptr == nullptr) return PTO_SUCCESS;
  return driver->free(ptr);
}

ptoError ptoMallocHost(void** ptr, size_t size) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(ptr != nullptr, "ptoMallocHost: ptr is null");
  return driver->mallocHost(size, ptr);
}

ptoError ptoFreeHost(void* ptr) {
  PTO_DRIVER_OR_RETURN(driver);
  if (ptr == nullptr) return PTO_SUCCESS;
  return driver->freeHost(ptr);
}

ptoError ptoMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(free_bytes != nullptr && total_bytes != nullptr, "ptoMemGetInfo: null output");
  return driver->memGetInfo(pto::rt::tls_current_device, free_bytes, total_bytes);
}

ptoError ptoPointerGetAttributes(const void* ptr, ptoPointerAttributes* attributes) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(attributes != nullptr, "ptoPointerGetAttributes: attributes is null");
  return driver->pointerGetAttributes(ptr, attributes);
}

ptoError ptoMemcpyAsync(void* dst, const void* src, size_t count, ptoMemcpyKind kind,
                        ptoStream stream) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_RETURN_IF_ERROR(pto::rt::checkMemcpyKind(kind));
  if (count == 0) return PTO_SUCCESS;
  PTO_REQUIRE(dst != nullptr && src != nullptr, "ptoMemcpyAsync: null pointer for ", count,
              " bytes");
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  if (isCapturing(stream)) {
    if (kind != PTO_MEMCPY_DEVICE_TO_DEVICE && kind != PTO_MEMCPY_HOST_TO_DEVICE) {
      PTO_RETURN_IF_ERROR(refusePageableCopy(driver, stream, dst, "into", kind));
    }
    if (kind != PTO_MEMCPY_DEVICE_TO_DEVICE && kind != PTO_MEMCPY_DEVICE_TO_HOST) {
      PTO_RETURN_IF_ERROR(refusePageableCopy(driver, stream, src, "from", kind));
    }
    pto::rt::GraphNode node;
    node.kind = pto::rt::GraphNode::Kind::kMemcpy;
    node.dst = dst;
    node.src = src;
    node.bytes = count;
    node.copy_kind = kind;
    bool recorded = false;
    PTO_RETURN_IF_ERROR(recordIfCapturing(stream, "ptoMemcpyAsync", std::move(node), &recorded));
    if (recorded) return PTO_SUCCESS;
  }
  const pto::rt::profiler::LaunchScope launch("ptoMemcpyAsync");
  return driver->memcpyAsync(dst, src, count, kind, stream);
}

ptoError ptoMemcpy(void* dst, const void* src, size_t count, ptoMemcpyKind kind) {
  ptoStream stream = nullptr;
  PTO_RETURN_IF_ERROR(refuseWhileCapturing("ptoMemcpy (a synchronous copy)", stream, -1));
  PTO_RETURN_IF_ERROR(ptoMemcpyAsync(dst, src, count, kind, stream));
  return count == 0 ? PTO_SUCCESS : ptoStreamSynchronize(stream);
}

ptoError ptoMemsetAsync(void* ptr, int value, size_t count, ptoStream stream) {
  PTO_DRIVER_OR_RETURN(driver);
  if (count == 0) return PTO_SUCCESS;
  PTO_REQUIRE(ptr != nullptr, "ptoMemsetAsync: null pointer for ", count, " bytes");
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  if (isCapturing(stream)) {
    pto::rt::GraphNode node;
    node.kind = pto::rt::GraphNode::Kind::kMemset;
    node.dst = ptr;
    node.bytes = count;
    node.fill_value = value;
    bool recorded = false;
    PTO_RETURN_IF_ERROR(recordIfCapturing(stream, "ptoMemsetAsync", std::move(node), &recorded));
    if (recorded) return PTO_SUCCESS;
  }
  const pto::rt::profiler::LaunchScope launch("ptoMemsetAsync");
  return driver->memsetAsync(ptr, value, count, stream);
}

ptoError ptoMemset(void* ptr, int value, size_t count) {
  PTO_RETURN_IF_ERROR(refuseWhileCapturing("ptoMemset (a synchronous fill)", nullptr, -1));
  PTO_RETURN_IF_ERROR(ptoMemsetAsync(ptr, value, count, nullptr));
  return count == 0 ? PTO_SUCCESS : ptoStreamSynchronize(nullptr);
}

ptoError ptoStreamCreate(ptoStream* stream) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(stream != nullptr, "ptoStreamCreate: stream is null");
  return driver->streamCreate(pto::rt::tls_current_device, stream);
}

ptoError ptoStreamDestroy(ptoStream stream) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(stream != nullptr, "ptoStreamDestroy: the default stream cannot be destroyed");
  PTO_REQUIRE(!isCapturing(stream), "ptoStreamDestroy: the stream is capturing a graph (end the capture first)");
  return driver->streamDestroy(stream);
}

ptoError ptoStreamSynchronize(ptoStream stream) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  PTO_RETURN_IF_ERROR(refuseWhileCapturing("ptoStreamSynchronize", stream, -1));
  return driver->streamSynchronize(stream);
}

ptoError ptoStreamQuery(ptoStream stream) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  PTO_RETURN_IF_ERROR(refuseWhileCapturing("ptoStreamQuery", stream, -1));
  return driver->streamQuery(stream);
}

ptoError ptoStreamWaitEvent(ptoStream stream, ptoEvent event) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(event != nullptr, "ptoStreamWaitEvent: event is null");
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  if (capture_count.load(std::memory_order_acquire) != 0) {
    std::lock_guard<std::mutex> lock(captures_mutex);
    if (Capture* capture = captureOf(stream)) {
      // Recorded inside the capture: the recorded order already waits for it.
      if (capture->recorded_events.contains(event)) return PTO_SUCCESS;
      return invalidate(*capture,
                        "ptoStreamWaitEvent of an event recorded outside the capture is not permitted (order other "
                        "streams' work before ptoStreamBeginCapture)");
    }
    for (auto& [capturing, capture] : captures) {
      if (!capture->recorded_events.contains(event)) continue;
      std::shared_ptr<Capture> joined = capture;  // the stream joins the capture (a fork)
      captures.emplace(stream, std::move(joined));
      capture_count.store(captures.size(), std::memory_order_release);
      return PTO_SUCCESS;
    }
  }
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
  if (capture_count.load(std::memory_order_acquire) != 0) {
    std::lock_guard<std::mutex> lock(captures_mutex);
    Capture* recording = captureOf(stream);
    for (auto& [capturing, capture] : captures) {
      if (capture.get() != recording) capture->recorded_events.erase(event);  // it orders real work now
    }
    if (recording != nullptr) {
      recording->recorded_events.insert(event);
      return PTO_SUCCESS;
    }
  }
  return driver->eventRecord(event, stream);
}

ptoError ptoEventSynchronize(ptoEvent event) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(event != nullptr, "ptoEventSynchronize: event is null");
  PTO_RETURN_IF_ERROR(refuseCapturedEvent("ptoEventSynchronize", event));
  PTO_RETURN_IF_ERROR(refuseWhileCapturing("ptoEventSynchronize", nullptr, -1));
  return driver->eventSynchronize(event);
}

ptoError ptoEventQuery(ptoEvent event) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(event != nullptr, "ptoEventQuery: event is null");
  PTO_RETURN_IF_ERROR(refuseCapturedEvent("ptoEventQuery", event));
  return driver->eventQuery(event);
}

ptoError ptoEventElapsedTime(float* milliseconds, ptoEvent start, ptoEvent end) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(milliseconds != nullptr && start != nullptr && end != nullptr,
              "ptoEventElapsedTime: null argument");
  return driver->eventElapsedTime(milliseconds, start, end);
}

ptoError ptoProgramLoad(ptoProgram* program, const char* pto_as) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(program != nullptr && pto_as != nullptr, "ptoProgramLoad: null argument");
  pto::isa::ParseResult parsed = pto::isa::parse(pto_as);
  PTO_REQUIRE(parsed.error.empty(), "ptoProgramLoad: PTO-AS ", parsed.error);
  return pto::rt::loadProgram(
      std::make_shared<const pto::isa::ScheduledProgram>(pto::isa::scheduleInOrder(std::move(parsed.program))), program);
}

ptoError ptoProgramRelease(ptoProgram program) {
  PTO_DRIVER_OR_RETURN(driver);
  if (program == nullptr) return PTO_SUCCESS;
  PTO_RETURN_IF_ERROR(live_programs.remove(program, "ptoProgramRelease"));
  delete program;  // the driver keeps its program alive while launches of it are queued
  return PTO_SUCCESS;
}

ptoError ptoProgramGetWorkspaceSize(ptoProgram program, size_t* bytes) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_RETURN_IF_ERROR(live_programs.check(program, "ptoProgramGetWorkspaceSize"));
  PTO_REQUIRE(bytes != nullptr, "ptoProgramGetWorkspaceSize: bytes is null");
  *bytes = program->program->workspace_bytes;
  return PTO_SUCCESS;
}

ptoError ptoProgramLaunch(ptoProgram program, ptoStream stream, void* const* buffers,
                          const uint64_t* buffer_bytes, size_t buffer_count, void* workspace) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_RETURN_IF_ERROR(live_programs.check(program, "ptoProgramLaunch"));
  const pto::isa::ScheduledProgram& scheduled = *program->program;
  const std::vector<pto::isa::Buffer>& declared = scheduled.program.buffers;
  PTO_REQUIRE(buffer_count == declared.size(), "ptoProgramLaunch: the program declares ", declared.size(),
              " buffers, the launch binds ", buffer_count);
  PTO_REQUIRE(buffer_count == 0 || (buffers != nullptr && buffer_bytes != nullptr), "ptoProgramLaunch: buffers is null");
  for (size_t b = 0; b < buffer_count; ++b) {
    if (scheduled.placements[b].placement != pto::isa::Placement::kBound) continue;
    PTO_REQUIRE(buffers[b] != nullptr || declared[b].bytes == 0, "ptoProgramLaunch: buffer %", b, " is not bound");
    PTO_REQUIRE(buffer_bytes[b] >= declared[b].bytes, "ptoProgramLaunch: buffer %", b, " needs ", declared[b].bytes,
                " bytes, got ", buffer_bytes[b]);
  }
  PTO_REQUIRE(workspace != nullptr || scheduled.workspace_bytes == 0, "ptoProgramLaunch: the program needs ",
              scheduled.workspace_bytes, " bytes of workspace");
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  int32_t stream_device = -1;
  PTO_RETURN_IF_ERROR(driver->streamGetDevice(stream, &stream_device));
  PTO_REQUIRE(stream_device == program->device, "ptoProgramLaunch: the program is loaded on pto:", program->device,
              ", the stream belongs to pto:", stream_device);
  if (capture_count.load(std::memory_order_acquire) != 0) {
    pto::rt::GraphNode node;
    node.kind = pto::rt::GraphNode::Kind::kProgram;
    node.scheduled = program->program;
    node.program = program->loaded;
    node.buffers.assign(buffers, buffers + buffer_count);
    node.workspace = workspace;
    bool recorded = false;
    PTO_RETURN_IF_ERROR(recordIfCapturing(stream, "ptoProgramLaunch", std::move(node), &recorded));
    if (recorded) return PTO_SUCCESS;
  }
  const pto::rt::profiler::LaunchScope launch("ptoProgramLaunch");
  return driver->launchProgram(stream, program->loaded, std::span<void* const>(buffers, buffer_count), workspace);
}

ptoError ptoLaunchHostFunc(ptoStream stream, ptoHostFn fn, void* user_data) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(fn != nullptr, "ptoLaunchHostFunc: function is null");
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  if (isCapturing(stream)) {
    pto::rt::GraphNode node;
    node.kind = pto::rt::GraphNode::Kind::kHostFunc;
    node.host_fn = fn;
    node.user_data = user_data;
    bool recorded = false;
    PTO_RETURN_IF_ERROR(recordIfCapturing(stream, "ptoLaunchHostFunc", std::move(node), &recorded));
    if (recorded) return PTO_SUCCESS;
  }
  return driver->launchHostFunc(stream, fn, user_data);
}

ptoError ptoStreamBeginCapture(ptoStream stream, ptoStreamCaptureMode mode) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(mode >= PTO_CAPTURE_MODE_GLOBAL && mode <= PTO_CAPTURE_MODE_RELAXED,
              "ptoStreamBeginCapture: invalid capture mode ", static_cast<int>(mode));
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  int32_t device = -1;
  PTO_RETURN_IF_ERROR(driver->streamGetDevice(stream, &device));
  std::lock_guard<std::mutex> lock(captures_mutex);
  PTO_REQUIRE(!captures.contains(stream), "ptoStreamBeginCapture: stream ", static_cast<void*>(stream),
              " is capturing already");
  auto capture = std::make_shared<Capture>();
  capture->id = ++last_capture_id;
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
    return failf(PTO_ERROR_CAPTURE_INVALIDATED, "ptoStreamEndCapture: the capture was invalidated: ", ended.invalidated);
  }
  auto impl = std::make_unique<ptoGraphImpl>();
  impl->device = ended.device;
  impl->nodes = std::move(ended.nodes);
  PTO_RETURN_IF_ERROR(driver->instantiateGraph(impl->device, impl->nodes, &impl->instantiated));
  *graph = impl.release();
  live_graphs.add(*graph);
  return PTO_SUCCESS;
}

ptoError ptoStreamGetCaptureInfo(ptoStream stream, ptoStreamCaptureStatus* status, uint64_t* capture_id) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(status != nullptr, "ptoStreamGetCaptureInfo: status is null");
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  *status = PTO_CAPTURE_STATUS_NONE;
  if (capture_id != nullptr) *capture_id = 0;
  if (capture_count.load(std::memory_order_acquire) == 0) return PTO_SUCCESS;
  std::lock_guard<std::mutex> lock(captures_mutex);
  if (const Capture* capture = captureOf(stream)) {
    *status = capture->invalidated.empty() ? PTO_CAPTURE_STATUS_ACTIVE : PTO_CAPTURE_STATUS_INVALIDATED;
    if (capture_id != nullptr) *capture_id = capture->id;
  }
  return PTO_SUCCESS;
}

ptoError ptoGraphLaunch(ptoGraph graph, ptoStream stream) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_RETURN_IF_ERROR(live_graphs.check(graph, "ptoGraphLaunch"));
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  PTO_REQUIRE(!isCapturing(stream), "ptoGraphLaunch: launching a graph into a capture is not supported");
  int32_t stream_device = -1;
  PTO_RETURN_IF_ERROR(driver->streamGetDevice(stream, &stream_device));
  PTO_REQUIRE(stream_device == graph->device, "ptoGraphLaunch: the graph was captured on pto:", graph->device,
              ", the stream belongs to pto:", stream_device);
  const pto::rt::profiler::LaunchScope launch("ptoGraphLaunch");
  return driver->launchGraph(stream, graph->instantiated);
}

ptoError ptoGraphDestroy(ptoGraph graph) {
  PTO_DRIVER_OR_RETURN(driver);
  if (graph == nullptr) return PTO_SUCCESS;
  PTO_RETURN_IF_ERROR(live_graphs.remove(graph, "ptoGraphDestroy"));
  delete graph;  // the driver keeps its graph alive while launches of it are queued
  return PTO_SUCCESS;
}

ptoError ptoGraphGetNodeCount(ptoGraph graph, size_t* count) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_RETURN_IF_ERROR(live_graphs.check(graph, "ptoGraphGetNodeCount"));
  PTO_REQUIRE(count != nullptr, "ptoGraphGetNodeCount: count is null");
  *count = graph->nodes.size();
  return PTO_SUCCESS;
}

}  // extern "C"

namespace pto::rt {
namespace {

// Builds the one program of a graph's nodes (capturedProgram).
class ProgramOfNodes {
 public:
  explicit ProgramOfNodes(Driver* driver) : driver_(driver) {}

  // The buffer standing for the allocation holding [address, address + bytes),
  // and the element offset of `address` in it for `dtype` (false when misaligned).
  ptoError bind(void* address, uint64_t bytes, isa::DType dtype, int32_t* buffer, int64_t* offset) {
    ptoPointerAttributes attributes{};
    PTO_RETURN_IF_ERROR(driver_->pointerGetAttributes(address, &attributes));
    char* base = attributes.base != nullptr ? static_cast<char*>(attributes.base) : static_cast<char*>(address);
    const uint64_t size = attributes.base != nullptr ? attributes.size : bytes;
    const auto bytes_in = static_cast<uint64_t>(static_cast<char*>(address) - base);
    if (bytes_in % isa::dtypeSize(dtype) != 0) {
      return failf(PTO_ERROR_NOT_SUPPORTED, "capturedProgram: ", address, " is not aligned to ",
                   isa::dtypeName(dtype), " inside its allocation");
    }
    auto [it, added] = index_of_.try_emplace(base, static_cast<int32_t>(out_.memory.size()));
    if (added) {
      out_.memory.push_back(base);
      out_.program.buffers.push_back({isa::BufferKind::kInput, size});
    }
    *buffer = it->second;
    *offset = static_cast<int64_t>(bytes_in / isa::dtypeSize(dtype));
    return PTO_SUCCESS;
  }

  ptoError addLaunch(const GraphNode& node) {
    const isa::ScheduledProgram& scheduled = *node.scheduled;
    std::vector<int32_t> buffer_of(scheduled.program.buffers.size(), -1);
    std::vector<int64_t> offset_of(buffer_of.size(), 0);
    for (isa::Instruction instruction : scheduled.program.instructions) {
      for (isa::Operand& operand : instruction.operands) {
        const auto b = static_cast<size_t>(operand.buffer);
        if (scheduled.placements[b].placement != isa::Placement::kBound) {
          if (buffer_of[b] < 0) {  // a temporary of this launch
            buffer_of[b] = static_cast<int32_t>(out_.memory.size());
            out_.memory.push_back(nullptr);
            out_.program.buffers.push_back({isa::BufferKind::kTemp, scheduled.program.buffers[b].bytes});
          }
        } else {
          int64_t offset = 0;
          PTO_RETURN_IF_ERROR(bind(node.buffers[b], scheduled.program.buffers[b].bytes, operand.dtype, &buffer_of[b], &offset));
          offset_of[b] = offset;
        }
        operand.buffer = buffer_of[b];
        operand.offset += offset_of[b];
      }
      add(std::move(instruction));
    }
    return PTO_SUCCESS;
  }

  // A copy or fill of `bytes` bytes: one instruction over u8 views.
  ptoError addBytes(isa::Opcode opcode, void* dst, const void* src, uint64_t bytes, double value) {
    isa::Instruction instruction;
    instruction.opcode = opcode;
    instruction.immediates[0] = value;
    for (const void* address : {static_cast<const void*>(dst), src}) {
      if (address == nullptr) continue;
      isa::Operand operand = isa::contiguousOperand(0, isa::DType::kUInt8, {static_cast<int64_t>(bytes)});
      PTO_RETURN_IF_ERROR(bind(const_cast<void*>(address), bytes, isa::DType::kUInt8, &operand.buffer, &operand.offset));
      instruction.operands.push_back(operand);
    }
    add(std::move(instruction));
    return PTO_SUCCESS;
  }

  CapturedProgram take() { return std::move(out_); }

 private:
  void add(isa::Instruction instruction) {
    isa::Buffer& written = out_.program.buffers[static_cast<size_t>(instruction.operands[0].buffer)];
    if (written.kind == isa::BufferKind::kInput) written.kind = isa::BufferKind::kOutput;
    out_.program.instructions.push_back(std::move(instruction));
  }

  Driver* driver_;
  CapturedProgram out_;
  std::unordered_map<void*, int32_t> index_of_;
};

}  // namespace

ptoError capturedProgram(ptoGraph graph, CapturedProgram* out) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_RETURN_IF_ERROR(live_graphs.check(graph, "capturedProgram"));
  PTO_REQUIRE(out != nullptr, "capturedProgram: out is null");
  ProgramOfNodes builder(driver);
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    const GraphNode& node = graph->nodes[n];
    switch (node.kind) {
      case GraphNode::Kind::kProgram:
        PTO_RETURN_IF_ERROR(builder.addLaunch(node));
        break;
      case GraphNode::Kind::kMemset:
        PTO_RETURN_IF_ERROR(builder.addBytes(isa::Opcode::kFill, node.dst, nullptr, node.bytes,
                                                     static_cast<uint8_t>(node.fill_value)));
        break;
      case GraphNode::Kind::kMemcpy:
        if (node.copy_kind == PTO_MEMCPY_DEVICE_TO_DEVICE) {
          PTO_RETURN_IF_ERROR(builder.addBytes(isa::Opcode::kMove, node.dst, node.src, node.bytes, 0));
          break;
        }
        return failf(PTO_ERROR_NOT_SUPPORTED, "capturedProgram: node ", n, " copies between host and device memory, "
                     "which no program expresses");
      case GraphNode::Kind::kHostFunc:
        return failf(PTO_ERROR_NOT_SUPPORTED, "capturedProgram: node ", n, " is a host function, which no program "
                     "expresses");
    }
  }
  *out = builder.take();
  return PTO_SUCCESS;
}

}  // namespace pto::rt
