// The elementwise aten ops pto runs natively: one line per op, through family
// templates. An op whose dtypes PTO lacks falls back to the CPU, counted as any
// fallback is.
#include <ATen/native/BinaryOps.h>
#include <ATen/Operators.h>
#include <torch/library.h>

#include "elementwise.h"
#include "fallback.h"

namespace pto::backend {
namespace {

using isa::Opcode;
using P = Promotion;

at::Tensor wrapped(const at::Scalar& value) {
  at::Tensor tensor = c10::scalar_to_tensor(value);
  tensor.unsafeGetTensorImpl()->set_wrapped_number(true);
  return tensor;
}

// The instruction's alpha is a real immediate: a complex alpha takes the CPU path.
template <Opcode opcode, P promotion, class Op, class Inplace, class Out>
struct BinaryWithAlpha {
  static at::Tensor native(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,
                           const at::Tensor& out) {
    at::native::alpha_check(at::result_type(self, other), alpha);
    return alpha.isComplex() ? at::Tensor() : binaryOp(opcode, promotion, self, other, out, alpha.toDouble());
  }
  static at::Tensor functional(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
    at::Tensor r = native(self, other, alpha, {});
    return r.defined() ? r : Fallback<Op>::call(self, other, alpha);
  }
  static at::Tensor& inplace(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
    if (!native(self, other, alpha, self).defined()) Fallback<Inplace>::call(self, other, alpha);
    return self;
  }
  static at::Tensor& out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,
                         at::Tensor& result) {
    if (!native(self, other, alpha, result).defined()) Fallback<Out>::call(self, other, alpha, result);
    return result;
  }
};

template <Opcode opcode, P promotion, class Op, class Out>
struct Binary {
  static at::Tensor functional(const at::Tensor& self, const at::Tensor& other) {
    at::Tensor r = binaryOp(opcode, promotion, self, other, {});
    return r.defined() ? r : Fallback<Op>::call(self, other);
  }
  static at::Tensor& out(const at::Tensor& self, const at::Tensor& other, at::Tensor& result) {
    if (!binaryOp(opcode, promotion, self, other, result).defined()) Fallback<Out>::call(self, other, result);
    return result;
  }
  template <class Inplace>
  static at::Tensor& inplace(at::Tensor& self, const at::Tensor& other) {
    if (!binaryOp(opcode, promotion, self, other, self).defined()) Fallback<Inplace>::call(self, other);
    return self;
  }
  // The Tensor-Scalar overloads (eq.Scalar ...): the scalar as a wrapped number.
  template <class ScalarOp>
  static at::Tensor functionalScalar(const at::Tensor& self, const at::Scalar& other) {
    at::Tensor r = binaryOp(opcode, promotion, self, wrapped(other), {});
    return r.defined() ? r : Fallback<ScalarOp>::call(self, other);
  }
  template <class ScalarOut>
  static at::Tensor& outScalar(const at::Tensor& self, const at::Scalar& other, at::Tensor& result) {
    if (!binaryOp(opcode, promotion, self, wrapped(other), result).defined()) {
      Fallback<ScalarOut>::call(self, other, result);
    }
    return result;
  }
  template <class ScalarInplace>
  static at::Tensor& inplaceScalar(at::Tensor& self, const at::Scalar& other) {
    if (!binaryOp(opcode, promotion, self, wrapped(other), self).defined()) {
      Fallback<ScalarInplace>::call(self, other);
    }
    return self;
  }
};

template <Opcode opcode, P promotion, class Op, class Inplace, class Out>
struct Unary {
  static at::Tensor functional(const at::Tensor& self) {
    at::Tensor r = unaryOp(opcode, promotion, self, {});
    return r.defined() ? r : Fallback<Op>::call(self);
  }
  static at::Tensor& inplace(at::Tensor& self) {
    if (!unaryOp(opcode, promotion, self, self).defined()) Fallback<Inplace>::call(self);
    return self;
  }
  static at::Tensor& out(const at::Tensor& self, at::Tensor& result) {
    if (!unaryOp(opcode, promotion, self, result).defined()) Fallback<Out>::call(self, result);
    return result;
  }
};

Opcode geluOpcode(c10::string_view approximate) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh",
              "approximate argument must be either none or tanh.");
  return approximate == "tanh" ? Opcode::kGeluTanh : Opcode::kGelu;
}

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  at::Tensor r = unaryOp(geluOpcode(approximate), P::kCommon, self, {});
  return r.defined() ? r : Fallback<ATEN_OP(gelu)>::call(self, approximate);
}

at::Tensor& geluInplace(at::Tensor& self, c10::string_view approximate) {
  if (!unaryOp(geluOpcode(approximate), P::kCommon, self, self).defined()) {
    Fallback<ATEN_OP(gelu_)>::call(self, approximate);
  }
  return self;
}

at::Tensor& geluOut(const at::Tensor& self, c10::string_view approximate, at::Tensor& result) {
  if (!unaryOp(geluOpcode(approximate), P::kCommon, self, result).defined()) {
    Fallback<ATEN_OP2(gelu, out)>::call(self, approximate, result);
  }
  return result;
}

at::Tensor where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  at::Tensor r = whereOp(condition, self, other, {});
  return r.defined() ? r : Fallback<ATEN_OP2(where, self)>::call(condition, self, other);
}

at::Tensor& whereOut(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other,
                     at::Tensor& result) {
  if (!whereOp(condition, self, other, result).defined()) {
    Fallback<ATEN_OP2(where, self_out)>::call(condition, self, other, result);
  }
  return result;
}

// Activation gradients: (grad, x-or-y) -> grad_input, functional and .grad_input forms.
template <Opcode opcode, class Op, class Out>
struct Gradient {
  static at::Tensor functional(const at::Tensor& grad, const at::Tensor& x) {
    at::Tensor r = binaryOp(opcode, P::kCommon, grad, x, {});
    return r.defined() ? r : Fallback<Op>::call(grad, x);
  }
  static at::Tensor& out(const at::Tensor& grad, const at::Tensor& x, at::Tensor& result) {
    if (!binaryOp(opcode, P::kCommon, grad, x, result).defined()) Fallback<Out>::call(grad, x, result);
    return result;
  }
};

at::Tensor thresholdBackward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& threshold) {
  at::Tensor r = binaryOp(Opcode::kReluGrad, P::kCommon, grad, self, {}, threshold.toDouble());
  return r.defined() ? r : Fallback<ATEN_OP(threshold_backward)>::call(grad, self, threshold);
}

at::Tensor& thresholdBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& threshold,
                                 at::Tensor& result) {
  if (!binaryOp(Opcode::kReluGrad, P::kCommon, grad, self, result, threshold.toDouble()).defined()) {
    Fallback<ATEN_OP2(threshold_backward, grad_input)>::call(grad, self, threshold, result);
  }
  return result;
}

Opcode geluGradOpcode(c10::string_view approximate) {
  return geluOpcode(approximate) == Opcode::kGeluTanh ? Opcode::kGeluTanhGrad : Opcode::kGeluGrad;
}

at::Tensor geluBackward(const at::Tensor& grad, const at::Tensor& self, c10::string_view approximate) {
  at::Tensor r = binaryOp(geluGradOpcode(approximate), P::kCommon, grad, self, {});
  return r.defined() ? r : Fallback<ATEN_OP(gelu_backward)>::call(grad, self, approximate);
}

at::Tensor& geluBackwardOut(const at::Tensor& grad, const at::Tensor& self, c10::string_view approximate,
                            at::Tensor& result) {
  if (!binaryOp(geluGradOpcode(approximate), P::kCommon, grad, self, result).defined()) {
    Fallback<ATEN_OP2(gelu_backward, grad_input)>::call(grad, self, approximate, result);
  }
  return result;
}

at::Tensor& fillScalar(at::Tensor& self, const at::Scalar& value) { return fill(self, value); }
at::Tensor& zero(at::Tensor& self) { return fill(self, 0); }

}  // namespace

// Registers op.Tensor / op_.Tensor / op.out of an arithmetic op with alpha.
#define PTO_BINARY_ALPHA(m, name, opcode, promotion)                                                  \
  {                                                                                                   \
    using F = BinaryWithAlpha<opcode, promotion, ATEN_OP2(name, Tensor), ATEN_OP2(name##_, Tensor),   \
                              ATEN_OP2(name, out)>;                                                   \
    m.impl(#name ".Tensor", TORCH_FN(F::functional));                                                 \
    m.impl(#name "_.Tensor", TORCH_FN(F::inplace));                                                   \
    m.impl(#name ".out", TORCH_FN(F::out));                                                           \
  }

// Registers op.Tensor / op_.Tensor / op.<out_overload>.
#define PTO_BINARY(m, name, out_overload, opcode, promotion)                                          \
  {                                                                                                   \
    using F = Binary<opcode, promotion, ATEN_OP2(name, Tensor), ATEN_OP2(name, out_overload)>;        \
    m.impl(#name ".Tensor", TORCH_FN(F::functional));                                                 \
    m.impl(#name "_.Tensor", TORCH_FN(F::template inplace<ATEN_OP2(name##_, Tensor)>));               \
    m.impl(#name "." #out_overload, TORCH_FN(F::out));                                                \
  }

// Registers the six overloads of a comparison (Tensor and Scalar; functional, in-place, out).
#define PTO_COMPARE(m, name, opcode)                                                                  \
  {                                                                                                   \
    using F = Binary<opcode, P::kCompare, ATEN_OP2(name, Tensor), ATEN_OP2(name, Tensor_out)>;        \
    m.impl(#name ".Tensor", TORCH_FN(F::functional));                                                 \
    m.impl(#name ".Tensor_out", TORCH_FN(F::out));                                                    \
    m.impl(#name "_.Tensor", TORCH_FN(F::template inplace<ATEN_OP2(name##_, Tensor)>));               \
    m.impl(#name ".Scalar", TORCH_FN(F::template functionalScalar<ATEN_OP2(name, Scalar)>));          \
    m.impl(#name ".Scalar_out", TORCH_FN(F::template outScalar<ATEN_OP2(name, Scalar_out)>));         \
    m.impl(#name "_.Scalar", TORCH_FN(F::template inplaceScalar<ATEN_OP2(name##_, Scalar)>));         \
  }

// div with a rounding mode: none is true division; "trunc" and "floor" are
// ttruncdiv and tfloordiv, which keep integer dtypes as PyTorch does. Another
// mode reaches the CPU, which names it in its error.
std::optional<Opcode> roundingOpcode(std::optional<c10::string_view> mode) {
  if (mode == "trunc") return Opcode::kTruncDiv;
  if (mode == "floor") return Opcode::kFloorDiv;
  return std::nullopt;
}

at::Tensor divMode(const at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode) {
  if (!mode) return at::div(self, other);
  const auto opcode = roundingOpcode(mode);
  at::Tensor r = opcode ? binaryOp(*opcode, P::kCommon, self, other, {}) : at::Tensor();
  return r.defined() ? r : Fallback<ATEN_OP2(div, Tensor_mode)>::call(self, other, mode);
}

at::Tensor& divModeInplace(at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode) {
  if (!mode) return self.div_(other);
  const auto opcode = roundingOpcode(mode);
  if (!opcode || !binaryOp(*opcode, P::kCommon, self, other, self).defined()) {
    Fallback<ATEN_OP2(div_, Tensor_mode)>::call(self, other, mode);
  }
  return self;
}

at::Tensor& divModeOut(const at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode,
                       at::Tensor& out) {
  if (!mode) return at::div_out(out, self, other);
  const auto opcode = roundingOpcode(mode);
  if (!opcode || !binaryOp(*opcode, P::kCommon, self, other, out).defined()) {
    Fallback<ATEN_OP2(div, out_mode)>::call(self, other, mode, out);
  }
  return out;
}

// Registers a shift's operators (x << y, x <<= y) and its bitwise_*_shift forms.
#define PTO_SHIFT(m, dunder, name, opcode)                                                            \
  {                                                                                                   \
    using F = Binary<opcode, P::kCommon, ATEN_OP2(name, Tensor), ATEN_OP2(name, Tensor_out)>;         \
    m.impl(#name ".Tensor", TORCH_FN(F::functional));                                                 \
    m.impl(#name ".Tensor_out", TORCH_FN(F::out));                                                    \
    m.impl(#name "_.Tensor", TORCH_FN(F::template inplace<ATEN_OP2(name##_, Tensor)>));               \
    m.impl("__" #dunder "__.Tensor", TORCH_FN(F::functional));                                         \
    m.impl("__" #dunder "__.Scalar", TORCH_FN(F::template functionalScalar<ATEN_OP2(__##dunder##__, Scalar)>)); \
    m.impl("__i" #dunder "__.Tensor", TORCH_FN(F::template inplace<ATEN_OP2(__i##dunder##__, Tensor)>)); \
    m.impl("__i" #dunder "__.Scalar", TORCH_FN(F::template inplaceScalar<ATEN_OP2(__i##dunder##__, Scalar)>)); \
  }

// Registers op / op_ / op.out of a unary op.
#define PTO_UNARY(m, name, opcode, promotion)                                                         \
  {                                                                                                   \
    using F = Unary<opcode, promotion, ATEN_OP(name), ATEN_OP(name##_), ATEN_OP2(name, out)>;         \
    m.impl(#name, TORCH_FN(F::functional));                                                           \
    m.impl(#name "_", TORCH_FN(F::inplace));                                                          \
    m.impl(#name ".out", TORCH_FN(F::out));                                                           \
  }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  PTO_BINARY_ALPHA(m, add, Opcode::kAdd, P::kCommon)
  PTO_BINARY_ALPHA(m, sub, Opcode::kSub, P::kCommon)
  PTO_BINARY(m, mul, out, Opcode::kMul, P::kCommon)
  PTO_BINARY(m, div, out, Opcode::kDiv, P::kIntToFloat)
  PTO_BINARY(m, bitwise_and, Tensor_out, Opcode::kAnd, P::kCommon)
  PTO_BINARY(m, bitwise_or, Tensor_out, Opcode::kOr, P::kCommon)
  PTO_BINARY(m, bitwise_xor, Tensor_out, Opcode::kXor, P::kCommon)
  PTO_SHIFT(m, lshift, bitwise_left_shift, Opcode::kShiftLeft)
  PTO_SHIFT(m, rshift, bitwise_right_shift, Opcode::kShiftRight)
  {
    using F = Binary<Opcode::kMax, P::kCommon, ATEN_OP(maximum), ATEN_OP2(maximum, out)>;
    m.impl("maximum", TORCH_FN(F::functional));
    m.impl("maximum.out", TORCH_FN(F::out));
  }
  {
    using F = Binary<Opcode::kMin, P::kCommon, ATEN_OP(minimum), ATEN_OP2(minimum, out)>;
    m.impl("minimum", TORCH_FN(F::functional));
    m.impl("minimum.out", TORCH_FN(F::out));
  }
  {
    using F = Binary<Opcode::kPow, P::kCommon, ATEN_OP2(pow, Tensor_Tensor), ATEN_OP2(pow, Tensor_Tensor_out)>;
    m.impl("pow.Tensor_Tensor", TORCH_FN(F::functional));
    m.impl("pow.Tensor_Tensor_out", TORCH_FN(F::out));
    m.impl("pow_.Tensor", TORCH_FN(F::template inplace<ATEN_OP2(pow_, Tensor)>));
    m.impl("pow.Tensor_Scalar", TORCH_FN(F::template functionalScalar<ATEN_OP2(pow, Tensor_Scalar)>));
    m.impl("pow.Tensor_Scalar_out", TORCH_FN(F::template outScalar<ATEN_OP2(pow, Tensor_Scalar_out)>));
    m.impl("pow_.Scalar", TORCH_FN(F::template inplaceScalar<ATEN_OP2(pow_, Scalar)>));
  }
  {
    using F = Binary<Opcode::kFmod, P::kCommon, ATEN_OP2(fmod, Tensor), ATEN_OP2(fmod, Tensor_out)>;
    m.impl("fmod.Tensor", TORCH_FN(F::functional));
    m.impl("fmod.Tensor_out", TORCH_FN(F::out));
    m.impl("fmod_.Tensor", TORCH_FN(F::template inplace<ATEN_OP2(fmod_, Tensor)>));
  }
  {
    using F = Binary<Opcode::kRemainder, P::kCommon, ATEN_OP2(remainder, Tensor), ATEN_OP2(remainder, Tensor_out)>;
    m.impl("remainder.Tensor", TORCH_FN(F::functional));
    m.impl("remainder.Tensor_out", TORCH_FN(F::out));
    m.impl("remainder_.Tensor", TORCH_FN(F::template inplace<ATEN_OP2(remainder_, Tensor)>));
  }
  m.impl("div.Tensor_mode", TORCH_FN(divMode));
  m.impl("div_.Tensor_mode", TORCH_FN(divModeInplace));
  m.impl("div.out_mode", TORCH_FN(divModeOut));
  {
    using F = Binary<Opcode::kFloorDiv, P::kCommon, ATEN_OP(floor_divide), ATEN_OP2(floor_divide, out)>;
    m.impl("floor_divide", TORCH_FN(F::functional));
    m.impl("floor_divide.out", TORCH_FN(F::out));
    m.impl("floor_divide_.Tensor", TORCH_FN(F::template inplace<ATEN_OP2(floor_divide_, Tensor)>));
  }
  {
    using F = Binary<Opcode::kAtan2, P::kIntToFloat, ATEN_OP(atan2), ATEN_OP2(atan2, out)>;
    m.impl("atan2", TORCH_FN(F::functional));
    m.impl("atan2.out", TORCH_FN(F::out));
    m.impl("atan2_", TORCH_FN(F::template inplace<ATEN_OP(atan2_)>));
  }
  PTO_COMPARE(m, eq, Opcode::kEq)
  PTO_COMPARE(m, ne, Opcode::kNe)
  PTO_COMPARE(m, lt, Opcode::kLt)
  PTO_COMPARE(m, le, Opcode::kLe)
  PTO_COMPARE(m, gt, Opcode::kGt)
  PTO_COMPARE(m, ge, Opcode::kGe)

  PTO_UNARY(m, abs, Opcode::kAbs, P::kCommon)
  PTO_UNARY(m, neg, Opcode::kNeg, P::kCommon)
  PTO_UNARY(m, sign, Opcode::kSign, P::kCommon)
  PTO_UNARY(m, sgn, Opcode::kSign, P::kCommon)  // sign for real dtypes; complex ones fall back
  PTO_UNARY(m, bitwise_not, Opcode::kNot, P::kCommon)
  PTO_UNARY(m, exp, Opcode::kExp, P::kIntToFloat)
  PTO_UNARY(m, exp2, Opcode::kExp2, P::kIntToFloat)
  PTO_UNARY(m, expm1, Opcode::kExpm1, P::kIntToFloat)
  PTO_UNARY(m, log, Opcode::kLog, P::kIntToFloat)
  PTO_UNARY(m, log2, Opcode::kLog2, P::kIntToFloat)
  PTO_UNARY(m, log1p, Opcode::kLog1p, P::kIntToFloat)
  PTO_UNARY(m, sqrt, Opcode::kSqrt, P::kIntToFloat)
  PTO_UNARY(m, rsqrt, Opcode::kRsqrt, P::kIntToFloat)
  PTO_UNARY(m, reciprocal, Opcode::kRecip, P::kIntToFloat)
  PTO_UNARY(m, sin, Opcode::kSin, P::kIntToFloat)
  PTO_UNARY(m, cos, Opcode::kCos, P::kIntToFloat)
  PTO_UNARY(m, tan, Opcode::kTan, P::kIntToFloat)
  PTO_UNARY(m, tanh, Opcode::kTanh, P::kIntToFloat)
  PTO_UNARY(m, sigmoid, Opcode::kSigmoid, P::kIntToFloat)
  PTO_UNARY(m, erf, Opcode::kErf, P::kIntToFloat)
  PTO_UNARY(m, floor, Opcode::kFloor, P::kCommon)
  PTO_UNARY(m, ceil, Opcode::kCeil, P::kCommon)
  PTO_UNARY(m, round, Opcode::kRound, P::kCommon)
  PTO_UNARY(m, trunc, Opcode::kTrunc, P::kCommon)
  PTO_UNARY(m, silu, Opcode::kSilu, P::kCommon)
  {
    using F = Unary<Opcode::kRelu, P::kCommon, ATEN_OP(relu), ATEN_OP(relu_), ATEN_OP(relu)>;
    m.impl("relu", TORCH_FN(F::functional));
    m.impl("relu_", TORCH_FN(F::inplace));
  }
  m.impl("gelu", TORCH_FN(gelu));
  m.impl("gelu_", TORCH_FN(geluInplace));
  m.impl("gelu.out", TORCH_FN(geluOut));
  m.impl("where.self", TORCH_FN(where));
  m.impl("where.self_out", TORCH_FN(whereOut));
  m.impl("threshold_backward", TORCH_FN(thresholdBackward));
  m.impl("threshold_backward.grad_input", TORCH_FN(thresholdBackwardOut));
  m.impl("gelu_backward", TORCH_FN(geluBackward));
  m.impl("gelu_backward.grad_input", TORCH_FN(geluBackwardOut));
  {
    using F = Gradient<Opcode::kSiluGrad, ATEN_OP(silu_backward), ATEN_OP2(silu_backward, grad_input)>;
    m.impl("silu_backward", TORCH_FN(F::functional));
    m.impl("silu_backward.grad_input", TORCH_FN(F::out));
  }
  {
    using F = Gradient<Opcode::kSigmoidGrad, ATEN_OP(sigmoid_backward), ATEN_OP2(sigmoid_backward, grad_input)>;
    m.impl("sigmoid_backward", TORCH_FN(F::functional));
    m.impl("sigmoid_backward.grad_input", TORCH_FN(F::out));
  }
  {
    using F = Gradient<Opcode::kTanhGrad, ATEN_OP(tanh_backward), ATEN_OP2(tanh_backward, grad_input)>;
    m.impl("tanh_backward", TORCH_FN(F::functional));
    m.impl("tanh_backward.grad_input", TORCH_FN(F::out));
  }
  m.impl("fill_.Scalar", TORCH_FN(fillScalar));
  m.impl("zero_", TORCH_FN(zero));
}

}  // namespace pto::backend
