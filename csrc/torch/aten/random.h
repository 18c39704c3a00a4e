// Random ops on pto: each is one PTO draw (tuniform, tnormal, trandint, tbernoulli,
// texponential) keyed by the pto generator's seed, at its offset, which the draw advances.
// torch.rand, randn, randint, bernoulli, dropout, exponential_ and randperm (a sort of
// random keys) reach them.
// Parameters PyTorch rejects, and dtypes PTO cannot draw, go to the CPU fallback, which
// raises PyTorch's message (or draws there from a CPU generator the pto one seeds).
#pragma once

#include <ATen/ATen.h>

namespace pto::torch_glue {

at::Tensor& normalInplace(at::Tensor& self, double mean, double std, std::optional<at::Generator> generator);
// Never 0 (texponential: a uniform of 0 counts as the draw's step), as on CUDA.
at::Tensor& exponentialInplace(at::Tensor& self, double lambd, std::optional<at::Generator> generator);
at::Tensor& uniformInplace(at::Tensor& self, double from, double to, std::optional<at::Generator> generator);
at::Tensor& randomFromTo(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                         std::optional<at::Generator> generator);
at::Tensor& randomTo(at::Tensor& self, int64_t to, std::optional<at::Generator> generator);
at::Tensor& randomFull(at::Tensor& self, std::optional<at::Generator> generator);
at::Tensor& bernoulliScalar(at::Tensor& self, double p, std::optional<at::Generator> generator);

// Per-element probabilities: uniforms below p. Probabilities outside [0, 1]
// would need a check on the host; the CPU kernel makes it and raises.
at::Tensor& bernoulliTensor(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> generator);

// PyTorch's fused dropout: the kept elements (probability 1 - p) scaled by 1 / (1 - p).
std::tuple<at::Tensor, at::Tensor> nativeDropout(const at::Tensor& input, double p, std::optional<bool> train);

// grad * mask * scale, promoted as PyTorch's kernel promotes it: integer and bool
// gradients give the default float dtype.
at::Tensor nativeDropoutBackward(const at::Tensor& grad_output, const at::Tensor& mask, double scale);

// normal(mean, std) with tensor parameters: standard normals, scaled and shifted.
at::Tensor normalTensorFloat(const at::Tensor& mean, double std, std::optional<at::Generator> generator);
at::Tensor normalFloatTensor(double mean, const at::Tensor& std, std::optional<at::Generator> generator);
at::Tensor normalTensorTensor(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> generator);

// multinomial's draws with replacement (more than one sample): the device half of
// at::native::multinomial_out, PyTorch's stub for pto (multinomial.cpp).
void multinomialWithReplacement(at::Tensor& result, const at::Tensor& self, int64_t n_sample,
                                std::optional<at::Generator> generator);

// A random permutation: the order that sorts n random 63-bit keys (trandint, then
// targsort; equal keys, a 2^-63 chance per pair, keep their order).
at::Tensor& randperm(int64_t n, std::optional<at::Generator> generator, at::Tensor& out);

}  // namespace pto::torch_glue
