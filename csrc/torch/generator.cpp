#include "generator.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/DistributionsHelper.h>
#include <c10/core/GeneratorImpl.h>

#include <cstring>
#include <vector>

#include "device.h"

namespace pto::torch_glue {

PtoGeneratorImpl::PtoGeneratorImpl(c10::DeviceIndex device_index)
    : c10::GeneratorImpl(c10::Device(c10::kPrivateUse1, device_index),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(c10::default_rng_seed_val) {}

void PtoGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t PtoGeneratorImpl::current_seed() const { return seed_; }

uint64_t PtoGeneratorImpl::seed() {
  set_current_seed(c10::detail::getNonDeterministicRandom());
  return seed_;
}

void PtoGeneratorImpl::set_offset(uint64_t offset) { offset_ = offset; }
uint64_t PtoGeneratorImpl::get_offset() const { return offset_; }

void PtoGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && new_state.numel() == 16,
              "pto generator state must be a uint8 tensor of 16 bytes (seed, offset), not ",
              new_state.dtype(), " with ", new_state.numel(), " elements");
  const auto* bytes = static_cast<const uint8_t*>(new_state.data());
  std::memcpy(&seed_, bytes, sizeof seed_);
  std::memcpy(&offset_, bytes + 8, sizeof offset_);
}

c10::intrusive_ptr<c10::TensorImpl> PtoGeneratorImpl::get_state() const {
  at::Tensor state = at::empty({16}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(state.data_ptr<uint8_t>(), &seed_, sizeof seed_);
  std::memcpy(state.data_ptr<uint8_t>() + 8, &offset_, sizeof offset_);
  return state.getIntrusivePtr();
}

PhiloxDraw PtoGeneratorImpl::reserve(uint64_t blocks) {
  const PhiloxDraw draw{static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32), offset_};
  offset_ += blocks;
  return draw;
}

at::Generator PtoGeneratorImpl::forkCpuGenerator() {
  const PhiloxDraw draw = reserve(1);
  // splitmix64 of (seed, block): distinct blocks give unrelated CPU seeds.
  uint64_t mixed = (static_cast<uint64_t>(draw.key1) << 32 | draw.key0) ^ (draw.counter * 0x9E3779B97F4A7C15ull);
  mixed = (mixed ^ (mixed >> 30)) * 0xBF58476D1CE4E5B9ull;
  mixed = (mixed ^ (mixed >> 27)) * 0x94D049BB133111EBull;
  return at::make_generator<at::CPUGeneratorImpl>(mixed ^ (mixed >> 31));
}

PtoGeneratorImpl* PtoGeneratorImpl::clone_impl() const {
  auto* copy = new PtoGeneratorImpl(device().index());
  copy->seed_ = seed_;
  copy->offset_ = offset_;
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

}  // namespace pto::torch_glue
