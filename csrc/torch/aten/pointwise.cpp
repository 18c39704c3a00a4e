#include "pointwise.h"

#include <ATen/Dispatch.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/Operators.h>

#include <limits>

#include "../dtype_map.h"
#include "composite.h"
#include "elementwise.h"
#include "fallback.h"

namespace pto::torch_glue {
namespace {

at::Tensor scalarLike(const at::Tensor& t, const at::Scalar& value) {
  return at::full({}, value, t.options());
}

// A bound of hardtanh, which takes self's dtype: a host scalar of it, not a device one
// filled by a launch of its own.
at::Tensor boundOf(const at::Tensor& self, const at::Scalar& value) {
  return at::scalar_tensor(value, self.options().device(at::kCPU));
}

// The checks every clamp overload makes first, in the CPU's words.
void checkClampArguments(const at::Tensor& self, const std::array<at::Tensor, 2>& bounds) {
  TORCH_CHECK(bounds[0].defined() || bounds[1].defined(),
              "torch.clamp: At least one of 'min' or 'max' must not be None");
  TORCH_CHECK_NOT_IMPLEMENTED(!self.is_complex(), "clamp is not supported for complex types");
}

// tclamp between two bounds, tmax / tmin against one; undefined for bool, which the CPU
// has no kernel for (its error, or its answer, comes from the fallback).
Result clampInstructions(const at::Tensor& self, const std::array<at::Tensor, 2>& bounds, const at::Tensor& out) {
  const auto& [low, high] = bounds;
  if (resultType(self, low, high) == at::kBool) return Result::owned(at::Tensor());
  if (low.defined() && high.defined()) return ternaryOp(atenInstruction("clamp").opcode, self, low, high, out, 0);
  const AtenInstruction& row = low.defined() ? atenInstruction("maximum") : atenInstruction("minimum");
  return binaryOp(row.opcode, row.promotion, self, low.defined() ? low : high, out);
}

// clamp with number bounds, in one pass (clampInstructions), in the dtype self and its
// bounds (0-dim tensors, or numbers wrapped; an absent one is undefined,
// which the promotion skips) promote to, as the CPU's clamp meta promotes them by hand
// (an integer tensor clamped to 0.5 is a float one), into an out of exactly that dtype
// and never promoting in place, as the CPU's meta checks. Each propagates a NaN, a
// bound's too, as the CPU's clamp fills NaN for a NaN bound. Undefined where PTO
// cannot run it.
Result clampOp(const at::Tensor& self, const std::array<at::Tensor, 2>& bounds, const at::Tensor& out) {
  const auto& [low, high] = bounds;
  checkClampArguments(self, bounds);
  const at::ScalarType type = resultType(self, low, high);
  if (out.defined() && out.is_same(self)) {
    TORCH_CHECK(type == self.scalar_type(), "result type ", type, " can't be cast to the desired output type ",
                self.dtype());
  } else if (out.defined()) {
    TORCH_CHECK(out.scalar_type() == type, "Found dtype ", out.scalar_type(), " but expected ", type);
  }
  // The CPU converts number bounds to the type (Scalar::to, refusing an overflow).
  for (const at::Tensor& bound : bounds) {
    if (bound.defined() && bound.unsafeGetTensorImpl()->is_wrapped_number()) checkScalarFits(type, bound.item());
  }
  return clampInstructions(self, bounds, out);
}

// clamp, clamp_min and clamp_max with tensor bounds (of any shape that broadcasts): the
// instructions of clampOp, but the out checked as the CPU builds these overloads, a
// TensorIterator of self and its bounds, whose out (self too, in place) may be of any
// dtype the result safely casts to and has the broadcast shape.
Result clampTensorOp(const at::Tensor& self, const std::array<at::Tensor, 2>& bounds, const at::Tensor& out) {
  checkClampArguments(self, bounds);
  return clampInstructions(self, bounds, out);
}

// clamp's number bounds as wrapped numbers, as torch passes a Scalar to a Tensor overload.
std::array<at::Tensor, 2> numberBounds(const std::optional<at::Scalar>& min, const std::optional<at::Scalar>& max) {
  return {min ? wrapped(*min) : at::Tensor(), max ? wrapped(*max) : at::Tensor()};
}

at::Tensor isInfinity(const at::Tensor& self, double infinity) {
  if (!at::isFloatingType(self.scalar_type())) return at::zeros(self.sizes(), self.options().dtype(at::kBool));
  return at::eq(self, infinity);
}

// logical_*: on truth values, a bool result (or out's dtype).
at::Tensor truth(const at::Tensor& t) { return t.scalar_type() == at::kBool ? t : at::ne(t, 0); }

// The CPU's addcmul kernel has no bool instance: a bool common dtype is refused, as there.
// It is bool exactly when all three are (bool promotes to any other dtype, 0-dim or not),
// so no promotion is computed here beside ternaryOp's.
void checkAddcmulTypes(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2) {
  const bool all_bool = self.scalar_type() == at::kBool && tensor1.scalar_type() == at::kBool &&
                        tensor2.scalar_type() == at::kBool;
  TORCH_CHECK_NOT_IMPLEMENTED(!all_bool, "\"addcmul\" not implemented for 'Bool'");
}

// addcmul/addcdiv's value as add's alpha: a bool one as 0 or 1 (the CPU multiplies by
// it; add refuses a bool alpha for a result that is not bool).
at::Scalar alphaOf(const at::Scalar& value) {
  return value.isBoolean() ? at::Scalar(static_cast<int64_t>(value.toBool())) : value;
}

// out = self + value * tensor1 * tensor2
at::Tensor addcmulWide(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                       const at::Scalar& value) {
  return at::add(widened(self), at::mul(widened(tensor1), widened(tensor2)), alphaOf(value));
}

// out = self + value * tensor1 / tensor2 (a true division, as PyTorch now requires).
void checkAddcdivTypes(const at::Tensor& tensor1, const at::Tensor& tensor2) {
  TORCH_CHECK(!(at::isIntegralType(tensor1.scalar_type(), true) && at::isIntegralType(tensor2.scalar_type(), true)),
              "Integer division with addcdiv is no longer supported, and in a future release addcdiv will "
              "perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be "
              "implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer "
              "inputs and as (input + value * tensor1 / tensor2) for float inputs. The future addcdiv "
              "behavior is just the latter implementation: (input + value * tensor1 / tensor2), for all dtypes.");
}

at::Tensor addcdivWide(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                       const at::Scalar& value) {
  checkAddcdivTypes(tensor1, tensor2);
  return at::add(widened(self), at::div(widened(tensor1), widened(tensor2)), alphaOf(value));
}

// lerp's refusals on the CPU: an end of another dtype (lerp does not promote), and
// dtypes its kernel lacks (integers, bool).
void checkLerpTypes(const at::Tensor& self, const at::Tensor& end) {
  TORCH_CHECK(self.dtype() == end.dtype(), "expected dtype ", self.dtype(), " for `end` but got dtype ", end.dtype());
  const at::ScalarType type = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(type) || at::isComplexType(type),
                              "\"lerp_kernel_scalar\" not implemented for '", c10::toString(type), "'");
}

// lerp.Scalar as tlerp, the weight an immediate (in float32 for float16/bfloat16, as
// the CPU takes it). Undefined for a complex weight or dtype: the composition below.
Result lerpOp(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight, const at::Tensor& out) {
  checkLerpTypes(self, end);
  if (weight.isComplex()) return Result::owned(at::Tensor());
  const AtenInstruction& row = atenInstruction("lerp");
  return binaryOp(row.opcode, row.promotion, self, end, out, {weight.toDouble()});
}

// lerp.Tensor as tlerpw, the weight per element (tlerp's formula); a weight that is one
// number on the CPU (which torch allows) as lerp.Scalar's tlerp. Undefined where PyTorch
// refuses the dtypes (lerp does not promote) or tlerpw lacks them: the CPU fallback
// raises its error or computes (complex).
Result lerpTensorOp(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight, const at::Tensor& out) {
  const at::ScalarType type = self.scalar_type();
  constexpr isa::Opcode opcode = isa::Opcode::kLerpWeights;
  if (end.scalar_type() != type || weight.scalar_type() != type || !accepts(opcode, type)) {
    return Result::owned(at::Tensor());
  }
  if (weight.dim() == 0 && weight.device().is_cpu() && !self.device().is_cpu()) {
    return lerpOp(self, end, weight.item(), out);
  }
  return ternaryOp(opcode, self, end, weight, out, 0);
}

// lerp as PyTorch computes it: from the nearer end (|weight| < 0.5, complex weights
// by their modulus), for precision.
at::Tensor lerpWide(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight) {
  const at::Tensor start = widened(self), stop = widened(end);
  const at::Tensor difference = at::sub(stop, start);
  const c10::complex<double> w = weight.toComplexDouble();
  if (std::abs(w) < 0.5) return at::add(start, difference, weight);
  const at::Scalar rest = weight.isComplex() ? at::Scalar(1.0 - w) : at::Scalar(1.0 - w.real());
  return at::sub(stop.expand_as(difference), difference, rest);
}

}  // namespace

at::Tensor clamp(const at::Tensor& self, const std::optional<at::Scalar>& min, const std::optional<at::Scalar>& max) {
  at::Tensor r = *clampOp(self, numberBounds(min, max), {});
  return r.defined() ? r : Fallback<ATEN_OP(clamp)>::call(self, min, max);
}

at::Tensor& clampOut(const at::Tensor& self, const std::optional<at::Scalar>& min, const std::optional<at::Scalar>& max,
                     at::Tensor& out) {
  if (!clampOp(self, numberBounds(min, max), out)->defined()) {
    Fallback<ATEN_OP2(clamp, out)>::call(self, min, max, out);
  }
  return out;
}

at::Tensor& clampInplace(at::Tensor& self, const std::optional<at::Scalar>& min, const std::optional<at::Scalar>& max) {
  if (!clampOp(self, numberBounds(min, max), self)->defined()) {
    Fallback<ATEN_OP(clamp_)>::call(self, min, max);
  }
  return self;
}

at::Tensor clampMin(const at::Tensor& self, const at::Scalar& min) {
  at::Tensor r = *clampOp(self, numberBounds(min, std::nullopt), {});
  return r.defined() ? r : Fallback<ATEN_OP(clamp_min)>::call(self, min);
}

at::Tensor& clampMinOut(const at::Tensor& self, const at::Scalar& min, at::Tensor& out) {
  if (!clampOp(self, numberBounds(min, std::nullopt), out)->defined()) {
    Fallback<ATEN_OP2(clamp_min, out)>::call(self, min, out);
  }
  return out;
}

at::Tensor& clampMinInplace(at::Tensor& self, const at::Scalar& min) {
  if (!clampOp(self, numberBounds(min, std::nullopt), self)->defined()) {
    Fallback<ATEN_OP(clamp_min_)>::call(self, min);
  }
  return self;
}

at::Tensor clampMax(const at::Tensor& self, const at::Scalar& max) {
  at::Tensor r = *clampOp(self, numberBounds(std::nullopt, max), {});
  return r.defined() ? r : Fallback<ATEN_OP(clamp_max)>::call(self, max);
}

at::Tensor& clampMaxOut(const at::Tensor& self, const at::Scalar& max, at::Tensor& out) {
  if (!clampOp(self, numberBounds(std::nullopt, max), out)->defined()) {
    Fallback<ATEN_OP2(clamp_max, out)>::call(self, max, out);
  }
  return out;
}

at::Tensor& clampMaxInplace(at::Tensor& self, const at::Scalar& max) {
  if (!clampOp(self, numberBounds(std::nullopt, max), self)->defined()) {
    Fallback<ATEN_OP(clamp_max_)>::call(self, max);
  }
  return self;
}

at::Tensor& clampTensorOut(const at::Tensor& self, const std::optional<at::Tensor>& min,
                           const std::optional<at::Tensor>& max, at::Tensor& out) {
  if (!clampTensorOp(self, {min.value_or(at::Tensor()), max.value_or(at::Tensor())}, out)->defined()) {
    Fallback<ATEN_OP2(clamp, Tensor_out)>::call(self, min, max, out);
  }
  return out;
}

at::Tensor& clampMinTensorOut(const at::Tensor& self, const at::Tensor& min, at::Tensor& out) {
  if (!clampTensorOp(self, {min, at::Tensor()}, out)->defined()) {
    Fallback<ATEN_OP2(clamp_min, Tensor_out)>::call(self, min, out);
  }
  return out;
}

at::Tensor& clampMaxTensorOut(const at::Tensor& self, const at::Tensor& max, at::Tensor& out) {
  if (!clampTensorOp(self, {at::Tensor(), max}, out)->defined()) {
    Fallback<ATEN_OP2(clamp_max, Tensor_out)>::call(self, max, out);
  }
  return out;
}

// hardtanh is a clamp in self's dtype (relu6 included), with the CPU's refusals and its
// legacy bounds: an integer self's truncated to int64 first (NaN refused there), never
// negative for uint8; its gradient passes strictly inside the range.
Result hardtanhOp(const at::Tensor& self, const at::Scalar& min, const at::Scalar& max, const at::Tensor& out) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Bool inputs not supported for hardtanh");
  at::Scalar low = min, high = max;
  if (at::isIntegralType(self.scalar_type(), /*includeBool=*/false)) {
    low = min.toLong();
    high = max.toLong();
    TORCH_CHECK(self.scalar_type() != at::kByte || (low.toLong() >= 0 && high.toLong() >= 0),
                "cannot do hardtanh on an unsigned type with negative limits");
  }
  checkScalarFits(self.scalar_type(), low);
  checkScalarFits(self.scalar_type(), high);
  return clampOp(self, {boundOf(self, low), boundOf(self, high)}, out);
}

at::Tensor hardtanh(const at::Tensor& self, const at::Scalar& min, const at::Scalar& max) {
  at::Tensor r = *hardtanhOp(self, min, max, {});
  return r.defined() ? r : Fallback<ATEN_OP(hardtanh)>::call(self, min, max);
}

at::Tensor& hardtanhOut(const at::Tensor& self, const at::Scalar& min, const at::Scalar& max, at::Tensor& out) {
  if (!hardtanhOp(self, min, max, out)->defined()) Fallback<ATEN_OP2(hardtanh, out)>::call(self, min, max, out);
  return out;
}

at::Tensor& hardtanhInplace(at::Tensor& self, const at::Scalar& min, const at::Scalar& max) {
  if (!hardtanhOp(self, min, max, self)->defined()) Fallback<ATEN_OP(hardtanh_)>::call(self, min, max);
  return self;
}

// self where mask, else value (0-dim, self's dtype). On a tensor whose elements
// repeat, as the CPU: a deprecation warning, and an element takes the value if any of
// its repeats is masked.
at::Tensor& maskedFillWith(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  if (at::has_internal_overlap(self) != at::MemOverlap::Yes) return self.copy_(at::where(mask, value, self));
  TORCH_WARN("Use of masked_fill_ on expanded tensors is deprecated. Please clone() the tensor before performing "
             "this operation. This also applies to advanced indexing e.g. tensor[mask] = scalar");
  at::Tensor hit = mask.expand(self.sizes());
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (self.stride(d) == 0 && self.size(d) > 1) hit = hit.any(d, /*keepdim=*/true);
  }
  at::Tensor distinct = distinctElements(self);
  distinct.copy_(at::where(hit, value, distinct));
  return self;
}

at::Tensor& maskedFillScalar(at::Tensor& self, const at::Tensor& mask, const at::Scalar& value) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  at::assert_no_partial_overlap(self, mask);
  return maskedFillWith(self, mask, scalarLike(self, value));
}

at::Tensor& maskedFillTensor(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  at::assert_no_partial_overlap(self, mask);
  // The CPU (and CUDA) fill with value.item(), converted as the Scalar form's: one that
  // does not fit self's dtype (-1.5 into uint8, a complex into a real) is refused. A value
  // whose dtype fits self's stays where it is, read by the kernel: no host read.
  if (at::promote_types(value.scalar_type(), self.scalar_type()) != self.scalar_type()) {
    return maskedFillScalar(self, mask, value.item());
  }
  return maskedFillWith(self, mask, value.to(self.device(), self.scalar_type()));
}

// leaky_relu: its instruction, the slope an immediate (float16/bfloat16 take it in
// float32, as their CPU kernel does); integers go to the CPU for its error.
at::Tensor leakyReluOf(const at::Tensor& self, const at::Scalar& slope) {
  const AtenInstruction& row = atenInstruction("leaky_relu");
  at::Tensor r = *unaryOp(row.opcode, row.promotion, self, {}, {slope.toDouble()});
  return r.defined() ? r : Fallback<ATEN_OP(leaky_relu)>::call(self, slope);
}

at::Tensor& leakyReluOut(const at::Tensor& self, const at::Scalar& slope, at::Tensor& out) {
  const AtenInstruction& row = atenInstruction("leaky_relu");
  if (!unaryOp(row.opcode, row.promotion, self, out, {slope.toDouble()})->defined()) {
    Fallback<ATEN_OP2(leaky_relu, out)>::call(self, slope, out);
  }
  return out;
}

at::Tensor& leakyReluInplace(at::Tensor& self, const at::Scalar& slope) {
  const AtenInstruction& row = atenInstruction("leaky_relu");
  if (!unaryOp(row.opcode, row.promotion, self, self, {slope.toDouble()})->defined()) {
    Fallback<ATEN_OP(leaky_relu_)>::call(self, slope);
  }
  return self;
}

// nan_to_num: its instruction, the replacements immediates (infinities by default the
// dtype's largest finite values, as on the CPU); an out of exactly self's dtype, the
// CPU's check. Integers (a copy there) and complex go to the CPU.
Result nanToNumOp(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf, const at::Tensor& out) {
  TORCH_CHECK(!out.defined() || out.scalar_type() == self.scalar_type(), "nan_to_num: dtype of out: ",
              out.scalar_type(), " should be same as input: ", self.scalar_type());
  if (!at::isFloatingType(self.scalar_type())) return Result::owned(at::Tensor());
  double largest = 0;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, self.scalar_type(), "nan_to_num",
                                  [&] { largest = static_cast<double>(std::numeric_limits<scalar_t>::max()); });
  const AtenInstruction& row = atenInstruction("nan_to_num");
  return unaryOp(row.opcode, row.promotion, self, out,
                 {nan.value_or(0.0), posinf.value_or(largest), neginf.value_or(-largest)});
}

at::Tensor nanToNum(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                    std::optional<double> neginf) {
  at::Tensor r = *nanToNumOp(self, nan, posinf, neginf, {});
  return r.defined() ? r : Fallback<ATEN_OP(nan_to_num)>::call(self, nan, posinf, neginf);
}

at::Tensor& nanToNumOut(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                        std::optional<double> neginf, at::Tensor& out) {
  if (!nanToNumOp(self, nan, posinf, neginf, out)->defined()) {
    Fallback<ATEN_OP2(nan_to_num, out)>::call(self, nan, posinf, neginf, out);
  }
  return out;
}

at::Tensor& nanToNumInplace(at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                            std::optional<double> neginf) {
  if (!nanToNumOp(self, nan, posinf, neginf, self)->defined()) {
    Fallback<ATEN_OP(nan_to_num_)>::call(self, nan, posinf, neginf);
  }
  return self;
}

at::Tensor& isposinfOut(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(!self.is_complex(), "isposinf does not support complex inputs.");
  TORCH_CHECK(out.scalar_type() == at::kBool, "isposinf does not support non-boolean outputs.");
  return assignPointwise(out, {self}, isInfinity(self, std::numeric_limits<double>::infinity()));
}

at::Tensor& isneginfOut(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(!self.is_complex(), "isneginf does not support complex inputs.");
  TORCH_CHECK(out.scalar_type() == at::kBool, "isneginf does not support non-boolean outputs.");
  return assignPointwise(out, {self}, isInfinity(self, -std::numeric_limits<double>::infinity()));
}

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

// addcmul/addcdiv run as one taddcmul/taddcdiv; where PTO cannot (complex values,
// dtypes it lacks), as the composition, whose steps fall back themselves.
at::Tensor& addcmulOut(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                       const at::Scalar& value, at::Tensor& out) {
  checkAddcmulTypes(self, tensor1, tensor2);
  at::assert_no_internal_overlap(out);
  for (const at::Tensor& input : {self, tensor1, tensor2}) at::assert_no_partial_overlap(out, input);
  if (ternaryOp(atenInstruction("addcmul").opcode, self, tensor1, tensor2, out, value)->defined()) return out;
  return assignPointwise(out, {self, tensor1, tensor2}, addcmulWide(self, tensor1, tensor2, value));
}

at::Tensor addcmul(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                   const at::Scalar& value) {
  checkAddcmulTypes(self, tensor1, tensor2);
  at::Tensor result = *ternaryOp(atenInstruction("addcmul").opcode, self, tensor1, tensor2, {}, value);
  return result.defined() ? result : addcmulWide(self, tensor1, tensor2, value).to(resultType(self, tensor1, tensor2));
}

at::Tensor& addcmulInplace(at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                           const at::Scalar& value) {
  checkAddcmulTypes(self, tensor1, tensor2);
  if (ternaryOp(atenInstruction("addcmul").opcode, self, tensor1, tensor2, self, value)->defined()) return self;
  return assignInplace(self, addcmulWide(self, tensor1, tensor2, value));
}

at::Tensor& addcdivOut(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                       const at::Scalar& value, at::Tensor& out) {
  checkAddcdivTypes(tensor1, tensor2);
  at::assert_no_internal_overlap(out);
  for (const at::Tensor& input : {self, tensor1, tensor2}) at::assert_no_partial_overlap(out, input);
  if (ternaryOp(atenInstruction("addcdiv").opcode, self, tensor1, tensor2, out, value)->defined()) return out;
  return assignPointwise(out, {self, tensor1, tensor2}, addcdivWide(self, tensor1, tensor2, value));
}

at::Tensor addcdiv(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                   const at::Scalar& value) {
  checkAddcdivTypes(tensor1, tensor2);
  at::Tensor result = *ternaryOp(atenInstruction("addcdiv").opcode, self, tensor1, tensor2, {}, value);
  return result.defined() ? result : addcdivWide(self, tensor1, tensor2, value).to(resultType(self, tensor1, tensor2));
}

at::Tensor& addcdivInplace(at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                           const at::Scalar& value) {
  checkAddcdivTypes(tensor1, tensor2);
  if (ternaryOp(atenInstruction("addcdiv").opcode, self, tensor1, tensor2, self, value)->defined()) return self;
  return assignInplace(self, addcdivWide(self, tensor1, tensor2, value));
}

at::Tensor& lerpOut(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight, at::Tensor& out) {
  if (lerpOp(self, end, weight, out)->defined()) return out;
  return assignPointwise(out, {self, end}, lerpWide(self, end, weight));
}

at::Tensor lerp(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight) {
  if (at::Tensor r = *lerpOp(self, end, weight, {}); r.defined()) return r;
  const at::Tensor value = lerpWide(self, end, weight);
  return elementwiseResult({self, end}, value.sizes(), self.scalar_type(), self.device()).copy_(value);
}

at::Tensor& lerpInplace(at::Tensor& self, const at::Tensor& end, const at::Scalar& weight) {
  if (lerpOp(self, end, weight, self)->defined()) return self;
  return assignInplace(self, lerpWide(self, end, weight));
}

at::Tensor& lerpTensorOut(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight, at::Tensor& out) {
  if (lerpTensorOp(self, end, weight, out)->defined()) return out;
  return Fallback<ATEN_OP2(lerp, Tensor_out)>::call(self, end, weight, out);
}

at::Tensor lerpTensor(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight) {
  if (at::Tensor r = *lerpTensorOp(self, end, weight, {}); r.defined()) return r;
  return Fallback<ATEN_OP2(lerp, Tensor)>::call(self, end, weight);
}

at::Tensor& lerpTensorInplace(at::Tensor& self, const at::Tensor& end, const at::Tensor& weight) {
  if (lerpTensorOp(self, end, weight, self)->defined()) return self;
  return Fallback<ATEN_OP2(lerp_, Tensor)>::call(self, end, weight);
}

// The tensor whose sign signbit reads: a floating tensor's bits as a signed integer of
// the same width, whose sign is the sign bit (-0.0 and a negative NaN included), so one
// comparison with 0 on a view of the same memory gives it; any other tensor itself (an
// unsigned one or bool is never below 0).
at::Tensor signedView(const at::Tensor& self) {
  TORCH_CHECK_NOT_IMPLEMENTED(!self.is_complex(), "signbit is not implemented for complex tensors.");
  if (!at::isFloatingType(self.scalar_type())) return self;
  switch (self.element_size()) {
    case 1: return self.view(at::kChar);
    case 2: return self.view(at::kShort);
    case 4: return self.view(at::kInt);
    default: return self.view(at::kLong);
  }
}

at::Tensor signbit(const at::Tensor& self) { return at::lt(signedView(self), 0); }

at::Tensor& signbitOut(const at::Tensor& self, at::Tensor& out) {
  const at::Tensor view = signedView(self);
  TORCH_CHECK(out.scalar_type() == at::kBool, "signbit does not support non-boolean outputs.");
  return at::lt_out(out, view, 0);
}

// NaN is the one value unequal to itself (a complex one has a NaN part); integers
// and bool have none.
at::Tensor isnan(const at::Tensor& self) {
  if (!at::isFloatingType(self.scalar_type()) && !at::isComplexType(self.scalar_type())) {
    return at::zeros(self.sizes(), self.options().dtype(at::kBool));
  }
  return at::ne(self, self);
}

}  // namespace pto::torch_glue
