#include "generator.h"

#include <ATen/CPUGeneratorImpl.h>

#include <memory>
#include <mutex>
#include <vector>

#include "device.h"

namespace pto::backend {

PtoGeneratorImpl::PtoGeneratorImpl(c10::DeviceIndex device_index)
    : c10::GeneratorImpl(c10::Device(c10::kPrivateUse1, device_index),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      engine_(at::make_generator<at::CPUGeneratorImpl>(c10::default_rng_seed_val)) {}

void PtoGeneratorImpl::set_current_seed(uint64_t seed) { engine_.set_current_seed(seed); }
uint64_t PtoGeneratorImpl::current_seed() const { return engine_.current_seed(); }
uint64_t PtoGeneratorImpl::seed() { return engine_.seed(); }
void PtoGeneratorImpl::set_offset(uint64_t offset) { engine_.set_offset(offset); }
uint64_t PtoGeneratorImpl::get_offset() const { return engine_.get_offset(); }

void PtoGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  engine_.unsafeGetGeneratorImpl()->set_state(new_state);
}

c10::intrusive_ptr<c10::TensorImpl> PtoGeneratorImpl::get_state() const {
  return engine_.unsafeGetGeneratorImpl()->get_state();
}

PtoGeneratorImpl* PtoGeneratorImpl::clone_impl() const {
  auto* copy = new PtoGeneratorImpl(device().index());
  copy->engine_ = engine_.clone();
  return copy;
}

const at::Generator& defaultGenerator(c10::DeviceIndex device_index) {
  static const std::vector<at::Generator> generators = [] {
    std::vector<at::Generator> made;
    for (c10::DeviceIndex i = 0; i < deviceCount(); ++i) {
      made.push_back(at::make_generator<PtoGeneratorImpl>(i));
    }
    return made;
  }();
  return generators.at(resolveDeviceIndex(device_index));
}

at::Generator makeGenerator(c10::DeviceIndex device_index) {
  return at::make_generator<PtoGeneratorImpl>(resolveDeviceIndex(device_index));
}

}  // namespace pto::backend
