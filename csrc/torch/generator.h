// The per-device random generator of pto (torch.pto.manual_seed, torch.Generator("pto")).
//
// Random ops on pto draw from the generator's engine, a Mersenne Twister identical
// to torch's CPU generator: with the same seed, pto and CPU draw the same numbers.
#pragma once

#include <ATen/core/Generator.h>

namespace pto::backend {

class PtoGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit PtoGeneratorImpl(c10::DeviceIndex device_index);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  // The engine random kernels draw from.
  const at::Generator& engine() const { return engine_; }

 private:
  PtoGeneratorImpl* clone_impl() const override;

  at::Generator engine_;
};

const at::Generator& defaultGenerator(c10::DeviceIndex device_index);
at::Generator makeGenerator(c10::DeviceIndex device_index);

}  // namespace pto::backend
