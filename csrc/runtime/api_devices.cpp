// The C entry points for the driver, its devices and their memory: the calling
// thread's current device, device index checks, then a call into the driver.
#include "capture.h"
#include "entry_point.h"

namespace pto::rt {

constinit thread_local int32_t tls_current_device = 0;

}  // namespace pto::rt

using pto::rt::tls_current_device;

extern "C" {

ptoError ptoInit(void) {
  PTO_DRIVER_OR_RETURN(driver);
  return PTO_SUCCESS;
}

const char* ptoGetDriverName(void) {
  ptoError status = PTO_SUCCESS;
  pto::rt::Driver* driver = pto::rt::driverOrNull(&status);
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
  tls_current_device = device;
  return PTO_SUCCESS;
}

ptoError ptoGetDevice(int32_t* device) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(device != nullptr, "ptoGetDevice: device is null");
  *device = tls_current_device;
  return PTO_SUCCESS;
}

ptoError ptoDeviceSynchronize(void) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_RETURN_IF_ERROR(pto::rt::refuseWhileCapturing("ptoDeviceSynchronize", nullptr, tls_current_device));
  return driver->synchronizeDevice(tls_current_device);
}

ptoError ptoMalloc(void** ptr, size_t size) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(ptr != nullptr, "ptoMalloc: ptr is null");
  return driver->malloc(tls_current_device, size, ptr);
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
  return driver->memGetInfo(tls_current_device, free_bytes, total_bytes);
}

ptoError ptoPointerGetAttributes(const void* ptr, ptoPointerAttributes* attributes) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(attributes != nullptr, "ptoPointerGetAttributes: attributes is null");
  return driver->pointerGetAttributes(ptr, attributes);
}

ptoError ptoIpcGetMemHandle(ptoIpcMemHandle* handle, void* ptr) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(handle != nullptr, "ptoIpcGetMemHandle: handle is null");
  ptoPointerAttributes attributes{};
  PTO_RETURN_IF_ERROR(driver->pointerGetAttributes(ptr, &attributes));
  PTO_REQUIRE(attributes.type == PTO_MEMORY_DEVICE, "ptoIpcGetMemHandle: ", ptr, " is not device memory");
  PTO_REQUIRE(attributes.base == ptr, "ptoIpcGetMemHandle: ", ptr, " lies inside the device allocation at ",
              attributes.base, ": pass the allocation's base");
  return driver->ipcGetMemHandle(ptr, handle);
}

ptoError ptoIpcOpenMemHandle(void** ptr, ptoIpcMemHandle handle, unsigned int flags) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(ptr != nullptr, "ptoIpcOpenMemHandle: ptr is null");
  *ptr = nullptr;
  PTO_REQUIRE(flags == 0, "ptoIpcOpenMemHandle: flags must be 0, got ", flags);
  return driver->ipcOpenMemHandle(tls_current_device, handle, ptr);
}

ptoError ptoIpcCloseMemHandle(void* ptr) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(ptr != nullptr, "ptoIpcCloseMemHandle: ptr is null");
  return driver->ipcCloseMemHandle(ptr);
}

}  // extern "C"
