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
//    records/waits and host functions return at once and run in stream order;
//  - an error raised by asynchronous work is sticky on its stream and is
//    returned, naming the failing op, by the next synchronize/query of that
//    stream (or of its device); reporting it clears it.
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

// A host function queued on a stream (aclrtLaunchHostFunc / aclrtLaunchCallback).
typedef void (*ptoHostFn)(void* user_data);

// A device kernel. On the sim driver it runs on the stream's worker thread with
// a private copy of the argument block given at launch; a non-success return
// makes the stream's error sticky under the kernel's name.
typedef ptoError (*ptoKernelFn)(const void* args);

// Largest argument block a kernel launch carries inline (as CUDA/ACL limit params).
#define PTO_MAX_KERNEL_ARG_BYTES 256

const char* ptoGetErrorName(ptoError error);
const char* ptoGetRecentErrMsg(void);
// For kernels: records why the kernel fails (the message its stream's sticky
// error will carry) and returns `error`, so a kernel can `return ptoSetKernelError(...)`.
ptoError ptoSetKernelError(ptoError error, const char* message);

// Driver selection and devices.
ptoError ptoInit(void);
const char* ptoGetDriverName(void);  // "sim" or "acl"
ptoError ptoGetDeviceCount(int32_t* count);
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

// Work submission.
ptoError ptoLaunchHostFunc(ptoStream stream, ptoHostFn fn, void* user_data);
// `name` is kept, not copied: it must outlive the launch (a string literal does).
ptoError ptoLaunchKernel(ptoStream stream, const char* name, ptoKernelFn kernel,
                         const void* args, size_t arg_bytes);

// Profiling (as CUPTI activities or aclprof): while started, every kernel, copy and
// fill a stream executes is recorded with its stream, device and start and end
// times; kernels annotate their own record with what they read and wrote, and a
// kernel that runs several instructions (a compiled program) records one activity
// per instruction or fused kernel inside it.
typedef enum {
  PTO_ACTIVITY_KERNEL = 0,       // one launched kernel (an eager instruction)
  PTO_ACTIVITY_COPY = 1,
  PTO_ACTIVITY_FILL = 2,
  PTO_ACTIVITY_PROGRAM = 3,      // a launch holding the activities recorded inside it
  PTO_ACTIVITY_INSTRUCTION = 4,  // inside a program: an instruction or a fused kernel
} ptoActivityKind;

#define PTO_ACTIVITY_DETAIL_BYTES 192

typedef struct {
  char name[64];                             // the kernel's name, or "copy HtoD" ...
  char detail[PTO_ACTIVITY_DETAIL_BYTES];    // operands, as the kernel annotated them
  ptoActivityKind kind;
  int32_t device;
  uint64_t stream;                           // an identifier of the stream
  uint64_t start_ns, end_ns;                 // steady clock
  uint64_t bytes;                            // read and written
  double flops;
} ptoActivity;

ptoError ptoProfilerStart(void);
ptoError ptoProfilerStop(void);  // recorded activities stay until flushed
// Moves up to `capacity` recorded activities into `out`, oldest first; `*count` says how many.
ptoError ptoProfilerFlush(ptoActivity* out, size_t capacity, size_t* count);
int ptoProfilerEnabled(void);
uint64_t ptoProfilerNow(void);  // the clock activities use, in ns
// For kernels, while profiling: what the running kernel's activity reads, writes and
// computes; and activities inside it (kind, name and times are the caller's; stream
// and device are filled in from the running kernel's).
void ptoProfilerAnnotate(const char* detail, uint64_t bytes, double flops);
void ptoProfilerRecordInside(const ptoActivity* activity);

}  // extern "C"
