// PrivateUse1 hooks: how torch's core asks about the pto backend (availability,
// devices, generators, pinned memory, pointer ownership, storage resize).
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Storage.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>

#include "device.h"
#include "pluggable_allocator.h"
#include "generator.h"
#include "pto_check.h"

namespace pto::torch_glue {
namespace {

std::atomic<bool> initialized{false};
// A child forked after the device started: it cannot use it (the runtime refuses), and
// torch.pto says so as torch.cuda does in one (is_initialized False, _is_in_bad_fork True).
std::atomic<bool> in_bad_fork{false};

struct PtoHooks final : public at::PrivateUse1HooksInterface {
  // torch's lazy device initialisation: the first tensor on pto, set_device, init().
  void init() const override {
    PTO_CHECK(ptoInit());
    [[maybe_unused]] static const int fork_handler = pthread_atfork(nullptr, nullptr, [] {
      in_bad_fork.store(initialized.load());
      initialized.store(false);
    });
    initialized.store(true);
  }
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return deviceCount() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return pto::torch_glue::deviceCount(); }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    pto::torch_glue::setCurrentDevice(device);
  }
  c10::DeviceIndex getCurrentDevice() const override { return currentDevice(); }

  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const c10::DeviceIndex previous = currentDevice();
    if (device != previous) pto::torch_glue::setCurrentDevice(device);
    return previous;
  }

  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    if (device < 0 || device >= pto::torch_glue::deviceCount()) return currentDevice();
    return exchangeDevice(device);
  }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return defaultGenerator(device_index);
  }

  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return makeGenerator(device_index);
  }

  at::Allocator* getPinnedMemoryAllocator() const override {
    return at::getHostAllocator(at::kPrivateUse1);
  }

  bool isPinnedPtr(const void* data) const override {
    ptoPointerAttributes attributes{};
    return ptoPointerGetAttributes(data, &attributes) == PTO_SUCCESS &&
           attributes.type == PTO_MEMORY_HOST_PINNED;
  }

  at::Device getDeviceFromPtr(void* data) const override {
    ptoPointerAttributes attributes{};
    PTO_CHECK(ptoPointerGetAttributes(data, &attributes));
    TORCH_CHECK(attributes.type == PTO_MEMORY_DEVICE, "pointer ", data,
                " is not pto device memory");
    return at::Device(at::kPrivateUse1, static_cast<c10::DeviceIndex>(attributes.device));
  }

  // Storage.resize_() on pto: new memory from the allocator, old bytes copied over.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_size) const override {
    TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
    const c10::DeviceGuard guard(storage.device());
    c10::DataPtr fresh = currentDeviceAllocator().allocate(new_size);
    const size_t kept = std::min(storage.nbytes(), new_size);
    if (kept > 0) {
      PTO_CHECK(ptoMemcpy(fresh.get(), storage.data(), kept, PTO_MEMCPY_DEVICE_TO_DEVICE));
    }
    storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(fresh));
    storage.unsafeGetStorageImpl()->set_nbytes(new_size);
  }
};

const bool registered = [] {
  static PtoHooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
  return true;
}();

}  // namespace

bool deviceInitialized() { return initialized.load(); }

bool inBadFork() { return in_bad_fork.load(); }

}  // namespace pto::torch_glue
