// The Driver interface: what a device backend provides behind pto_runtime.h.
//
// The API layer (the rest of csrc/runtime: driver_registry.cpp, the entry points
// in api_*.cpp, capture.cpp) owns what is driver-independent: driver selection,
// the per-thread current device, argument checks and error messages, program
// verification, the checks of a launch's buffers and graph capture. A driver receives explicit
// device indices and already-validated arguments.
//
// A new driver implements the pure virtual methods (memory, copies, streams,
// events, programs); the others have defaults that are correct for any driver,
// if slower or less informative than a native call (docs/PORTING.md maps each
// method to its ACL and CUDA call).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "isa/schedule.h"
#include "pto_runtime.h"

namespace pto::rt {

// A program as a driver holds it (its device code). The API layer keeps it with
// the program's handle; a driver keeps it alive too while launches of it are queued.
class DeviceProgram {
 public:
  virtual ~DeviceProgram() = default;
};

// One piece of work a capturing stream recorded (ptoStreamBeginCapture): the
// arguments the API checked, as the launch, copy, fill or host function call
// would have passed them to the driver.
struct GraphNode {
  enum class Kind : uint8_t { kProgram, kMemcpy, kMemset, kHostFunc };

  Kind kind = Kind::kProgram;
  std::shared_ptr<const isa::ScheduledProgram> scheduled;  // kProgram: what was loaded
  std::shared_ptr<DeviceProgram> program;                  // kProgram: what the driver made of it
  std::vector<void*> buffers;                              // kProgram: one address per declared buffer
  void* workspace = nullptr;
  void* dst = nullptr;  // kMemcpy, kMemset
  const void* src = nullptr;
  size_t bytes = 0;
  ptoMemcpyKind copy_kind = PTO_MEMCPY_DEVICE_TO_DEVICE;
  int fill_value = 0;
  ptoHostFn host_fn = nullptr;  // kHostFunc
  void* user_data = nullptr;
};

// A captured graph as a driver holds it, ready to launch. The API layer keeps it
// with the graph's handle; a driver keeps it alive too while launches of it are queued.
class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
};

class Driver {
 public:
  virtual ~Driver() = default;

  // Devices.
  virtual const char* name() const = 0;
  virtual int32_t deviceCount() const = 0;
  virtual ptoError synchronizeDevice(int32_t device) = 0;
  // Default: one core, the PTO ISA's reference core's Unified Buffer and tiling
  // (isa/tuning.h), no host memory access from programs, float64 present, no
  // bfloat16 claimed, total memory from memGetInfo.
  virtual ptoError deviceAttribute(int32_t device, ptoDeviceAttribute attribute, int64_t* value);

  // Memory.
  virtual ptoError malloc(int32_t device, size_t size, void** ptr) = 0;
  virtual ptoError free(void* ptr) = 0;
  // Default: page-aligned host memory that is not pinned (copies from it still work).
  virtual ptoError mallocHost(size_t size, void** ptr);
  virtual ptoError freeHost(void* ptr);
  virtual ptoError memGetInfo(int32_t device, size_t* free_bytes, size_t* total_bytes) = 0;
  // Which device (or pinned host) allocation holds `ptr`: the caching allocators
  // and torch's device-of-pointer queries depend on it.
  virtual ptoError pointerGetAttributes(const void* ptr, ptoPointerAttributes* attributes) = 0;
  // Memory shared between processes. `ptr` is the base of a device allocation of this
  // process (the API checked); an opened one is registered on `device`, as device
  // memory pointerGetAttributes reports, and closed by ipcCloseMemHandle.
  // Default: PTO_ERROR_NOT_SUPPORTED.
  virtual ptoError ipcGetMemHandle(void* ptr, ptoIpcMemHandle* handle);
  virtual ptoError ipcOpenMemHandle(int32_t device, const ptoIpcMemHandle& handle, void** ptr);
  virtual ptoError ipcCloseMemHandle(void* ptr);

  // Copies and fills.
  virtual ptoError memcpyAsync(void* dst, const void* src, size_t count, ptoMemcpyKind kind,
                               ptoStream stream) = 0;
  // Default: a host buffer of the value, copied to the device in stream order.
  virtual ptoError memsetAsync(void* ptr, int value, size_t count, ptoStream stream);

  // Streams.
  virtual ptoError streamCreate(int32_t device, ptoStream* stream) = 0;
  virtual ptoError streamDestroy(ptoStream stream) = 0;
  virtual ptoError streamSynchronize(ptoStream stream) = 0;
  virtual ptoError streamWaitEvent(ptoStream stream, ptoEvent event) = 0;
  virtual ptoError streamGetDevice(ptoStream stream, int32_t* device) = 0;
  // PTO_ERROR_NOT_READY while busy; otherwise reports (and clears) a sticky error.
  virtual ptoError streamQuery(ptoStream stream) = 0;
  // Default: a stream per device, created at first use and never destroyed.
  virtual ptoError defaultStream(int32_t device, ptoStream* stream);

  // Events.
  virtual ptoError eventCreate(ptoEvent* event) = 0;
  virtual ptoError eventDestroy(ptoEvent event) = 0;
  virtual ptoError eventRecord(ptoEvent event, ptoStream stream) = 0;
  virtual ptoError eventSynchronize(ptoEvent event) = 0;
  virtual ptoError eventQuery(ptoEvent event) = 0;
  // Default: PTO_ERROR_NOT_SUPPORTED.
  virtual ptoError eventElapsedTime(float* milliseconds, ptoEvent start, ptoEvent end);

  // Programs. `program` has been verified, its schedule too. At launch, `buffers`
  // holds an address for every buffer the program binds (inputs and outputs,
  // checked against their declared sizes; other entries null) and `workspace`
  // program.workspace_bytes of device memory (null when it needs none); the
  // stream belongs to the device the program was loaded on (api_programs.cpp checks).
  // Loading runs the at-load stages once, into constants the loaded program keeps
  // (kConstant placements); a launch runs the other stages.
  virtual ptoError loadProgram(int32_t device, std::shared_ptr<const isa::ScheduledProgram> program,
                               std::shared_ptr<DeviceProgram>* loaded) = 0;
  virtual ptoError launchProgram(ptoStream stream, const std::shared_ptr<DeviceProgram>& program,
                                 std::span<void* const> buffers, void* workspace) = 0;

  // Host work in stream order (the default memsetAsync relies on it too).
  virtual ptoError launchHostFunc(ptoStream stream, ptoHostFn fn, void* user_data) = 0;

  // Captured graphs: the API layer records the nodes; a driver turns them into
  // something it launches as one command. The defaults keep the nodes and issue
  // each through the methods above, one by one: correct, not one command. A
  // driver overrides both or neither.
  virtual ptoError instantiateGraph(int32_t device, const std::vector<GraphNode>& nodes,
                                    std::shared_ptr<DeviceGraph>* graph);
  virtual ptoError launchGraph(ptoStream stream, const std::shared_ptr<DeviceGraph>& graph);

 private:
  std::mutex default_streams_mutex_;
  std::vector<ptoStream> default_streams_;  // the default defaultStream()'s, one per device
};

// How a driver makes itself available: a factory registered under a name, from a
// static initialiser of the driver's own library (sim_driver.cpp). PTO_DRIVER=name
// selects one; otherwise the registered driver of highest priority whose factory
// succeeds runs (a hardware driver throws from its factory when it finds no device).
using DriverFactory = std::unique_ptr<Driver> (*)();
bool registerDriver(const char* name, int priority, DriverFactory factory);

}  // namespace pto::rt
