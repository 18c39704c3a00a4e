// Activations pto runs as short sequences of native instructions, with the
// formulas of PyTorch's CPU kernels: elu (selu, celu), hardsigmoid, hardswish and
// mish, forward and backward. float16/bfloat16 compute in float32 and round once.
#include <torch/library.h>

#include "composite.h"

namespace pto::backend {
namespace {

// Registers functional, in-place and out= forms of an activation computed by `Fn`.
template <at::Tensor (*Fn)(const at::Tensor&)>
struct Activation {
  static at::Tensor functional(const at::Tensor& self) { return Fn(widened(self)).to(self.scalar_type()); }
  static at::Tensor& inplace(at::Tensor& self) { return self.copy_(Fn(widened(self))); }
  static at::Tensor& out(const at::Tensor& self, at::Tensor& result) { return assign(result, Fn(widened(self))); }
};

// x > 0 ? scale * x : alpha * scale * (exp(input_scale * x) - 1)
at::Tensor eluOf(const at::Tensor& self, const at::Scalar& alpha, const at::Scalar& scale,
                 const at::Scalar& input_scale) {
  const at::Tensor x = widened(self);
  const double negative = alpha.toDouble() * scale.toDouble();
  const at::Tensor below = at::expm1(at::mul(x, input_scale)).mul_(negative);
  return at::where(at::gt(x, 0), at::mul(x, scale), below).to(self.scalar_type());
}

at::Tensor& eluOut(const at::Tensor& self, const at::Scalar& alpha, const at::Scalar& scale,
                   const at::Scalar& input_scale, at::Tensor& out) {
  return assign(out, eluOf(self, alpha, scale, input_scale));
}

at::Tensor& eluInplace(at::Tensor& self, const at::Scalar& alpha, const at::Scalar& scale,
                       const at::Scalar& input_scale) {
  return self.copy_(eluOf(self, alpha, scale, input_scale));
}

// From the input, or (is_result) from the output y, as the CPU kernel takes it.
at::Tensor eluBackward(const at::Tensor& grad, const at::Scalar& alpha, const at::Scalar& scale,
                       const at::Scalar& input_scale, bool is_result, const at::Tensor& self_or_result) {
  const at::Tensor v = widened(self_or_result), g = widened(grad);
  const double negative = alpha.toDouble() * scale.toDouble(), inner = input_scale.toDouble();
  const at::Tensor slope = is_result ? at::add(v, negative).mul_(inner)
                                     : at::exp(at::mul(v, inner)).mul_(inner * negative);
  const at::Tensor chosen = at::where(at::le(v, 0), slope, at::full({}, scale.toDouble(), v.options()));
  return at::mul(g, chosen).to(grad.scalar_type());
}

at::Tensor& eluBackwardOut(const at::Tensor& grad, const at::Scalar& alpha, const at::Scalar& scale,
                           const at::Scalar& input_scale, bool is_result, const at::Tensor& self_or_result,
                           at::Tensor& grad_input) {
  return assign(grad_input, eluBackward(grad, alpha, scale, input_scale, is_result, self_or_result));
}

// min(max(x + 3, 0), 6) / 6
at::Tensor hardsigmoidOf(const at::Tensor& x) { return at::add(x, 3).clamp_(0, 6).div_(6); }

at::Tensor hardsigmoidBackward(const at::Tensor& grad, const at::Tensor& self) {
  const at::Tensor x = widened(self);
  const at::Tensor inside = at::logical_and(at::gt(x, -3), at::lt(x, 3));
  return at::where(inside, at::div(widened(grad), 6), at::zeros({}, x.options())).to(grad.scalar_type());
}

at::Tensor& hardsigmoidBackwardOut(const at::Tensor& grad, const at::Tensor& self, at::Tensor& grad_input) {
  return assign(grad_input, hardsigmoidBackward(grad, self));
}

// x * min(max(x + 3, 0), 6) / 6
at::Tensor hardswishOf(const at::Tensor& x) { return at::mul(x, at::add(x, 3).clamp_(0, 6)).div_(6); }

at::Tensor hardswishBackward(const at::Tensor& grad, const at::Tensor& self) {
  const at::Tensor x = widened(self), g = widened(grad);
  const at::Tensor middle = at::mul(g, at::div(x, 3).add_(0.5));
  const at::Tensor result = at::where(at::lt(x, -3), at::zeros({}, x.options()), at::where(at::le(x, 3), middle, g));
  return result.to(grad.scalar_type());
}

// x * tanh(log1p(exp(x)))
at::Tensor mishOf(const at::Tensor& x) { return at::mul(x, at::tanh(at::log1p(at::exp(x)))); }

at::Tensor mishBackward(const at::Tensor& grad, const at::Tensor& self) {
  const at::Tensor x = widened(self);
  const at::Tensor tanh_softplus = at::tanh(at::log1p(at::exp(x)));
  const at::Tensor slope = at::mul(x, at::sigmoid(x)).mul_(at::rsub(at::mul(tanh_softplus, tanh_softplus), 1));
  return at::mul(widened(grad), slope.add_(tanh_softplus)).to(grad.scalar_type());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("elu", TORCH_FN(eluOf));
  m.impl("elu_", TORCH_FN(eluInplace));
  m.impl("elu.out", TORCH_FN(eluOut));
  m.impl("elu_backward", TORCH_FN(eluBackward));
  m.impl("elu_backward.grad_input", TORCH_FN(eluBackwardOut));
  using Hardsigmoid = Activation<hardsigmoidOf>;
  m.impl("hardsigmoid", TORCH_FN(Hardsigmoid::functional));
  m.impl("hardsigmoid_", TORCH_FN(Hardsigmoid::inplace));
  m.impl("hardsigmoid.out", TORCH_FN(Hardsigmoid::out));
  m.impl("hardsigmoid_backward", TORCH_FN(hardsigmoidBackward));
  m.impl("hardsigmoid_backward.grad_input", TORCH_FN(hardsigmoidBackwardOut));
  using Hardswish = Activation<hardswishOf>;
  m.impl("hardswish", TORCH_FN(Hardswish::functional));
  m.impl("hardswish_", TORCH_FN(Hardswish::inplace));
  m.impl("hardswish.out", TORCH_FN(Hardswish::out));
  m.impl("hardswish_backward", TORCH_FN(hardswishBackward));
  using Mish = Activation<mishOf>;
  m.impl("mish", TORCH_FN(Mish::functional));
  m.impl("mish_", TORCH_FN(Mish::inplace));
  m.impl("mish.out", TORCH_FN(Mish::out));
  m.impl("mish_backward", TORCH_FN(mishBackward));
}

}  // namespace pto::backend
