// The Driver interface: what a device backend must provide behind pto_runtime.h.
//
// The API layer (api.cpp) owns what is driver-independent: lazy initialisation,
// the per-thread current device, argument checks and error messages. A driver
// receives explicit device indices and already-validated arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "pto_runtime.h"

namespace pto::rt {

class Driver {
 public:
  virtual ~Driver() = default;

  virtual const char* name() const = 0;
  virtual int32_t deviceCount() const = 0;
  virtual ptoError synchronizeDevice(int32_t device) = 0;

  virtual ptoError malloc(int32_t device, size_t size, void** ptr) = 0;
  virtual ptoError free(void* ptr) = 0;
  virtual ptoError mallocHost(size_t size, void** ptr) = 0;
  virtual ptoError freeHost(void* ptr) = 0;
  virtual ptoError memGetInfo(int32_t device, size_t* free_bytes, size_t* total_bytes) = 0;
  virtual ptoError pointerGetAttributes(const void* ptr, ptoPointerAttributes* attributes) = 0;

  virtual ptoError memcpyAsync(void* dst, const void* src, size_t count, ptoMemcpyKind kind,
                               ptoStream stream) = 0;
  virtual ptoError memsetAsync(void* ptr, int value, size_t count, ptoStream stream) = 0;

  virtual ptoError defaultStream(int32_t device, ptoStream* stream) = 0;
  virtual ptoError streamCreate(int32_t device, ptoStream* stream) = 0;
  virtual ptoError streamDestroy(ptoStream stream) = 0;
  virtual ptoError streamSynchronize(ptoStream stream) = 0;
  virtual ptoError streamQuery(ptoStream stream) = 0;
  virtual ptoError streamWaitEvent(ptoStream stream, ptoEvent event) = 0;
  virtual ptoError streamGetDevice(ptoStream stream, int32_t* device) = 0;

  virtual ptoError eventCreate(ptoEvent* event) = 0;
  virtual ptoError eventDestroy(ptoEvent event) = 0;
  virtual ptoError eventRecord(ptoEvent event, ptoStream stream) = 0;
  virtual ptoError eventSynchronize(ptoEvent event) = 0;
  virtual ptoError eventQuery(ptoEvent event) = 0;
  virtual ptoError eventElapsedTime(float* milliseconds, ptoEvent start, ptoEvent end) = 0;

  virtual ptoError launchHostFunc(ptoStream stream, ptoHostFn fn, void* user_data) = 0;
  virtual ptoError launchKernel(ptoStream stream, const char* name, ptoKernelFn kernel,
                                const void* args, size_t arg_bytes) = 0;
};

// The simulated device: the default driver, always built.
std::unique_ptr<Driver> makeSimDriver();

}  // namespace pto::rt
