// Elementwise aten ops as PTO instructions: type promotion, broadcasting, and
// the functional, in-place and out= forms, with PyTorch's rules and messages.
// An op whose dtypes PTO lacks (complex, ...) goes to the CPU fallback.
#pragma once

#include <ATen/ATen.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/TypeProperties.h>

#include <functional>
#include <initializer_list>

#include "recipes/aten_instructions.h"
#include "fallback.h"
#include "instruction_launch.h"

namespace pto::torch_glue {

// The one-instruction recipes' rows (csrc/recipes), named as the eager kernels use them.
using recipes::AtenInstruction;
using recipes::atenInstruction;
using recipes::Promotion;

// The result of an op run as its instruction: a new tensor (owned) where out is
// undefined (functional); out itself, borrowed (a copy of a tensor Python holds takes
// the GIL: TensorRef), where it is self (in-place) or an out= tensor; an undefined
// tensor where PTO cannot run it (the caller falls back).
using Result = c10::MaybeOwned<at::Tensor>;

Result binaryOp(isa::Opcode opcode, Promotion promotion, const at::Tensor& self, const at::Tensor& other,
                const at::Tensor& out, std::array<double, isa::kMaxImmediates> immediates = {1.0});
Result unaryOp(isa::Opcode opcode, Promotion promotion, const at::Tensor& self, const at::Tensor& out,
               std::array<double, isa::kMaxImmediates> immediates = {});
Result whereOp(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other, const at::Tensor& out);
// A Ternary instruction (taddcmul/taddcdiv: self + value * tensor1 (* or /) tensor2; tclamp,
// tlerpw) in one pass, in the three inputs' promoted dtype; in place (out is self), the
// inputs' broadcast shape checked against self's, whatever follows. Undefined where PTO
// cannot run it (the caller composes it or falls back).
Result ternaryOp(isa::Opcode opcode, const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                 const at::Tensor& out, const at::Scalar& value);

// dst <- src (same shape) on one pto device: tmov, or tcvt when the dtypes differ.
// Returns false when PTO lacks one of the dtypes.
bool copyOnDevice(const at::Tensor& dst, const at::Tensor& src);

// A new result of an elementwise op over `inputs` (broadcast to `shape`), laid out as
// TensorIterator lays out the CPU's: channels_last stays channels_last, a permuted
// input gives a permuted result, an ambiguous one (N, C, 1, 1) keeps its strides.
at::Tensor elementwiseResult(TensorRefs inputs, c10::IntArrayRef shape,
                             at::ScalarType result, const c10::Device& device);

at::Tensor& fill(at::Tensor& self, const at::Scalar& value);  // falls back itself if needed

// The CPU's kernels convert a number argument to their dtype with Scalar::to<T>, which
// refuses one outside its range ("value cannot be converted to type float without
// overflow"): the same check, at the call.
void checkScalarFits(at::ScalarType type, const at::Scalar& value);

// threshold's and threshold_backward's CPU kernels take their threshold in float32 for
// float16/bfloat16 (unrounded to the dtype), in the dtype otherwise: the same check.
void checkThresholdFits(at::ScalarType type, const at::Scalar& threshold);

// Whether a number survives an instruction's immediate, a double: integers beyond 2^53
// may not.
bool exactAsDouble(const at::Scalar& value);

// A Scalar argument as torch passes it to the Tensor overload: a wrapped number.
at::Tensor wrapped(const at::Scalar& value);

// at::result_type of all the operands at once, torch's own promotion (at::native's
// result-type state), without the dispatcher's way to it: ~800 of a small binary op's ~11k
// instructions. All at once, not pairwise: a 0-dim operand's dtype counts only where no
// dimensioned operand is of its category, which promoting pairs would lose.
template <class... Tensors>
at::ScalarType resultType(const Tensors&... operands) {
  at::native::ResultTypeState state;
  ((state = at::native::update_result_type_state(operands, state)), ...);
  return at::native::result_type(state);
}

// The families elementwise_registration.cpp stamps per row of aten_instructions.def:
// the row's instruction, else the CPU fallback (Op, Inplace, Out: the aten overloads).

// The instruction's alpha is a real immediate: a complex alpha takes the CPU path.
template <isa::Opcode opcode, Promotion promotion, class Op, class Inplace, class Out>
struct BinaryWithAlpha {
  static Result native(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,
                       const at::Tensor& out) {
    if constexpr (opcode == isa::Opcode::kSub) at::native::sub_check(self, other);  // bool operands
    at::native::alpha_check(resultType(self, other), alpha);
    if (alpha.isComplex()) return Result::owned(at::Tensor());
    return binaryOp(opcode, promotion, self, other, out, {alpha.toDouble()});
  }
  static at::Tensor functional(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
    at::Tensor r = *native(self, other, alpha, {});
    return r.defined() ? r : Fallback<Op>::call(self, other, alpha);
  }
  static at::Tensor& inplace(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
    if (!native(self, other, alpha, self)->defined()) Fallback<Inplace>::call(self, other, alpha);
    return self;
  }
  static at::Tensor& out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,
                         at::Tensor& result) {
    if (!native(self, other, alpha, result)->defined()) Fallback<Out>::call(self, other, alpha, result);
    return result;
  }
};

template <isa::Opcode opcode, Promotion promotion, class Op, class Out>
struct Binary {
  static at::Tensor functional(const at::Tensor& self, const at::Tensor& other) {
    at::Tensor r = *binaryOp(opcode, promotion, self, other, {});
    return r.defined() ? r : Fallback<Op>::call(self, other);
  }
  static at::Tensor& out(const at::Tensor& self, const at::Tensor& other, at::Tensor& result) {
    if (!binaryOp(opcode, promotion, self, other, result)->defined()) Fallback<Out>::call(self, other, result);
    return result;
  }
  template <class Inplace>
  static at::Tensor& inplace(at::Tensor& self, const at::Tensor& other) {
    if (!binaryOp(opcode, promotion, self, other, self)->defined()) Fallback<Inplace>::call(self, other);
    return self;
  }
  // The Tensor-Scalar overloads (eq.Scalar ...): the scalar as a wrapped number.
  template <class ScalarOp>
  static at::Tensor functionalScalar(const at::Tensor& self, const at::Scalar& other) {
    at::Tensor r = *binaryOp(opcode, promotion, self, wrapped(other), {});
    return r.defined() ? r : Fallback<ScalarOp>::call(self, other);
  }
  template <class ScalarOut>
  static at::Tensor& outScalar(const at::Tensor& self, const at::Scalar& other, at::Tensor& result) {
    if (!binaryOp(opcode, promotion, self, wrapped(other), result)->defined()) {
      Fallback<ScalarOut>::call(self, other, result);
    }
    return result;
  }
  // The Scalar-Tensor overloads (pow.Scalar): the scalar, first, as a wrapped number.
  template <class ScalarSelfOp>
  static at::Tensor functionalScalarSelf(const at::Scalar& self, const at::Tensor& other) {
    at::Tensor r = *binaryOp(opcode, promotion, wrapped(self), other, {});
    return r.defined() ? r : Fallback<ScalarSelfOp>::call(self, other);
  }
  template <class ScalarSelfOut>
  static at::Tensor& outScalarSelf(const at::Scalar& self, const at::Tensor& other, at::Tensor& result) {
    if (!binaryOp(opcode, promotion, wrapped(self), other, result)->defined()) {
      Fallback<ScalarSelfOut>::call(self, other, result);
    }
    return result;
  }
  template <class ScalarInplace>
  static at::Tensor& inplaceScalar(at::Tensor& self, const at::Scalar& other) {
    if (!binaryOp(opcode, promotion, self, wrapped(other), self)->defined()) {
      Fallback<ScalarInplace>::call(self, other);
    }
    return self;
  }
};

template <isa::Opcode opcode, Promotion promotion, class Op, class Inplace, class Out>
struct Unary {
  static at::Tensor functional(const at::Tensor& self) {
    at::Tensor r = *unaryOp(opcode, promotion, self, {});
    return r.defined() ? r : Fallback<Op>::call(self);
  }
  static at::Tensor& inplace(at::Tensor& self) {
    if (!unaryOp(opcode, promotion, self, self)->defined()) Fallback<Inplace>::call(self);
    return self;
  }
  static at::Tensor& out(const at::Tensor& self, at::Tensor& result) {
    // A result of the input's dtype goes into an out of that dtype only: the CPU builds
    // these ops' TensorIterator with check_all_same_dtype (complex abs/sgn aside).
    TORCH_CHECK(promotion != Promotion::kCommon || self.is_complex() || result.scalar_type() == self.scalar_type(),
                "Found dtype ", result.scalar_type(), " but expected ", self.scalar_type());
    if (!unaryOp(opcode, promotion, self, result)->defined()) Fallback<Out>::call(self, result);
    return result;
  }
};

// Activation gradients: (grad, x-or-y) -> grad_input, functional and .grad_input forms.
template <isa::Opcode opcode, Promotion promotion, class Op, class Out>
struct Gradient {
  static at::Tensor functional(const at::Tensor& grad, const at::Tensor& x) {
    at::Tensor r = *binaryOp(opcode, promotion, grad, x, {});
    return r.defined() ? r : Fallback<Op>::call(grad, x);
  }
  static at::Tensor& out(const at::Tensor& grad, const at::Tensor& x, at::Tensor& result) {
    if (!binaryOp(opcode, promotion, grad, x, result)->defined()) Fallback<Out>::call(grad, x, result);
    return result;
  }
};

// The Custom rows' kernels.
at::Tensor gelu(const at::Tensor& self, c10::string_view approximate);
at::Tensor& geluInplace(at::Tensor& self, c10::string_view approximate);
at::Tensor& geluOut(const at::Tensor& self, c10::string_view approximate, at::Tensor& result);
// pow with a number for its exponent, through its recipe: the CPU's steps for the
// exponents its kernel treats apart (0, 1, 2, 3, -2, 0.5, -0.5, -1).
at::Tensor powTensorScalar(const at::Tensor& self, const at::Scalar& exponent);
at::Tensor& powTensorScalarInplace(at::Tensor& self, const at::Scalar& exponent);
at::Tensor& powTensorScalarOut(const at::Tensor& self, const at::Scalar& exponent, at::Tensor& result);
at::Tensor where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other);
at::Tensor& whereOut(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other,
                     at::Tensor& result);
at::Tensor thresholdBackward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& threshold);
at::Tensor& thresholdBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& threshold,
                                 at::Tensor& result);
at::Tensor geluBackward(const at::Tensor& grad, const at::Tensor& self, c10::string_view approximate);
at::Tensor& geluBackwardOut(const at::Tensor& grad, const at::Tensor& self, c10::string_view approximate,
                            at::Tensor& result);
// div with a rounding mode: none is true division; "trunc" and "floor" are their
// variant rows (ttruncdiv, tfloordiv), which keep integer dtypes as PyTorch does.
// Another mode reaches the CPU, which names it in its error.
at::Tensor divMode(const at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode);
at::Tensor& divModeInplace(at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode);
at::Tensor& divModeOut(const at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode,
                       at::Tensor& out);
at::Tensor& fillScalar(at::Tensor& self, const at::Scalar& value);
at::Tensor& fillTensor(at::Tensor& self, const at::Tensor& value);
at::Tensor& zero(at::Tensor& self);

}  // namespace pto::torch_glue
