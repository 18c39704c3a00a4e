// What the C entry points of pto_runtime.h share: resolving the driver, the
// calling thread's current device, and the checks and early returns every one
// of them writes the same way. Internal to csrc/runtime.
#pragma once

#include <cstdint>
#include <cstring>

#include "driver.h"
#include "driver_registry.h"
#include "error.h"

namespace pto::rt {

// The device the calling thread works on (ptoSetDevice); api_devices.cpp defines it.
extern constinit thread_local int32_t tls_current_device;

inline ptoError checkDevice(Driver* driver, int32_t device) {
  if (device < 0 || device >= driver->deviceCount()) {
    return failf(PTO_ERROR_INVALID_DEVICE, "invalid device index ", device, ": the ", driver->name(), " driver has ",
                 driver->deviceCount(), " device(s)");
  }
  return PTO_SUCCESS;
}

// An enum argument as the int a C caller passed. C lets a caller pass any int, most of
// which are no value of the C++ enum (its values span only its enumerators' bits), so
// it is read as bytes, never loaded as the enum (undefined, and UBSan says so), until
// it is known to be one of the enumerators.
template <class Enum>
int enumValue(const Enum& value) {
  static_assert(sizeof(Enum) == sizeof(int), "the C API's enums are int-sized");
  int raw = 0;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

// The null stream is the current device's default stream.
inline ptoError resolveStream(Driver* driver, ptoStream* stream) {
  if (*stream != nullptr) return PTO_SUCCESS;
  return driver->defaultStream(tls_current_device, stream);
}

}  // namespace pto::rt

// Every entry point starts with this: it resolves the driver or returns its error.
#define PTO_DRIVER_OR_RETURN(name)                              \
  ptoError name##_status = PTO_SUCCESS;                         \
  pto::rt::Driver* name = pto::rt::driverOrNull(&name##_status); \
  if (name == nullptr) return name##_status

#define PTO_RETURN_IF_ERROR(expr)                        \
  do {                                                   \
    ptoError pto_status_ = (expr);                       \
    if (pto_status_ != PTO_SUCCESS) return pto_status_;  \
  } while (0)

#define PTO_REQUIRE(cond, ...) \
  if (!(cond)) return pto::rt::failf(PTO_ERROR_INVALID_VALUE, __VA_ARGS__)
