// The elementwise aten ops pto runs natively: the rows of aten_instructions.def,
// each registered by its form's family template, and the Custom rows by hand. An op
// whose dtypes PTO lacks falls back to the CPU, counted as any fallback is.
#include <ATen/native/BinaryOps.h>
#include <ATen/Operators.h>
#include <torch/library.h>

#include "aten_instructions.h"
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

// Whether gelu (or its gradient) takes its tanh approximation, checking the argument as torch does.
bool tanhApproximation(c10::string_view approximate) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh",
              "approximate argument must be either none or tanh.");
  return approximate == "tanh";
}

const AtenInstruction& geluRow(c10::string_view approximate) {
  return tanhApproximation(approximate) ? atenInstruction("gelu", "tanh") : atenInstruction("gelu");
}

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  const AtenInstruction& row = geluRow(approximate);
  at::Tensor r = unaryOp(row.opcode, row.promotion, self, {});
  return r.defined() ? r : Fallback<ATEN_OP(gelu)>::call(self, approximate);
}

at::Tensor& geluInplace(at::Tensor& self, c10::string_view approximate) {
  const AtenInstruction& row = geluRow(approximate);
  if (!unaryOp(row.opcode, row.promotion, self, self).defined()) {
    Fallback<ATEN_OP(gelu_)>::call(self, approximate);
  }
  return self;
}

at::Tensor& geluOut(const at::Tensor& self, c10::string_view approximate, at::Tensor& result) {
  const AtenInstruction& row = geluRow(approximate);
  if (!unaryOp(row.opcode, row.promotion, self, result).defined()) {
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
template <Opcode opcode, P promotion, class Op, class Out>
struct Gradient {
  static at::Tensor functional(const at::Tensor& grad, const at::Tensor& x) {
    at::Tensor r = binaryOp(opcode, promotion, grad, x, {});
    return r.defined() ? r : Fallback<Op>::call(grad, x);
  }
  static at::Tensor& out(const at::Tensor& grad, const at::Tensor& x, at::Tensor& result) {
    if (!binaryOp(opcode, promotion, grad, x, result).defined()) Fallback<Out>::call(grad, x, result);
    return result;
  }
};

at::Tensor thresholdBackward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& threshold) {
  const AtenInstruction& row = atenInstruction("threshold_backward");
  at::Tensor r = binaryOp(row.opcode, row.promotion, grad, self, {}, threshold.toDouble());
  return r.defined() ? r : Fallback<ATEN_OP(threshold_backward)>::call(grad, self, threshold);
}

at::Tensor& thresholdBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& threshold,
                                 at::Tensor& result) {
  const AtenInstruction& row = atenInstruction("threshold_backward");
  if (!binaryOp(row.opcode, row.promotion, grad, self, result, threshold.toDouble()).defined()) {
    Fallback<ATEN_OP2(threshold_backward, grad_input)>::call(grad, self, threshold, result);
  }
  return result;
}

const AtenInstruction& geluBackwardRow(c10::string_view approximate) {
  return tanhApproximation(approximate) ? atenInstruction("gelu_backward", "tanh") : atenInstruction("gelu_backward");
}

at::Tensor geluBackward(const at::Tensor& grad, const at::Tensor& self, c10::string_view approximate) {
  const AtenInstruction& row = geluBackwardRow(approximate);
  at::Tensor r = binaryOp(row.opcode, row.promotion, grad, self, {});
  return r.defined() ? r : Fallback<ATEN_OP(gelu_backward)>::call(grad, self, approximate);
}

at::Tensor& geluBackwardOut(const at::Tensor& grad, const at::Tensor& self, c10::string_view approximate,
                            at::Tensor& result) {
  const AtenInstruction& row = geluBackwardRow(approximate);
  if (!binaryOp(row.opcode, row.promotion, grad, self, result).defined()) {
    Fallback<ATEN_OP2(gelu_backward, grad_input)>::call(grad, self, approximate, result);
  }
  return result;
}

// div with a rounding mode: none is true division; "trunc" and "floor" are their
// variant rows (ttruncdiv, tfloordiv), which keep integer dtypes as PyTorch does.
// Another mode reaches the CPU, which names it in its error.
const AtenInstruction* roundingRow(std::optional<c10::string_view> mode) {
  if (mode == "trunc") return &atenInstruction("div", "trunc");
  if (mode == "floor") return &atenInstruction("div", "floor");
  return nullptr;
}

at::Tensor divMode(const at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode) {
  if (!mode) return at::div(self, other);
  const AtenInstruction* row = roundingRow(mode);
  at::Tensor r = row ? binaryOp(row->opcode, row->promotion, self, other, {}) : at::Tensor();
  return r.defined() ? r : Fallback<ATEN_OP2(div, Tensor_mode)>::call(self, other, mode);
}

at::Tensor& divModeInplace(at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode) {
  if (!mode) return self.div_(other);
  const AtenInstruction* row = roundingRow(mode);
  if (!row || !binaryOp(row->opcode, row->promotion, self, other, self).defined()) {
    Fallback<ATEN_OP2(div_, Tensor_mode)>::call(self, other, mode);
  }
  return self;
}

at::Tensor& divModeOut(const at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode,
                       at::Tensor& out) {
  if (!mode) return at::div_out(out, self, other);
  const AtenInstruction* row = roundingRow(mode);
  if (!row || !binaryOp(row->opcode, row->promotion, self, other, out).defined()) {
    Fallback<ATEN_OP2(div, out_mode)>::call(self, other, mode, out);
  }
  return out;
}

at::Tensor& fillScalar(at::Tensor& self, const at::Scalar& value) { return fill(self, value); }
at::Tensor& zero(at::Tensor& self) { return fill(self, 0); }

}  // namespace

// How each form of aten_instructions.def registers its op (see there). Custom rows
// are registered by hand below.
#define PTO_REGISTER_Unary(m, name, opcode, promotion)                                                \
  {                                                                                                   \
    using F = Unary<opcode, promotion, ATEN_OP(name), ATEN_OP(name##_), ATEN_OP2(name, out)>;         \
    m.impl(#name, TORCH_FN(F::functional));                                                           \
    m.impl(#name "_", TORCH_FN(F::inplace));                                                          \
    m.impl(#name ".out", TORCH_FN(F::out));                                                           \
  }

#define PTO_REGISTER_UnaryNoOut(m, name, opcode, promotion)                                           \
  {                                                                                                   \
    using F = Unary<opcode, promotion, ATEN_OP(name), ATEN_OP(name##_), ATEN_OP(name)>;               \
    m.impl(#name, TORCH_FN(F::functional));                                                           \
    m.impl(#name "_", TORCH_FN(F::inplace));                                                          \
  }

#define PTO_REGISTER_BINARY(m, name, out_overload, opcode, promotion)                                 \
  {                                                                                                   \
    using F = Binary<opcode, promotion, ATEN_OP2(name, Tensor), ATEN_OP2(name, out_overload)>;        \
    m.impl(#name ".Tensor", TORCH_FN(F::functional));                                                 \
    m.impl(#name "_.Tensor", TORCH_FN(F::template inplace<ATEN_OP2(name##_, Tensor)>));               \
    m.impl(#name "." #out_overload, TORCH_FN(F::out));                                                \
  }
#define PTO_REGISTER_Binary(m, name, opcode, promotion) PTO_REGISTER_BINARY(m, name, out, opcode, promotion)
#define PTO_REGISTER_BinaryTensorOut(m, name, opcode, promotion)                                      \
  PTO_REGISTER_BINARY(m, name, Tensor_out, opcode, promotion)

#define PTO_REGISTER_BinaryAlpha(m, name, opcode, promotion)                                          \
  {                                                                                                   \
    using F = BinaryWithAlpha<opcode, promotion, ATEN_OP2(name, Tensor), ATEN_OP2(name##_, Tensor),   \
                              ATEN_OP2(name, out)>;                                                   \
    m.impl(#name ".Tensor", TORCH_FN(F::functional));                                                 \
    m.impl(#name "_.Tensor", TORCH_FN(F::inplace));                                                   \
    m.impl(#name ".out", TORCH_FN(F::out));                                                           \
  }

#define PTO_REGISTER_BinaryDefault(m, name, opcode, promotion)                                        \
  {                                                                                                   \
    using F = Binary<opcode, promotion, ATEN_OP(name), ATEN_OP2(name, out)>;                          \
    m.impl(#name, TORCH_FN(F::functional));                                                           \
    m.impl(#name ".out", TORCH_FN(F::out));                                                           \
  }

#define PTO_REGISTER_Compare(m, name, opcode, promotion)                                              \
  {                                                                                                   \
    using F = Binary<opcode, promotion, ATEN_OP2(name, Tensor), ATEN_OP2(name, Tensor_out)>;          \
    m.impl(#name ".Tensor", TORCH_FN(F::functional));                                                 \
    m.impl(#name ".Tensor_out", TORCH_FN(F::out));                                                    \
    m.impl(#name "_.Tensor", TORCH_FN(F::template inplace<ATEN_OP2(name##_, Tensor)>));               \
    m.impl(#name ".Scalar", TORCH_FN(F::template functionalScalar<ATEN_OP2(name, Scalar)>));          \
    m.impl(#name ".Scalar_out", TORCH_FN(F::template outScalar<ATEN_OP2(name, Scalar_out)>));         \
    m.impl(#name "_.Scalar", TORCH_FN(F::template inplaceScalar<ATEN_OP2(name##_, Scalar)>));         \
  }

#define PTO_REGISTER_Gradient(m, name, opcode, promotion)                                             \
  {                                                                                                   \
    using F = Gradient<opcode, promotion, ATEN_OP(name), ATEN_OP2(name, grad_input)>;                 \
    m.impl(#name, TORCH_FN(F::functional));                                                           \
    m.impl(#name ".grad_input", TORCH_FN(F::out));                                                    \
  }

#define PTO_REGISTER_Custom(m, name, opcode, promotion)

// A shift's operators (x << y, x <<= y) run as its row's instruction.
#define PTO_REGISTER_SHIFT_OPERATORS(m, dunder, name)                                                 \
  {                                                                                                   \
    constexpr AtenInstruction row = atenInstruction(#name);                                           \
    using F = Binary<row.opcode, row.promotion, ATEN_OP2(name, Tensor), ATEN_OP2(name, Tensor_out)>;  \
    m.impl("__" #dunder "__.Tensor", TORCH_FN(F::functional));                                        \
    m.impl("__" #dunder "__.Scalar", TORCH_FN(F::template functionalScalar<ATEN_OP2(__##dunder##__, Scalar)>)); \
    m.impl("__i" #dunder "__.Tensor", TORCH_FN(F::template inplace<ATEN_OP2(__i##dunder##__, Tensor)>)); \
    m.impl("__i" #dunder "__.Scalar", TORCH_FN(F::template inplaceScalar<ATEN_OP2(__i##dunder##__, Scalar)>)); \
  }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define PTO_ATEN(op, form, instruction, promotion) PTO_REGISTER_##form(m, op, Opcode::instruction, P::promotion)
#define PTO_ATEN_VARIANT(op, argument, value, instruction, promotion)
#include "aten_instructions.def"
#undef PTO_ATEN_VARIANT
#undef PTO_ATEN

  PTO_REGISTER_SHIFT_OPERATORS(m, lshift, bitwise_left_shift)
  PTO_REGISTER_SHIFT_OPERATORS(m, rshift, bitwise_right_shift)
  {
    constexpr AtenInstruction row = atenInstruction("atan2");
    using F = Binary<row.opcode, row.promotion, ATEN_OP(atan2), ATEN_OP2(atan2, out)>;
    m.impl("atan2_", TORCH_FN(F::template inplace<ATEN_OP(atan2_)>));
  }
  {
    constexpr AtenInstruction row = atenInstruction("floor_divide");
    using F = Binary<row.opcode, row.promotion, ATEN_OP(floor_divide), ATEN_OP2(floor_divide, out)>;
    m.impl("floor_divide_.Tensor", TORCH_FN(F::template inplace<ATEN_OP2(floor_divide_, Tensor)>));
  }
  {
    constexpr AtenInstruction row = atenInstruction("pow");
    using F = Binary<row.opcode, row.promotion, ATEN_OP2(pow, Tensor_Tensor), ATEN_OP2(pow, Tensor_Tensor_out)>;
    m.impl("pow.Tensor_Tensor", TORCH_FN(F::functional));
    m.impl("pow.Tensor_Tensor_out", TORCH_FN(F::out));
    m.impl("pow_.Tensor", TORCH_FN(F::template inplace<ATEN_OP2(pow_, Tensor)>));
    m.impl("pow.Tensor_Scalar", TORCH_FN(F::template functionalScalar<ATEN_OP2(pow, Tensor_Scalar)>));
    m.impl("pow.Tensor_Scalar_out", TORCH_FN(F::template outScalar<ATEN_OP2(pow, Tensor_Scalar_out)>));
    m.impl("pow_.Scalar", TORCH_FN(F::template inplaceScalar<ATEN_OP2(pow_, Scalar)>));
  }
  m.impl("div.Tensor_mode", TORCH_FN(divMode));
  m.impl("div_.Tensor_mode", TORCH_FN(divModeInplace));
  m.impl("div.out_mode", TORCH_FN(divModeOut));
  m.impl("gelu", TORCH_FN(gelu));
  m.impl("gelu_", TORCH_FN(geluInplace));
  m.impl("gelu.out", TORCH_FN(geluOut));
  m.impl("gelu_backward", TORCH_FN(geluBackward));
  m.impl("gelu_backward.grad_input", TORCH_FN(geluBackwardOut));
  m.impl("threshold_backward", TORCH_FN(thresholdBackward));
  m.impl("threshold_backward.grad_input", TORCH_FN(thresholdBackwardOut));
  m.impl("where.self", TORCH_FN(where));
  m.impl("where.self_out", TORCH_FN(whereOut));
  m.impl("fill_.Scalar", TORCH_FN(fillScalar));
  m.impl("zero_", TORCH_FN(zero));
}

}  // namespace pto::backend
