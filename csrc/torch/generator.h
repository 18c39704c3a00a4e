// The per-device random generator of pto (torch.pto.manual_seed, torch.Generator("pto")).
//
// Like CUDA's, it is counter-based: its state is a seed and an offset. The PTO
// random instructions draw Philox4x32-10 blocks keyed by the seed, starting at the
// offset, and each draw advances the offset past the blocks it uses, so a seed
// reproduces a whole sequence of draws whatever the device's cores do.
#pragma once

#include <ATen/core/Generator.h>

namespace pto::torch_glue {

// Where one draw of Philox blocks starts: the key (the seed's two halves) and the counter.
struct PhiloxDraw {
  uint32_t key0, key1;
  uint64_t counter;
};

class PtoGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit PtoGeneratorImpl(c10::DeviceIndex device_index);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  // The state is 16 bytes, seed then offset (native byte order), as a CPU uint8 tensor.
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  // Reserves `blocks` Philox blocks for one draw (callers hold mutex_).
  PhiloxDraw reserve(uint64_t blocks);

  // A CPU generator seeded from the next block, for random ops that run on the
  // CPU fallback: they too are reproducible under torch.pto.manual_seed.
  at::Generator forkCpuGenerator();

 private:
  PtoGeneratorImpl* clone_impl() const override;

  uint64_t seed_;
  uint64_t offset_ = 0;  // in Philox blocks
};

const at::Generator& defaultGenerator(c10::DeviceIndex device_index);
at::Generator makeGenerator(c10::DeviceIndex device_index);

}  // namespace pto::torch_glue
