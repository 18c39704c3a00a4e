#include "activation.h"

#include <ATen/Dispatch.h>
#include <ATen/Operators.h>
#include <ATen/WrapDimUtils.h>

#include <limits>

#include "../dtype_map.h"
#include "elementwise.h"
#include "fallback.h"

namespace pto::torch_glue {

namespace {

using recipes::AtenInstruction;
using recipes::atenInstruction;

// `row`'s instruction with `immediates` into `out` (a new tensor where undefined);
// undefined where pto has no kernel for the dtype (integers, complex), which the
// caller's fallback then gives the CPU's result or error.
Result activationOp(const AtenInstruction& row, const at::Tensor& self, const at::Tensor& out,
                    std::array<double, isa::kMaxImmediates> immediates) {
  return unaryOp(row.opcode, row.promotion, self, out, immediates);
}

std::array<double, isa::kMaxImmediates> eluImmediates(const at::Scalar& alpha, const at::Scalar& scale,
                                                      const at::Scalar& input_scale) {
  return {alpha.toDouble(), scale.toDouble(), input_scale.toDouble()};
}

// softshrink: x - lambd above lambd, x + lambd below -lambd, +0 between, NaN kept;
// lambd checked as the CPU's meta function checks and words it.
Result softshrinkOp(const at::Tensor& self, const at::Scalar& lambd, const at::Tensor& out) {
  const double l = lambd.toDouble();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, self.scalar_type(), "softshrink_check", [&] {
    const double limit = static_cast<double>(std::numeric_limits<scalar_t>::max());
    TORCH_CHECK(0 <= l && l <= limit, "lambda must be in range [0, ", limit, "] for input dtype ",
                self.scalar_type(), ", but found ", l);
  });
  return activationOp(atenInstruction("softshrink"), self, out, {l});
}

// x <= threshold ? value : x, the numbers as the CPU's kernel takes them (the value in
// the dtype, integers truncated), where one that does not fit raises its error.
// Undefined for the dtypes the CPU runs or refuses (bool, complex).
Result thresholdOp(const at::Tensor& self, const at::Scalar& threshold, const at::Scalar& value,
                   const at::Tensor& out) {
  const AtenInstruction& row = atenInstruction("threshold");
  const at::ScalarType type = self.scalar_type();
  if (!accepts(row.opcode, type) || !exactAsDouble(threshold) || !exactAsDouble(value)) {
    return Result::owned(at::Tensor());
  }
  checkThresholdFits(type, threshold);
  checkScalarFits(type, value);
  return activationOp(row, self, out, {threshold.toDouble(), value.toDouble()});
}

// lambd as hardshrink and the shrinks' gradients take it for `type`
// (recipes::hardshrinkLambd: bfloat16's rounded to bfloat16).
double shrinkLambd(at::ScalarType type, const at::Scalar& lambd) {
  const std::optional<isa::DType> dtype = ptoDType(type);
  return dtype ? recipes::hardshrinkLambd(*dtype, lambd.toDouble()) : lambd.toDouble();
}

// hardshrink: 0 where |x| <= lambd, x elsewhere.
Result hardshrinkOp(const at::Tensor& self, const at::Scalar& lambd, const at::Tensor& out) {
  return activationOp(atenInstruction("hardshrink"), self, out, {shrinkLambd(self.scalar_type(), lambd)});
}

// `row`'s gradient instruction of (grad, self) into `out` (a new tensor where
// undefined), the activation's number its immediate; undefined where pto has no kernel
// for the dtype.
Result gradientOp(const AtenInstruction& row, const at::Tensor& grad, const at::Tensor& self, const at::Tensor& out,
                  std::array<double, isa::kMaxImmediates> immediates = {}) {
  return binaryOp(row.opcode, row.promotion, grad, self, out, immediates);
}

// Both shrinks' gradient: grad where |x| > lambd.
Result shrinkBackwardOp(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lambd,
                        const at::Tensor& out) {
  return gradientOp(atenInstruction("hardshrink_backward"), grad, self, out,
                    {shrinkLambd(at::result_type(grad, self), lambd)});
}

// From the result (in-place leaky_relu_), the CPU's check: the result alone no longer
// tells the input's sign when the slope is negative.
Result leakyReluBackwardOp(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& slope,
                           bool self_is_result, const at::Tensor& out) {
  TORCH_CHECK(!self_is_result || slope.toDouble() >= 0.0,
              "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported. "
              "This is caused by calling in-place forward function with a negative slope, please call out-of-place "
              "version instead. File an issue at https://github.com/pytorch/pytorch if you do require supporting "
              "in-place leakRelu backward calculation with negative slope");
  return gradientOp(atenInstruction("leaky_relu_backward"), grad, self, out, {slope.toDouble()});
}

// From the input, or (is_result) from the output y, as the CPU kernel takes it; from
// the result (in-place elu_), the CPU's check: the result alone no longer tells the
// input's sign when alpha is negative.
Result eluBackwardOp(const at::Tensor& grad, const at::Scalar& alpha, const at::Scalar& scale,
                     const at::Scalar& input_scale, bool is_result, const at::Tensor& self_or_result,
                     const at::Tensor& out) {
  TORCH_CHECK(!is_result || alpha.toDouble() >= 0.0, "In-place elu backward calculation is triggered with a "
              "negative slope which is not supported. This is caused by calling in-place forward function with a "
              "negative slope, please call out-of-place version instead.");
  return gradientOp(atenInstruction("elu_backward"), grad, self_or_result, out,
                    {alpha.toDouble(), scale.toDouble(), input_scale.toDouble(), is_result ? 1.0 : 0.0});
}

}  // namespace

at::Tensor eluOf(const at::Tensor& self, const at::Scalar& alpha, const at::Scalar& scale,
                 const at::Scalar& input_scale) {
  at::Tensor r = *activationOp(atenInstruction("elu"), self, {}, eluImmediates(alpha, scale, input_scale));
  return r.defined() ? r : Fallback<ATEN_OP(elu)>::call(self, alpha, scale, input_scale);
}

at::Tensor& eluOut(const at::Tensor& self, const at::Scalar& alpha, const at::Scalar& scale,
                   const at::Scalar& input_scale, at::Tensor& out) {
  if (!activationOp(atenInstruction("elu"), self, out, eluImmediates(alpha, scale, input_scale))->defined()) {
    Fallback<ATEN_OP2(elu, out)>::call(self, alpha, scale, input_scale, out);
  }
  return out;
}

at::Tensor& eluInplace(at::Tensor& self, const at::Scalar& alpha, const at::Scalar& scale,
                       const at::Scalar& input_scale) {
  if (!activationOp(atenInstruction("elu"), self, self, eluImmediates(alpha, scale, input_scale))->defined()) {
    Fallback<ATEN_OP(elu_)>::call(self, alpha, scale, input_scale);
  }
  return self;
}

at::Tensor softplusOf(const at::Tensor& self, const at::Scalar& beta, const at::Scalar& threshold) {
  at::Tensor r = *activationOp(atenInstruction("softplus"), self, {}, {beta.toDouble(), threshold.toDouble()});
  return r.defined() ? r : Fallback<ATEN_OP(softplus)>::call(self, beta, threshold);
}

at::Tensor& softplusOut(const at::Tensor& self, const at::Scalar& beta, const at::Scalar& threshold, at::Tensor& out) {
  if (!activationOp(atenInstruction("softplus"), self, out, {beta.toDouble(), threshold.toDouble()})->defined()) {
    Fallback<ATEN_OP2(softplus, out)>::call(self, beta, threshold, out);
  }
  return out;
}

// The buffer is empty, as CUDA's: the CPU's holds exp(-|x|) for its backward, which
// pto's recomputes instead (torch's decomposition of the backward takes either).
std::tuple<at::Tensor, at::Tensor> logSigmoidForward(const at::Tensor& self) {
  at::Tensor r = *activationOp(atenInstruction("log_sigmoid_forward"), self, {}, {});
  if (!r.defined()) return Fallback<ATEN_OP(log_sigmoid_forward)>::call(self);
  return {r, at::empty({0}, self.options())};
}

std::tuple<at::Tensor&, at::Tensor&> logSigmoidForwardOut(const at::Tensor& self, at::Tensor& output,
                                                          at::Tensor& buffer) {
  if (!activationOp(atenInstruction("log_sigmoid_forward"), self, output, {})->defined()) {
    Fallback<ATEN_OP2(log_sigmoid_forward, output)>::call(self, output, buffer);
  }
  return {output, buffer};
}

// exp(-|x|) recomputed by the instruction: the buffer may be empty (pto's forward
// keeps none), and is then unread.
at::Tensor logSigmoidBackward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& buffer) {
  at::Tensor r = *gradientOp(atenInstruction("log_sigmoid_backward"), grad, self, {});
  return r.defined() ? r : Fallback<ATEN_OP(log_sigmoid_backward)>::call(grad, self, buffer);
}

at::Tensor& logSigmoidBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& buffer,
                                  at::Tensor& grad_input) {
  if (!gradientOp(atenInstruction("log_sigmoid_backward"), grad, self, grad_input)->defined()) {
    Fallback<ATEN_OP2(log_sigmoid_backward, grad_input)>::call(grad, self, buffer, grad_input);
  }
  return grad_input;
}

at::Tensor eluBackward(const at::Tensor& grad, const at::Scalar& alpha, const at::Scalar& scale,
                       const at::Scalar& input_scale, bool is_result, const at::Tensor& self_or_result) {
  at::Tensor r = *eluBackwardOp(grad, alpha, scale, input_scale, is_result, self_or_result, {});
  return r.defined() ? r : Fallback<ATEN_OP(elu_backward)>::call(grad, alpha, scale, input_scale, is_result, self_or_result);
}

at::Tensor& eluBackwardOut(const at::Tensor& grad, const at::Scalar& alpha, const at::Scalar& scale,
                           const at::Scalar& input_scale, bool is_result, const at::Tensor& self_or_result,
                           at::Tensor& grad_input) {
  if (!eluBackwardOp(grad, alpha, scale, input_scale, is_result, self_or_result, grad_input)->defined()) {
    Fallback<ATEN_OP2(elu_backward, grad_input)>::call(grad, alpha, scale, input_scale, is_result, self_or_result,
                                                       grad_input);
  }
  return grad_input;
}

at::Tensor softplusBackward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& beta,
                            const at::Scalar& threshold) {
  at::Tensor r = *gradientOp(atenInstruction("softplus_backward"), grad, self, {},
                             {beta.toDouble(), threshold.toDouble()});
  return r.defined() ? r : Fallback<ATEN_OP(softplus_backward)>::call(grad, self, beta, threshold);
}

at::Tensor& softplusBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& beta,
                                const at::Scalar& threshold, at::Tensor& grad_input) {
  if (!gradientOp(atenInstruction("softplus_backward"), grad, self, grad_input,
                  {beta.toDouble(), threshold.toDouble()})->defined()) {
    Fallback<ATEN_OP2(softplus_backward, grad_input)>::call(grad, self, beta, threshold, grad_input);
  }
  return grad_input;
}

at::Tensor hardtanhBackward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& min,
                            const at::Scalar& max) {
  at::Tensor r = *gradientOp(atenInstruction("hardtanh_backward"), grad, self, {}, {min.toDouble(), max.toDouble()});
  return r.defined() ? r : Fallback<ATEN_OP(hardtanh_backward)>::call(grad, self, min, max);
}

at::Tensor& hardtanhBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& min,
                                const at::Scalar& max, at::Tensor& grad_input) {
  if (!gradientOp(atenInstruction("hardtanh_backward"), grad, self, grad_input,
                  {min.toDouble(), max.toDouble()})->defined()) {
    Fallback<ATEN_OP2(hardtanh_backward, grad_input)>::call(grad, self, min, max, grad_input);
  }
  return grad_input;
}

at::Tensor hardswishBackward(const at::Tensor& grad, const at::Tensor& self) {
  at::Tensor r = *gradientOp(atenInstruction("hardswish_backward"), grad, self, {});
  return r.defined() ? r : Fallback<ATEN_OP(hardswish_backward)>::call(grad, self);
}

at::Tensor& hardswishBackwardOut(const at::Tensor& grad, const at::Tensor& self, at::Tensor& out) {
  if (!gradientOp(atenInstruction("hardswish_backward"), grad, self, out)->defined()) {
    Fallback<ATEN_OP2(hardswish_backward, out)>::call(grad, self, out);
  }
  return out;
}

at::Tensor leakyReluBackward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& slope,
                             bool self_is_result) {
  at::Tensor r = *leakyReluBackwardOp(grad, self, slope, self_is_result, {});
  return r.defined() ? r : Fallback<ATEN_OP(leaky_relu_backward)>::call(grad, self, slope, self_is_result);
}

at::Tensor& leakyReluBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& slope,
                                 bool self_is_result, at::Tensor& grad_input) {
  if (!leakyReluBackwardOp(grad, self, slope, self_is_result, grad_input)->defined()) {
    Fallback<ATEN_OP2(leaky_relu_backward, grad_input)>::call(grad, self, slope, self_is_result, grad_input);
  }
  return grad_input;
}

at::Tensor mishBackward(const at::Tensor& grad, const at::Tensor& self) {
  at::Tensor r = *gradientOp(atenInstruction("mish_backward"), grad, self, {});
  return r.defined() ? r : Fallback<ATEN_OP(mish_backward)>::call(grad, self);
}

// glu: the first half of `dim` gated by the sigmoid of the second.
at::Tensor gluOf(const at::Tensor& self, int64_t dim) {
  checkFloatingKernel("glu", self.scalar_type());
  const int64_t axis = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(self.size(axis) % 2 == 0, "Halving dimension must be even, but dimension ", axis, " is size ",
              self.size(axis));
  const auto halves = widened(self).chunk(2, axis);
  return at::mul(halves[0], at::sigmoid(halves[1])).to(self.scalar_type());
}

at::Tensor& gluOut(const at::Tensor& self, int64_t dim, at::Tensor& out) { return assign(out, gluOf(self, dim)); }

at::Tensor gluBackward(const at::Tensor& grad, const at::Tensor& self, int64_t dim) {
  const int64_t axis = at::maybe_wrap_dim(dim, self.dim());
  const auto halves = widened(self).chunk(2, axis);
  const at::Tensor gate = at::sigmoid(halves[1]), g = widened(grad);
  const at::Tensor first = at::mul(g, gate);
  const at::Tensor second = at::mul(first, halves[0]).mul_(at::rsub(gate, 1));
  return at::cat({first, second}, axis).to(grad.scalar_type());
}

at::Tensor& gluBackwardOut(const at::Tensor& grad, const at::Tensor& self, int64_t dim, at::Tensor& grad_input) {
  return assignPointwise(grad_input, {grad, self}, gluBackward(grad, self, dim));
}

// prelu's kernel (torch broadcasts the weight first): x > 0 ? x : weight * x.
at::Tensor preluKernel(const at::Tensor& self, const at::Tensor& weight) {
  checkFloatingKernel("prelu", self.scalar_type());
  return at::where(at::gt(self, 0), self, at::mul(weight, self));
}

std::tuple<at::Tensor, at::Tensor> preluKernelBackward(const at::Tensor& grad, const at::Tensor& self,
                                                       const at::Tensor& weight) {
  const at::Tensor positive = at::gt(self, 0);
  const at::Tensor zero = at::zeros({}, grad.options());
  return {at::where(positive, grad, at::mul(weight, grad)), at::where(positive, zero, at::mul(self, grad))};
}

// logit: log(x / (1 - x)), x clamped to [eps, 1 - eps] when eps is given.
at::Tensor logitOf(const at::Tensor& self, std::optional<double> eps) {
  const at::ScalarType type = at::isFloatingType(self.scalar_type()) ? self.scalar_type()
                                                                     : at::typeMetaToScalarType(at::get_default_dtype());
  if (self.is_complex()) checkFloatingKernel("logit", self.scalar_type());  // integers compute in `type`
  at::Tensor x = widened(self.to(type));
  if (eps) x = x.clamp(*eps, 1.0 - *eps);
  return at::log(at::div(x, at::rsub(x, 1))).to(type);
}

at::Tensor& logitOut(const at::Tensor& self, std::optional<double> eps, at::Tensor& out) {
  return assignPointwise(out, {self}, logitOf(self, eps));
}

at::Tensor& logitInplace(at::Tensor& self, std::optional<double> eps) { return assignInplace(self, logitOf(self, eps)); }

// grad / (x (1 - x)) inside [eps, 1 - eps], 0 outside (NaN everywhere for eps < 0, as the CPU).
at::Tensor logitBackward(const at::Tensor& grad, const at::Tensor& self, std::optional<double> eps) {
  const at::Tensor x = widened(self);
  at::Tensor gradient = at::div(widened(grad), at::mul(x, at::rsub(x, 1)));
  if (eps) {
    const at::Tensor outside = at::logical_or(at::lt(x, *eps), at::gt(x, 1.0 - *eps));
    gradient = *eps < 0 ? at::full_like(gradient, std::numeric_limits<double>::quiet_NaN())
                        : at::where(outside, at::zeros({}, gradient.options()), gradient);
  }
  return gradient.to(grad.scalar_type());
}

at::Tensor& logitBackwardOut(const at::Tensor& grad, const at::Tensor& self, std::optional<double> eps,
                             at::Tensor& grad_input) {
  return assignPointwise(grad_input, {grad, self}, logitBackward(grad, self, eps));
}

at::Tensor softshrinkOf(const at::Tensor& self, const at::Scalar& lambd) {
  at::Tensor r = *softshrinkOp(self, lambd, {});
  return r.defined() ? r : Fallback<ATEN_OP(softshrink)>::call(self, lambd);
}

at::Tensor& softshrinkOut(const at::Tensor& self, const at::Scalar& lambd, at::Tensor& out) {
  if (!softshrinkOp(self, lambd, out)->defined()) Fallback<ATEN_OP2(softshrink, out)>::call(self, lambd, out);
  return out;
}

at::Tensor hardshrinkOf(const at::Tensor& self, const at::Scalar& lambd) {
  at::Tensor r = *hardshrinkOp(self, lambd, {});
  return r.defined() ? r : Fallback<ATEN_OP(hardshrink)>::call(self, lambd);
}

at::Tensor& hardshrinkOut(const at::Tensor& self, const at::Scalar& lambd, at::Tensor& out) {
  if (!hardshrinkOp(self, lambd, out)->defined()) Fallback<ATEN_OP2(hardshrink, out)>::call(self, lambd, out);
  return out;
}

at::Tensor softshrinkBackward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lambd) {
  at::Tensor r = *shrinkBackwardOp(grad, self, lambd, {});
  return r.defined() ? r : Fallback<ATEN_OP(softshrink_backward)>::call(grad, self, lambd);
}

at::Tensor& softshrinkBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lambd,
                                  at::Tensor& grad_input) {
  if (!shrinkBackwardOp(grad, self, lambd, grad_input)->defined()) {
    Fallback<ATEN_OP2(softshrink_backward, grad_input)>::call(grad, self, lambd, grad_input);
  }
  return grad_input;
}

at::Tensor hardshrinkBackward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lambd) {
  at::Tensor r = *shrinkBackwardOp(grad, self, lambd, {});
  return r.defined() ? r : Fallback<ATEN_OP(hardshrink_backward)>::call(grad, self, lambd);
}

at::Tensor& hardshrinkBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lambd,
                                  at::Tensor& grad_input) {
  if (!shrinkBackwardOp(grad, self, lambd, grad_input)->defined()) {
    Fallback<ATEN_OP2(hardshrink_backward, grad_input)>::call(grad, self, lambd, grad_input);
  }
  return grad_input;
}

at::Tensor thresholdOf(const at::Tensor& self, const at::Scalar& threshold, const at::Scalar& value) {
  at::Tensor r = *thresholdOp(self, threshold, value, {});
  return r.defined() ? r : Fallback<ATEN_OP(threshold)>::call(self, threshold, value);
}

at::Tensor& thresholdOut(const at::Tensor& self, const at::Scalar& threshold, const at::Scalar& value,
                         at::Tensor& out) {
  if (!thresholdOp(self, threshold, value, out)->defined()) {
    Fallback<ATEN_OP2(threshold, out)>::call(self, threshold, value, out);
  }
  return out;
}

at::Tensor& thresholdInplace(at::Tensor& self, const at::Scalar& threshold, const at::Scalar& value) {
  const at::Tensor distinct = distinctElements(self);
  if (!thresholdOp(distinct, threshold, value, distinct)->defined()) {
    Fallback<ATEN_OP(threshold_)>::call(self, threshold, value);
  }
  return self;
}

}  // namespace pto::torch_glue
