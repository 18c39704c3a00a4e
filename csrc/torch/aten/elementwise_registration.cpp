// The elementwise aten ops pto runs natively: the rows of aten_instructions.def,
// each registered by its form's family template (elementwise.h), and the Custom
// rows by hand. An op whose dtypes PTO lacks falls back to the CPU, counted as any
// fallback is.
#include <ATen/Operators.h>
#include <torch/library.h>

#include "recipes/aten_instructions.h"
#include "elementwise.h"

namespace pto::torch_glue {

using isa::Opcode;
using P = Promotion;

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
#define PTO_REGISTER_BinaryOutTensor(m, name, opcode, promotion)                                      \
  PTO_REGISTER_BINARY(m, name, OutTensor, opcode, promotion)

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
#define PTO_REGISTER_BinaryDefaultInplace(m, name, opcode, promotion)                                 \
  {                                                                                                   \
    PTO_REGISTER_BinaryDefault(m, name, opcode, promotion)                                            \
    using F = Binary<opcode, promotion, ATEN_OP(name), ATEN_OP2(name, out)>;                          \
    m.impl(#name "_", TORCH_FN(F::template inplace<ATEN_OP(name##_)>));                               \
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
#include "recipes/aten_instructions.def"
#undef PTO_ATEN_VARIANT
#undef PTO_ATEN

  PTO_REGISTER_SHIFT_OPERATORS(m, lshift, bitwise_left_shift)
  PTO_REGISTER_SHIFT_OPERATORS(m, rshift, bitwise_right_shift)
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
    m.impl("pow.Scalar", TORCH_FN(F::template functionalScalarSelf<ATEN_OP2(pow, Scalar)>));
    m.impl("pow.Scalar_out", TORCH_FN(F::template outScalarSelf<ATEN_OP2(pow, Scalar_out)>));
  }
  m.impl("pow.Tensor_Scalar", TORCH_FN(powTensorScalar));
  m.impl("pow_.Scalar", TORCH_FN(powTensorScalarInplace));
  m.impl("pow.Tensor_Scalar_out", TORCH_FN(powTensorScalarOut));
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
  m.impl("fill_.Tensor", TORCH_FN(fillTensor));
  m.impl("zero_", TORCH_FN(zero));
}

}  // namespace pto::torch_glue
