// Pointwise aten ops pto runs as one or two native instructions: clamp,
// masked_fill, leaky_relu, softplus, isposinf/isneginf, the logical ops. Same formulas and NaN
// behaviour as PyTorch's CPU kernels.
#include <ATen/Operators.h>
#include <torch/library.h>

#include <limits>

#include "composite.h"
#include "fallback.h"

namespace pto::backend {
namespace {

at::Tensor scalarLike(const at::Tensor& t, const at::Scalar& value) {
  return at::full({}, value, t.options());
}

// clamp: max(min) then min(max); NaN propagates through both, as in PyTorch.
at::Tensor clampWith(const at::Tensor& self, const std::optional<at::Scalar>& low, const std::optional<at::Scalar>& high) {
  TORCH_CHECK(low || high, "torch.clamp: At least one of 'min' or 'max' must not be None");
  at::Tensor result = self;
  if (low) result = at::maximum(result, scalarLike(self, *low));
  if (high) result = at::minimum(result, scalarLike(self, *high));
  return result.is_same(self) ? self.clone() : result;
}

at::Tensor clamp(const at::Tensor& self, const std::optional<at::Scalar>& min, const std::optional<at::Scalar>& max) {
  return clampWith(self, min, max);
}
at::Tensor& clampOut(const at::Tensor& self, const std::optional<at::Scalar>& min, const std::optional<at::Scalar>& max,
                     at::Tensor& out) {
  return assignPointwise(out, {self}, clampWith(self, min, max));
}
at::Tensor& clampInplace(at::Tensor& self, const std::optional<at::Scalar>& min, const std::optional<at::Scalar>& max) {
  return self.copy_(clampWith(self, min, max));
}
at::Tensor clampMin(const at::Tensor& self, const at::Scalar& min) { return clampWith(self, min, std::nullopt); }
at::Tensor& clampMinOut(const at::Tensor& self, const at::Scalar& min, at::Tensor& out) {
  return assignPointwise(out, {self}, clampWith(self, min, std::nullopt));
}
at::Tensor& clampMinInplace(at::Tensor& self, const at::Scalar& min) { return self.copy_(clampWith(self, min, std::nullopt)); }
at::Tensor clampMax(const at::Tensor& self, const at::Scalar& max) { return clampWith(self, std::nullopt, max); }
at::Tensor& clampMaxOut(const at::Tensor& self, const at::Scalar& max, at::Tensor& out) {
  return assignPointwise(out, {self}, clampWith(self, std::nullopt, max));
}
at::Tensor& clampMaxInplace(at::Tensor& self, const at::Scalar& max) { return self.copy_(clampWith(self, std::nullopt, max)); }

// masked_fill_: tsel(mask, value, self) written over self.
// hardtanh is a clamp (relu6 included); its gradient passes strictly inside the range.
at::Tensor hardtanh(const at::Tensor& self, const at::Scalar& min, const at::Scalar& max) {
  return clampWith(self, min, max);
}
at::Tensor& hardtanhOut(const at::Tensor& self, const at::Scalar& min, const at::Scalar& max, at::Tensor& out) {
  return assignPointwise(out, {self}, clampWith(self, min, max));
}
at::Tensor& hardtanhInplace(at::Tensor& self, const at::Scalar& min, const at::Scalar& max) {
  return self.copy_(clampWith(self, min, max));
}
at::Tensor hardtanhBackward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& min,
                            const at::Scalar& max) {
  const at::Tensor outside = at::logical_or(at::le(self, min), at::ge(self, max));
  return at::where(outside, scalarLike(grad, 0), grad);
}
at::Tensor& hardtanhBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& min,
                                const at::Scalar& max, at::Tensor& grad_input) {
  return assignPointwise(grad_input, {grad, self}, hardtanhBackward(grad, self, min, max));
}

// log(exp(a) + exp(b)) as the CPU computes it: max + log1p(exp(-|a - b|)), and
// a itself where both are the same infinity. Complex operands have no maximum: the
// CPU's kernel takes them.
at::Tensor logaddexpOf(const at::Tensor& self, const at::Tensor& other) {
  at::ScalarType type = at::result_type(self, other);
  if (at::isComplexType(type)) return Fallback<ATEN_OP(logaddexp)>::call(self, other);
  if (!at::isFloatingType(type)) type = at::typeMetaToScalarType(at::get_default_dtype());
  const at::Tensor a = widened(self.to(type)), b = widened(other.to(type));
  const at::Tensor sum = at::add(at::maximum(a, b), at::log1p(at::exp(at::neg(at::abs(at::sub(a, b))))));
  return at::where(at::logical_and(at::isinf(a), at::eq(a, b)), a, sum).to(type);
}

at::Tensor& logaddexpOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return assignPointwise(out, {self, other}, logaddexpOf(self, other));
}

at::Tensor& maskedFillScalar(at::Tensor& self, const at::Tensor& mask, const at::Scalar& value) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  at::assert_no_partial_overlap(self, mask);
  return self.copy_(at::where(mask, scalarLike(self, value), self));
}

at::Tensor& maskedFillTensor(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  at::assert_no_partial_overlap(self, mask);
  return self.copy_(at::where(mask, value.to(self.device(), self.scalar_type()), self));
}

at::Tensor leakyReluOf(const at::Tensor& self, const at::Scalar& slope) {
  return at::where(at::gt(self, 0), self, at::mul(self, scalarLike(self, slope)));
}
at::Tensor& leakyReluOut(const at::Tensor& self, const at::Scalar& slope, at::Tensor& out) {
  return assignPointwise(out, {self}, leakyReluOf(self, slope));
}

// softplus(x) = log1p(exp(beta * x)) / beta, linear above the threshold.
at::Tensor softplusOf(const at::Tensor& self, const at::Scalar& beta, const at::Scalar& threshold) {
  const at::Tensor scaled = at::mul(self, scalarLike(self, beta));
  const at::Tensor smooth = at::div(at::log1p(at::exp(scaled)), scalarLike(self, beta));
  return at::where(at::gt(scaled, scalarLike(self, threshold)), self, smooth);
}
at::Tensor& softplusOut(const at::Tensor& self, const at::Scalar& beta, const at::Scalar& threshold, at::Tensor& out) {
  return assignPointwise(out, {self}, softplusOf(self, beta, threshold));
}

at::Tensor isInfinity(const at::Tensor& self, double infinity) {
  if (!at::isFloatingType(self.scalar_type())) return at::zeros(self.sizes(), self.options().dtype(at::kBool));
  return at::eq(self, infinity);
}
at::Tensor& isposinfOut(const at::Tensor& self, at::Tensor& out) {
  return assignPointwise(out, {self}, isInfinity(self, std::numeric_limits<double>::infinity()));
}
at::Tensor& isneginfOut(const at::Tensor& self, at::Tensor& out) {
  return assignPointwise(out, {self}, isInfinity(self, -std::numeric_limits<double>::infinity()));
}

// logical_*: on truth values, a bool result (or out's dtype).
at::Tensor truth(const at::Tensor& t) { return t.scalar_type() == at::kBool ? t : at::ne(t, 0); }

at::Tensor& logicalAndOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return assignPointwise(out, {self, other}, at::bitwise_and(truth(self), truth(other)));
}
at::Tensor& logicalOrOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return assignPointwise(out, {self, other}, at::bitwise_or(truth(self), truth(other)));
}
at::Tensor& logicalXorOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return assignPointwise(out, {self, other}, at::bitwise_xor(truth(self), truth(other)));
}
at::Tensor& logicalNotOut(const at::Tensor& self, at::Tensor& out) {
  return assignPointwise(out, {self}, at::bitwise_not(truth(self)));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("logical_and.out", TORCH_FN(logicalAndOut));
  m.impl("logical_or.out", TORCH_FN(logicalOrOut));
  m.impl("logical_xor.out", TORCH_FN(logicalXorOut));
  m.impl("logical_not.out", TORCH_FN(logicalNotOut));
  m.impl("clamp", TORCH_FN(clamp));
  m.impl("clamp.out", TORCH_FN(clampOut));
  m.impl("clamp_", TORCH_FN(clampInplace));
  m.impl("clamp_min", TORCH_FN(clampMin));
  m.impl("clamp_min.out", TORCH_FN(clampMinOut));
  m.impl("clamp_min_", TORCH_FN(clampMinInplace));
  m.impl("clamp_max", TORCH_FN(clampMax));
  m.impl("clamp_max.out", TORCH_FN(clampMaxOut));
  m.impl("clamp_max_", TORCH_FN(clampMaxInplace));
  m.impl("logaddexp", TORCH_FN(logaddexpOf));
  m.impl("logaddexp.out", TORCH_FN(logaddexpOut));
  m.impl("hardtanh", TORCH_FN(hardtanh));
  m.impl("hardtanh.out", TORCH_FN(hardtanhOut));
  m.impl("hardtanh_", TORCH_FN(hardtanhInplace));
  m.impl("hardtanh_backward", TORCH_FN(hardtanhBackward));
  m.impl("hardtanh_backward.grad_input", TORCH_FN(hardtanhBackwardOut));
  m.impl("masked_fill_.Scalar", TORCH_FN(maskedFillScalar));
  m.impl("masked_fill_.Tensor", TORCH_FN(maskedFillTensor));
  m.impl("leaky_relu", TORCH_FN(leakyReluOf));
  m.impl("leaky_relu.out", TORCH_FN(leakyReluOut));
  m.impl("softplus", TORCH_FN(softplusOf));
  m.impl("softplus.out", TORCH_FN(softplusOut));
  m.impl("isposinf.out", TORCH_FN(isposinfOut));
  m.impl("isneginf.out", TORCH_FN(isneginfOut));
}

}  // namespace pto::backend
