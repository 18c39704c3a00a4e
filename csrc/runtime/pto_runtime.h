// The PTO device runtime: the one public header of csrc/runtime.
//
// An ACL-shaped C API (aclInit -> ptoInit, aclrtMalloc -> ptoMalloc, ...) so that
// a driver for real Ascend hardware is a thin mapping. Every function returns a
// ptoError; the message of the most recent failure on the calling thread is
// ptoGetRecentErrMsg(). Nothing here includes or knows about PyTorch.
//
// Semantics shared by every driver:
//  - the current device is per host thread (default 0);
//  - a stream is an in-order queue; launches, async copies, memsets, event
//    records/waits and host functions return at once and run in stream order
//    (a debugging mode may make them wait until they ran: PTO_SIM_STRICT=1);
//  - an error raised by asynchronous work is sticky on its stream and is
//    returned, naming the failing op, by the next synchronize/query of that
//    stream (or of its device); reporting it clears it. An event recorded after
//    the failure carries it, and a stream that waits for that event fails with
//    it too: work that depends on failed work never passes for good.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

typedef enum ptoError {
  PTO_SUCCESS = 0,
  PTO_ERROR_INVALID_VALUE = 1,
  PTO_ERROR_INVALID_DEVICE = 2,
  PTO_ERROR_OUT_OF_MEMORY = 3,
  PTO_ERROR_INVALID_HANDLE = 4,
  PTO_ERROR_NOT_READY = 5,  // query: work still pending; not an error
  PTO_ERROR_LAUNCH_FAILED = 6,
  PTO_ERROR_NOT_INITIALIZED = 7,
  PTO_ERROR_NOT_SUPPORTED = 8,  // the driver does not offer this call or attribute
  PTO_ERROR_CAPTURE_UNSUPPORTED = 9,  // the call cannot be captured; the capture is invalidated
  PTO_ERROR_CAPTURE_INVALIDATED = 10, // work given to a capture an earlier call invalidated
} ptoError;

typedef enum ptoMemcpyKind {
  PTO_MEMCPY_HOST_TO_HOST = 0,
  PTO_MEMCPY_HOST_TO_DEVICE = 1,
  PTO_MEMCPY_DEVICE_TO_HOST = 2,
  PTO_MEMCPY_DEVICE_TO_DEVICE = 3,
} ptoMemcpyKind;

typedef enum ptoMemoryType {
  PTO_MEMORY_UNREGISTERED = 0,  // plain host memory the runtime did not allocate
  PTO_MEMORY_HOST_PINNED = 1,
  PTO_MEMORY_DEVICE = 2,
} ptoMemoryType;

typedef struct ptoPointerAttributes {
  ptoMemoryType type;
  int32_t device;     // owning device for PTO_MEMORY_DEVICE, else -1
  void* base;         // start of the allocation holding the pointer
  size_t size;        // size of that allocation in bytes
} ptoPointerAttributes;

typedef struct ptoStreamImpl* ptoStream;  // nullptr means the current device's default stream
typedef struct ptoEventImpl* ptoEvent;
typedef struct ptoProgramImpl* ptoProgram;  // a program loaded onto a device

// A host function queued on a stream (aclrtLaunchHostFunc / aclrtLaunchCallback).
// It is host code: it must not touch device memory (copy through the runtime).
// It returns nullptr, or why it failed: the runtime copies the message and the
// stream fails with it (PTO_ERROR_LAUNCH_FAILED, sticky like a failed launch).
// Host work that can fail on its own (a collective's transfer) reports it so.
typedef const char* (*ptoHostFn)(void* user_data);

// What a device is and can do: code above the runtime asks these, never which
// driver runs.
typedef enum ptoDeviceAttribute {
  PTO_DEVICE_ATTR_CORE_COUNT = 0,             // cores that run a program's tiles in parallel
  PTO_DEVICE_ATTR_UNIFIED_BUFFER_BYTES = 1,   // each core's on-chip tile memory
  PTO_DEVICE_ATTR_PAGEABLE_MEMORY_ACCESS = 2, // 1: programs may read and write plain host
                                              // memory by its address (as
                                              // cudaDevAttrPageableMemoryAccess)
  PTO_DEVICE_ATTR_BFLOAT16 = 3,               // 1: bfloat16 arithmetic in hardware
  PTO_DEVICE_ATTR_FLOAT64 = 4,                // 1: float64 arithmetic in hardware
  PTO_DEVICE_ATTR_TOTAL_MEMORY_BYTES = 5,
  PTO_DEVICE_ATTR_ISA_VERSION_MAJOR = 6,       // the PTO ISA version the device executes
  PTO_DEVICE_ATTR_ISA_VERSION_MINOR = 7,       // (torch.pto.get_device_capability)
  PTO_DEVICE_ATTR_BUSY_NANOSECONDS = 8,        // a counter: time the device's streams spent running
                                              // work (summed over streams); its rate is the
                                              // device's utilization (torch.pto.utilization)
  PTO_DEVICE_ATTR_VECTOR_ISA = 9,              // the host vector ISA a device that runs on the
                                              // host's CPU computes with: a ptoVectorIsa
  // The device's tuning, which the compiler schedules by (CompileOptions):
  PTO_DEVICE_ATTR_TILE_ELEMENTS = 10,          // elements of one instruction's tile a fused
                                              // stage aims at
  PTO_DEVICE_ATTR_GEMM_TILE_ROWS = 11,         // output rows of one tile of a stage holding a GEMM
  PTO_DEVICE_ATTR_PARALLEL_GEMM_TILES = 12,    // 1: such a stage's tiles run on the cores in
                                              // parallel; 0: one after another (the device's
                                              // GEMM spreads each tile over the cores itself)
  PTO_DEVICE_ATTR_HOST_ACCESS_TO_DEVICE_MEMORY = 13,  // 1: host code may read and write device
                                              // memory by its address (unified memory, as
                                              // cudaDevAttrDirectManagedMemAccessFromHost): a host
                                              // thread or a NIC moves it with no staging copy,
                                              // as GPUDirect RDMA; 0: only copies reach it
} ptoDeviceAttribute;

// What PTO_DEVICE_ATTR_VECTOR_ISA reports (the sim driver's kernels: chosen at run
// time, capped by PTO_SIM_VECTOR_ISA).
typedef enum ptoVectorIsa {
  PTO_VECTOR_ISA_SCALAR = 0,  // the compiler's baseline only
  PTO_VECTOR_ISA_SSE4 = 1,
  PTO_VECTOR_ISA_AVX2 = 2,
  PTO_VECTOR_ISA_AVX512 = 3,
  PTO_VECTOR_ISA_NEON = 4,
} ptoVectorIsa;

const char* ptoGetErrorName(ptoError error);
const char* ptoGetRecentErrMsg(void);

// Driver selection and devices.
ptoError ptoInit(void);
const char* ptoGetDriverName(void);  // for people to read ("sim", "acl"); code asks attributes
ptoError ptoGetDeviceCount(int32_t* count);
ptoError ptoDeviceGetAttribute(int64_t* value, ptoDeviceAttribute attribute, int32_t device);
ptoError ptoSetDevice(int32_t device);
ptoError ptoGetDevice(int32_t* device);
ptoError ptoDeviceSynchronize(void);

// Device and pinned host memory.
ptoError ptoMalloc(void** ptr, size_t size);
ptoError ptoFree(void* ptr);
ptoError ptoMallocHost(void** ptr, size_t size);
ptoError ptoFreeHost(void* ptr);
ptoError ptoMemGetInfo(size_t* free_bytes, size_t* total_bytes);
ptoError ptoPointerGetAttributes(const void* ptr, ptoPointerAttributes* attributes);

// Device memory shared with another process (cudaIpcGetMemHandle, aclrtIpcMemGetExportKey).
// The handle is plain bytes, sent by any means; the other process opens it onto its
// current device and works on the same memory, at an address of its own. The
// process that allocated the memory keeps it allocated, and running, while others
// have it open: a handle opens only while that process lives, and a freed
// allocation's handle no longer opens. Each open is its own mapping, released by
// ptoIpcCloseMemHandle, never by ptoFree; it does not count against the opening
// device's capacity (the memory is the allocating device's). Only memory allocated
// by ptoMalloc in the calling process can be shared, by its allocation's base.
typedef struct ptoIpcMemHandle {
  char reserved[64];
} ptoIpcMemHandle;

ptoError ptoIpcGetMemHandle(ptoIpcMemHandle* handle, void* ptr);
// `flags` must be 0 (all of a process's devices reach each other's memory already).
ptoError ptoIpcOpenMemHandle(void** ptr, ptoIpcMemHandle handle, unsigned int flags);
ptoError ptoIpcCloseMemHandle(void* ptr);  // once the work queued on the device has run

// Copies and fills. The synchronous forms block the host until done; the async
// forms are ordered on `stream`.
ptoError ptoMemcpy(void* dst, const void* src, size_t count, ptoMemcpyKind kind);
ptoError ptoMemcpyAsync(void* dst, const void* src, size_t count, ptoMemcpyKind kind, ptoStream stream);
ptoError ptoMemset(void* ptr, int value, size_t count);
ptoError ptoMemsetAsync(void* ptr, int value, size_t count, ptoStream stream);

// Streams. Each stream belongs to the device current at creation.
ptoError ptoStreamCreate(ptoStream* stream);
ptoError ptoStreamDestroy(ptoStream stream);  // waits for pending work, then releases
ptoError ptoStreamSynchronize(ptoStream stream);
ptoError ptoStreamQuery(ptoStream stream);  // PTO_SUCCESS when idle, PTO_ERROR_NOT_READY while busy
ptoError ptoStreamWaitEvent(ptoStream stream, ptoEvent event);
ptoError ptoStreamGetDevice(ptoStream stream, int32_t* device);
ptoError ptoGetDefaultStream(int32_t device, ptoStream* stream);

// Events.
ptoError ptoEventCreate(ptoEvent* event);
ptoError ptoEventDestroy(ptoEvent event);
ptoError ptoEventRecord(ptoEvent event, ptoStream stream);
ptoError ptoEventSynchronize(ptoEvent event);
ptoError ptoEventQuery(ptoEvent event);  // PTO_SUCCESS when complete (or never recorded)
ptoError ptoEventElapsedTime(float* milliseconds, ptoEvent start, ptoEvent end);

// Programs: PTO code as a driver holds it (aclrtBinaryLoad / cuModuleLoadData).
// A program is loaded once onto the current device and launched any number of
// times on that device's streams, each launch binding its input and output
// buffers to memory. Loading verifies it; a launch checks every bound buffer
// against the size the program declares. PTO-AS text loads with each instruction
// run whole and its temporaries one after another in the launch's workspace; the
// compiler's tiled, fused programs load through pto::rt::loadProgram (program.h).
ptoError ptoProgramLoad(ptoProgram* program, const char* pto_as);
ptoError ptoProgramRelease(ptoProgram program);  // launches already queued still run
// Device memory a launch needs for the program's temporaries (0: none).
ptoError ptoProgramGetWorkspaceSize(ptoProgram program, size_t* bytes);
// `buffers` and `buffer_bytes` hold one entry per buffer the program declares
// (entries for its temporaries are ignored); `workspace` is device memory of the
// workspace size, ordered on `stream` like the buffers. A failing instruction
// fails the launch with "instruction N (mnemonic): why" at the next synchronize.
ptoError ptoProgramLaunch(ptoProgram program, ptoStream stream, void* const* buffers,
                          const uint64_t* buffer_bytes, size_t buffer_count, void* workspace);

// Host work ordered on a stream.
ptoError ptoLaunchHostFunc(ptoStream stream, ptoHostFn fn, void* user_data);

// Graph capture (cudaStreamBeginCapture, aclmdlRICaptureBegin). While a stream
// captures, the program launches, copies, fills and host functions given to it
// are recorded instead of run; ptoStreamEndCapture returns them as a graph, and
// ptoGraphLaunch runs them again, in order, as one piece of a stream's work. A
// recorded launch keeps its buffers' addresses: that memory must stay allocated
// while the graph lives, and holds each replay's inputs. A recorded host
// function runs at every replay with the same user data, so it must not free it.
//
// What cannot be recorded fails at the call with PTO_ERROR_CAPTURE_UNSUPPORTED,
// naming it, and invalidates the capture: later work given to the stream fails
// with PTO_ERROR_CAPTURE_INVALIDATED and ptoStreamEndCapture returns no graph.
// Not recordable: synchronizing (a stream, the device, an event) and querying
// while the mode forbids it; copies from or to host memory that is not pinned
// (a replay would read or write it again, long after the caller let it go); a
// wait, on the capturing stream, for an event the capture did not record.
// Another stream that waits for an event recorded inside the capture joins it
// (a fork, as with CUDA): its work is recorded too, in the order the host gives
// it, until the capture ends; waits between the capture's streams order nothing
// more (the recorded order already respects them).
typedef enum ptoStreamCaptureMode {
  PTO_CAPTURE_MODE_GLOBAL = 0,        // no thread may synchronize while the capture runs
  PTO_CAPTURE_MODE_THREAD_LOCAL = 1,  // the capturing thread may not
  PTO_CAPTURE_MODE_RELAXED = 2,       // anyone may, except with the capturing stream itself
} ptoStreamCaptureMode;

typedef enum ptoStreamCaptureStatus {
  PTO_CAPTURE_STATUS_NONE = 0,
  PTO_CAPTURE_STATUS_ACTIVE = 1,
  PTO_CAPTURE_STATUS_INVALIDATED = 2,  // until ptoStreamEndCapture says why
} ptoStreamCaptureStatus;

typedef struct ptoGraphImpl* ptoGraph;

ptoError ptoStreamBeginCapture(ptoStream stream, ptoStreamCaptureMode mode);
// Ends the capture, valid or not; `*graph` is null when it was invalidated.
ptoError ptoStreamEndCapture(ptoStream stream, ptoGraph* graph);
// `capture_id` (may be null): which capture the stream records into, 0 when none.
ptoError ptoStreamGetCaptureInfo(ptoStream stream, ptoStreamCaptureStatus* status, uint64_t* capture_id);
// One command on `stream`, which must belong to the device the graph was captured on.
ptoError ptoGraphLaunch(ptoGraph graph, ptoStream stream);
ptoError ptoGraphDestroy(ptoGraph graph);  // launches already queued still run
ptoError ptoGraphGetNodeCount(ptoGraph graph, size_t* count);

// Profiling (as CUPTI activities or aclprof): while started, the driver records
// every program launch, copy and fill a stream executes, with its stream, device,
// start and end times, the bytes it moved and the FLOPs it computed; a launch of
// a multi-instruction program is recorded too as one activity per stage inside it
// (an instruction, or several fused into one tile loop). The runtime records each
// call that queued one of them too, on the calling thread, with the same
// correlation id (as CUPTI's runtime API records).
typedef enum {
  PTO_ACTIVITY_INSTRUCTION = 0,  // a launch of a one-instruction program (an eager op)
  PTO_ACTIVITY_COPY = 1,
  PTO_ACTIVITY_FILL = 2,
  PTO_ACTIVITY_PROGRAM = 3,      // a launch of a program of several instructions
  PTO_ACTIVITY_STAGE = 4,        // inside a program: a stage (an instruction, or fused ones)
  PTO_ACTIVITY_LAUNCH = 5,       // on a host thread: the runtime call that queued a program, copy or fill
} ptoActivityKind;

#define PTO_ACTIVITY_DETAIL_BYTES 192

typedef struct {
  char name[64];                             // the instruction's mnemonic, "program", "memcpy host-to-device" ...
  char detail[PTO_ACTIVITY_DETAIL_BYTES];    // the operands ("f32[4,16] <- f32[4,16], f32[1,16]")
  ptoActivityKind kind;
  int32_t device;
  uint64_t stream;                           // an identifier of the stream
  uint64_t start_ns, end_ns;                 // steady clock
  uint64_t bytes;                            // read and written
  double flops;
  uint64_t correlation_id;                   // shared by a launch and the activities it caused; 0: none
  uint64_t external_id;                      // a launch: the caller's innermost pushed id then, or 0
  uint64_t thread_id;                        // a launch: the OS id of the thread that made it
} ptoActivity;

ptoError ptoProfilerStart(void);
ptoError ptoProfilerStop(void);  // recorded activities stay until flushed
// Moves up to `capacity` recorded activities into `out`, oldest first; `*count` says how many.
ptoError ptoProfilerFlush(ptoActivity* out, size_t capacity, size_t* count);
int ptoProfilerEnabled(void);
uint64_t ptoProfilerNow(void);  // the clock activities use, in ns
// A second kind of consumer (torch.profiler beside pypto.Profiler's start/flush):
// while subscribed, `callback` receives every record as it is made, on the thread
// that makes it. Once Unsubscribe returns, no call to it is in flight.
typedef void (*ptoActivityCallback)(const ptoActivity* activity, void* user_data);
ptoError ptoProfilerSubscribe(ptoActivityCallback callback, void* user_data);
ptoError ptoProfilerUnsubscribe(ptoActivityCallback callback, void* user_data);
// The caller's own correlation ids (as cuptiActivityPushExternalCorrelationId):
// a launch this thread makes carries the innermost one as its external_id.
ptoError ptoProfilerPushExternalId(uint64_t id);
ptoError ptoProfilerPopExternalId(void);

}  // extern "C"
