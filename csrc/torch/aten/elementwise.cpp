#include "elementwise.h"

#include <ATen/Dispatch.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/Operators.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/as_strided_native.h>

#include <algorithm>

#include "../dtype_map.h"
#include "composite.h"
#include "host_scalars.h"
#include "instruction_launch.h"
#include "recipe_launch.h"
#include "tensor_factories.h"

namespace pto::torch_glue {

// TensorIterator's rule for a new result (the inputs' stride order, the first input's
// where they disagree, dense): inputs with their default strides give a contiguous
// result; any other layout asks TensorIterator itself, which allocates the result
// (through empty_strided, on pto) without running anything.
at::Tensor elementwiseResult(TensorRefs inputs, c10::IntArrayRef shape,
                             at::ScalarType result, const c10::Device& device) {
  // Contiguous inputs, broadcast or not, order no dimension against the row-major one
  // (a broadcast dimension's stride 0 leaves the order to the other operands): the
  // result TensorIterator would lay out is contiguous, without building one.
  const bool default_strides = std::all_of(inputs.begin(), inputs.end(), [&](const at::Tensor& t) {
    return t.dim() <= static_cast<int64_t>(shape.size()) && t.strides() == c10::contiguous_strides(t.sizes());
  });
  // The pto factory itself, not through the dispatcher (a functional op's fixed cost).
  if (default_strides) return empty(shape, result, std::nullopt, device, std::nullopt, std::nullopt);
  at::TensorIteratorConfig config;
  config.set_check_mem_overlap(false).check_all_same_dtype(false).check_all_same_device(false);
  config.declare_static_dtype_and_device(result, device);
  config.add_owned_output(at::Tensor());
  for (const at::Tensor& input : inputs) config.add_const_input(input);
  return config.build().output();
}

namespace {

using isa::Opcode;

bool isPto(const at::Tensor& t) { return t.device().type() == c10::kPrivateUse1; }

// The pto device of an op's tensors; CPU tensors may only join as 0-dim scalars.
c10::Device commonDevice(TensorRefs tensors, std::string_view op) {
  std::optional<c10::Device> device;
  for (const at::Tensor& t : tensors) {
    if (t.defined() && isPto(t)) {
      TORCH_CHECK(!device || *device == t.device(), "Expected all tensors to be on the same device, "
                  "but found at least two devices, ", *device, " and ", t.device(), "! (in ", op, ")");
      device = t.device();
    }
  }
  TORCH_INTERNAL_ASSERT(device, op, ": no pto tensor among the arguments");
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(!t.defined() || isPto(t) || (t.is_cpu() && t.dim() == 0),
                "Expected all tensors to be on the same device, but found at least two devices, ",
                *device, " and ", t.device(), "! (in ", op, ")");
  }
  return *device;
}

// `t` as a pto tensor of `dtype` on `device`: t itself (borrowed) where it is one; CPU
// scalars are filled in, other dtypes converted on the device.
c10::MaybeOwned<at::Tensor> onDevice(const at::Tensor& t, at::ScalarType dtype, const c10::Device& device) {
  if (!isPto(t)) return c10::MaybeOwned<at::Tensor>::owned(deviceScalar(t.item(), dtype, device));
  if (t.scalar_type() == dtype) return c10::MaybeOwned<at::Tensor>::borrowed(t);
  return c10::MaybeOwned<at::Tensor>::owned(t.to(dtype));
}

// `t` broadcast to `shape`: t itself where it has that shape, else a view made here,
// not by expand() through the dispatcher (~800 instructions per operand), whose view
// tracking an operand the kernel reads and drops has no use for.
c10::MaybeOwned<at::Tensor> broadcastTo(c10::MaybeOwned<at::Tensor> t, c10::IntArrayRef shape) {
  if (t->sizes() == shape) return t;
  const auto expanded = at::inferExpandGeometry_dimvector(t->sizes(), t->strides(), shape);
  return c10::MaybeOwned<at::Tensor>::owned(
      at::native::as_strided_tensorimpl(*t, expanded.sizes, expanded.strides, t->storage_offset()));
}

// onDevice(t) broadcast to `shape` (a CPU scalar as the kept broadcast of its device value).
c10::MaybeOwned<at::Tensor> broadcastOnDevice(const at::Tensor& t, at::ScalarType dtype, const c10::Device& device,
                                              c10::IntArrayRef shape) {
  if (!isPto(t)) return c10::MaybeOwned<at::Tensor>::owned(deviceScalar(t.item(), dtype, device, shape));
  return broadcastTo(onDevice(t, dtype, device), shape);
}

// The output tensor of an op: a new one, `self` (in-place) or `out`, checked as torch checks.
// An out of another shape is resized and laid out as a new result would be, as
// TensorIterator restrides the CPU's.
Result outputFor(const at::Tensor& out, TensorRefs inputs, c10::IntArrayRef shape, at::ScalarType result,
                 const c10::Device& device) {
  if (!out.defined()) return Result::owned(elementwiseResult(inputs, shape, result, device));
  TORCH_CHECK(at::canCast(result, out.scalar_type()), "result type ", result,
              " can't be cast to the desired output type ", out.scalar_type());
  TORCH_CHECK(out.device() == device, "Expected out tensor to be on ", device, " but got ", out.device());
  if (at::native::resize_output(out, shape)) {
    const at::Tensor like = elementwiseResult(inputs, shape, result, device);
    out.as_strided_(like.sizes(), like.strides());
  }
  at::assert_no_internal_overlap(out);
  return Result::borrowed(out);
}

// TensorIterator's overlap checks, made before an op decides between its instruction
// and the CPU fallback (whose copies no longer overlap): "unsupported operation" for
// an out whose elements repeat or that partly overlaps an input.
void checkOutputOverlap(const at::Tensor& out, TensorRefs inputs) {
  if (!out.defined()) return;
  at::assert_no_internal_overlap(out);
  for (const at::Tensor& input : inputs) at::assert_no_partial_overlap(out, input);
}

// PyTorch's CPU kernels multiply and divide a float16/bfloat16 tensor by a scalar
// operand (0-dim, of another dtype: a Python number) in float32, the scalar unrounded
// (half(100) / 1e5 is 1e-3, not 100 / inf); the other binary ops round it to the dtype.
bool scalarInFloat(Opcode opcode, at::ScalarType compute, const at::Tensor& other) {
  return (opcode == Opcode::kMul || opcode == Opcode::kDiv) && at::isReducedFloatingType(compute) &&
         other.dim() == 0 && other.scalar_type() != compute;
}

// An integer division by a zero the host holds (a Python number, a CPU scalar)
// raises at the call, as on the CPU; a zero in a device tensor fails the kernel,
// which raises the same at the next synchronising call.
void checkIntegerDivisor(Opcode opcode, at::ScalarType compute, const at::Tensor& other) {
  const bool divides = opcode == Opcode::kFmod || opcode == Opcode::kRemainder || opcode == Opcode::kFloorDiv ||
                       opcode == Opcode::kTruncDiv;
  if (!divides || !at::isIntegralType(compute, /*includeBool=*/true) || isPto(other)) return;
  TORCH_CHECK(other.item().toLong() != 0, "ZeroDivisionError");
}

// Runs the instruction into `out`, through a temporary when out's dtype differs.
void launchInto(Opcode opcode, const at::Tensor& out, at::ScalarType result, TensorRefs inputs,
                std::array<double, isa::kMaxImmediates> imm) {
  if (out.numel() == 0) return;
  for (const at::Tensor& input : inputs) at::assert_no_partial_overlap(out, input);
  if (out.scalar_type() == result) {
    launchInstruction(opcode, out, inputs, imm);
    return;
  }
  at::Tensor temporary = at::empty(out.sizes(), out.options().dtype(result));
  launchInstruction(opcode, temporary, inputs, imm);
  out.copy_(temporary);  // copy_ converts to any dtype out may have, complex too
}

// Whether gelu (or its gradient) takes its tanh approximation, checking the argument as torch does.
bool tanhApproximation(c10::string_view approximate) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh",
              "approximate argument must be either none or tanh.");
  return approximate == "tanh";
}

const AtenInstruction& geluRow(c10::string_view approximate) {
  return tanhApproximation(approximate) ? atenInstruction("gelu", "tanh") : atenInstruction("gelu");
}

const AtenInstruction& geluBackwardRow(c10::string_view approximate) {
  return tanhApproximation(approximate) ? atenInstruction("gelu_backward", "tanh") : atenInstruction("gelu_backward");
}

// div's variant row for a rounding mode, if it has one.
const AtenInstruction* roundingRow(std::optional<c10::string_view> mode) {
  if (mode == "trunc") return &atenInstruction("div", "trunc");
  if (mode == "floor") return &atenInstruction("div", "floor");
  return nullptr;
}

// CUDA computes pow in complex32 through complex64 arithmetic (the CPU has no kernel
// for it): so does pto, rounding the complex64 result once.
Result complexHalfPow(const at::Tensor& self, const at::Tensor& other, const at::Tensor& out,
                      const c10::Device& device) {
  const at::DimVector shape = at::infer_size_dimvector(self.sizes(), other.sizes());
  const at::Tensor wide = at::pow(self.to(at::kComplexFloat), other.to(at::kComplexFloat));
  Result output = outputFor(out, {self, other}, shape, at::kComplexHalf, device);
  output->copy_(wide);
  return output;
}

}  // namespace

Result binaryOp(Opcode opcode, Promotion promotion, const at::Tensor& self, const at::Tensor& other,
                const at::Tensor& out, std::array<double, isa::kMaxImmediates> immediates) {
  const auto name = isa::info(opcode).name;
  const c10::Device device = commonDevice({self, other, out}, name);
  at::ScalarType compute = resultType(self, other);
  if (promotion == Promotion::kIntToFloat && at::isIntegralType(compute, /*includeBool=*/true)) {
    compute = c10::typeMetaToScalarType(at::get_default_dtype());
  }
  if (promotion == Promotion::kSame && self.scalar_type() != other.scalar_type()) return Result::owned(at::Tensor());
  checkOutputOverlap(out, {self, other});
  const at::DimVector shape = at::infer_size_dimvector(self.sizes(), other.sizes());
  // An out that is one of the inputs (an in-place form, or torch composing one as
  // out=self: ldexp_) is never resized; checked before the CPU fallback too, whose
  // copies of the two no longer alias.
  if (out.defined() && (out.is_same(self) || out.is_same(other))) checkInplaceShape(out, shape);
  if (opcode == Opcode::kPow && compute == at::kComplexHalf) return complexHalfPow(self, other, out, device);
  if (!accepts(opcode, compute)) return Result::owned(at::Tensor());
  const at::ScalarType result = promotion == Promotion::kCompare ? at::kBool : compute;
  checkIntegerDivisor(opcode, compute, other);
  Result output = outputFor(out, {self, other}, shape, result, device);
  const at::ScalarType launched = scalarInFloat(opcode, compute, other) ? at::kFloat : compute;
  const c10::MaybeOwned<at::Tensor> a = broadcastOnDevice(self, launched, device, shape);
  const c10::MaybeOwned<at::Tensor> b = broadcastOnDevice(other, launched, device, shape);
  launchInto(opcode, *output, promotion == Promotion::kCompare ? at::kBool : launched, {*a, *b}, immediates);
  return output;
}

Result unaryOp(Opcode opcode, Promotion promotion, const at::Tensor& self, const at::Tensor& out,
               std::array<double, isa::kMaxImmediates> immediates) {
  const c10::Device device = commonDevice({self, out}, isa::info(opcode).name);
  at::ScalarType compute = self.scalar_type();
  if (promotion == Promotion::kIntToFloat && at::isIntegralType(compute, /*includeBool=*/true)) {
    compute = c10::typeMetaToScalarType(at::get_default_dtype());
  }
  checkOutputOverlap(out, {self});
  if (!accepts(opcode, compute)) return Result::owned(at::Tensor());
  Result output = outputFor(out, {self}, self.sizes(), compute, device);
  const c10::MaybeOwned<at::Tensor> input = onDevice(self, compute, device);
  launchInto(opcode, *output, compute, {*input}, immediates);
  return output;
}

Result whereOp(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other, const at::Tensor& out) {
  constexpr AtenInstruction row = atenInstruction("where");
  const c10::Device device = commonDevice({condition, self, other, out}, isa::info(row.opcode).name);
  const at::ScalarType compute = resultType(self, other);
  if (condition.scalar_type() != at::kBool || !accepts(row.opcode, compute)) return Result::owned(at::Tensor());
  const at::DimVector shape =
      at::infer_size_dimvector(at::infer_size_dimvector(condition.sizes(), self.sizes()), other.sizes());
  Result output = outputFor(out, {condition, self, other}, shape, compute, device);
  const c10::MaybeOwned<at::Tensor> mask = broadcastOnDevice(condition, at::kBool, device, shape);
  const c10::MaybeOwned<at::Tensor> a = broadcastOnDevice(self, compute, device, shape);
  const c10::MaybeOwned<at::Tensor> b = broadcastOnDevice(other, compute, device, shape);
  launchInto(row.opcode, *output, compute, {*mask, *a, *b}, {});
  return output;
}

Result ternaryOp(Opcode opcode, const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                 const at::Tensor& out, const at::Scalar& value) {
  // In place, the three inputs must broadcast to self's shape (self is never resized);
  // checked first, as TensorIterator computes the shape first, and before any fallback.
  if (out.defined() && out.is_same(self)) {
    checkInplaceShape(self, at::infer_size(at::infer_size(self.sizes(), tensor1.sizes()), tensor2.sizes()));
  }
  const c10::Device device = commonDevice({self, tensor1, tensor2, out}, isa::info(opcode).name);
  const at::ScalarType compute = resultType(self, tensor1, tensor2);
  // The value is the instruction's real immediate, converted to the dtype: a complex
  // one, or a fraction for an integer dtype (which torch refuses), take the composition.
  const bool integral = at::isIntegralType(compute, /*includeBool=*/true);
  if (!accepts(opcode, compute) || value.isComplex() || (integral && !value.isIntegral(false))) {
    return Result::owned(at::Tensor());
  }
  const at::DimVector shape =
      at::infer_size_dimvector(at::infer_size_dimvector(self.sizes(), tensor1.sizes()), tensor2.sizes());
  Result output = outputFor(out, {self, tensor1, tensor2}, shape, compute, device);
  const c10::MaybeOwned<at::Tensor> a = broadcastOnDevice(self, compute, device, shape);
  const c10::MaybeOwned<at::Tensor> b = broadcastOnDevice(tensor1, compute, device, shape);
  const c10::MaybeOwned<at::Tensor> c = broadcastOnDevice(tensor2, compute, device, shape);
  launchInto(opcode, *output, compute, {*a, *b, *c}, {value.toDouble(), 0.0});
  return output;
}

bool copyOnDevice(const at::Tensor& dst, const at::Tensor& src) {
  if (!ptoDType(dst.scalar_type()) || !ptoDType(src.scalar_type())) return false;
  if (dst.numel() == 0) return true;
  const Opcode opcode = dst.scalar_type() == src.scalar_type() ? Opcode::kMove : Opcode::kConvert;
  launchInstruction(opcode, dst, {*broadcastTo(c10::MaybeOwned<at::Tensor>::borrowed(src), dst.sizes())});
  return true;
}

at::Tensor& fill(at::Tensor& self, const at::Scalar& value) {
  checkScalarFits(self.scalar_type(), value);
  if (self.numel() == 0) return self;
  // An expanded tensor (stride 0) holds each element once: fill that, as CPU's
  // fill_ allows, since an instruction's output may not write an element twice.
  at::Tensor distinct = distinctElements(self);
  const auto dtype = ptoDType(self.scalar_type());
  if (!dtype || value.isComplex() || !exactAsDouble(value)) {
    at::Tensor host = at::empty(distinct.sizes(), self.options().device(at::kCPU));
    host.fill_(value);
    distinct.copy_(host);
    return self;
  }
  const double immediate = value.isBoolean() ? static_cast<double>(value.toBool()) : value.toDouble();
  launchInstruction(Opcode::kFill, distinct, {}, {immediate, 0.0});
  return self;
}

void checkThresholdFits(at::ScalarType type, const at::Scalar& threshold) {
  checkScalarFits(at::isReducedFloatingType(type) ? at::kFloat : type, threshold);
}

bool exactAsDouble(const at::Scalar& value) {
  if (!value.isIntegral(/*includeBool=*/false)) return true;
  const int64_t integer = value.toLong();
  const double converted = static_cast<double>(integer);
  return converted < 9223372036854775808.0 && static_cast<int64_t>(converted) == integer;  // 2^63 would not convert back
}

void checkScalarFits(at::ScalarType type, const at::Scalar& value) {
  // The dtypes PTO lacks (unsigned wider than 8 bits, float8) run on the CPU, which checks.
  if (c10::isBarebonesUnsignedType(type) || c10::isFloat8Type(type)) return;
  AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND4(at::kBool, at::kHalf, at::kBFloat16, at::kComplexHalf, type, "to",
                                         [&] { (void)value.to<scalar_t>(); });
}

at::Tensor wrapped(const at::Scalar& value) {
  at::Tensor tensor = c10::scalar_to_tensor(value);
  tensor.unsafeGetTensorImpl()->set_wrapped_number(true);
  return tensor;
}

// pow with a number for its exponent: its recipe (csrc/recipes/elementwise.cpp), which
// takes the CPU kernel's steps (a product for 2, a root for 0.5 ...), computed in the
// promoted dtype and converted into an out of another.
Result powScalarOp(const at::Tensor& self, const at::Scalar& exponent, const at::Tensor& out) {
  const c10::Device device = commonDevice({self, out}, isa::info(Opcode::kPow).name);
  const at::Tensor other = wrapped(exponent);
  const at::ScalarType compute = resultType(self, other);
  checkOutputOverlap(out, {self});
  if (out.defined() && out.is_same(self)) checkInplaceShape(out, self.sizes());
  if (compute == at::kComplexHalf) return complexHalfPow(self, other, out, device);
  if (exponent.isComplex() || !ptoDType(compute)) return Result::owned(at::Tensor());
  Result output = outputFor(out, {self}, self.sizes(), compute, device);
  if (output->numel() == 0) return output;
  const c10::MaybeOwned<at::Tensor> base = onDevice(self, self.scalar_type(), device);
  const bool direct = output->scalar_type() == compute;
  const at::Tensor result = direct ? *output : at::empty(output->sizes(), output->options().dtype(compute));
  RecipeCall call("aten::pow.Tensor_Scalar");
  if (!call.tensor("self", *base).value("exponent", exponent.toDouble()).result(result).launch()) {
    return Result::owned(at::Tensor());
  }
  if (!direct) output->copy_(result);
  return output;
}

at::Tensor powTensorScalar(const at::Tensor& self, const at::Scalar& exponent) {
  at::Tensor r = *powScalarOp(self, exponent, {});
  return r.defined() ? r : Fallback<ATEN_OP2(pow, Tensor_Scalar)>::call(self, exponent);
}

at::Tensor& powTensorScalarInplace(at::Tensor& self, const at::Scalar& exponent) {
  if (!powScalarOp(self, exponent, self)->defined()) Fallback<ATEN_OP2(pow_, Scalar)>::call(self, exponent);
  return self;
}

at::Tensor& powTensorScalarOut(const at::Tensor& self, const at::Scalar& exponent, at::Tensor& result) {
  if (!powScalarOp(self, exponent, result)->defined()) {
    Fallback<ATEN_OP2(pow, Tensor_Scalar_out)>::call(self, exponent, result);
  }
  return result;
}

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  const AtenInstruction& row = geluRow(approximate);
  at::Tensor r = *unaryOp(row.opcode, row.promotion, self, {});
  return r.defined() ? r : Fallback<ATEN_OP(gelu)>::call(self, approximate);
}

at::Tensor& geluInplace(at::Tensor& self, c10::string_view approximate) {
  const AtenInstruction& row = geluRow(approximate);
  if (!unaryOp(row.opcode, row.promotion, self, self)->defined()) {
    Fallback<ATEN_OP(gelu_)>::call(self, approximate);
  }
  return self;
}

at::Tensor& geluOut(const at::Tensor& self, c10::string_view approximate, at::Tensor& result) {
  const AtenInstruction& row = geluRow(approximate);
  if (!unaryOp(row.opcode, row.promotion, self, result)->defined()) {
    Fallback<ATEN_OP2(gelu, out)>::call(self, approximate, result);
  }
  return result;
}

at::Tensor where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  at::Tensor r = *whereOp(condition, self, other, {});
  return r.defined() ? r : Fallback<ATEN_OP2(where, self)>::call(condition, self, other);
}

at::Tensor& whereOut(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other,
                     at::Tensor& result) {
  // The CPU's where_self_out: out of exactly the promoted type, no cast.
  const at::ScalarType type = resultType(self, other);
  TORCH_CHECK(result.scalar_type() == type, "Expected out type to be ", type, " but got ", result.scalar_type());
  if (!whereOp(condition, self, other, result)->defined()) {
    Fallback<ATEN_OP2(where, self_out)>::call(condition, self, other, result);
  }
  return result;
}

namespace {

// grad where self > threshold, else 0; undefined where the CPU runs it.
Result thresholdBackwardOp(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& threshold,
                           const at::Tensor& out) {
  const AtenInstruction& row = atenInstruction("threshold_backward");
  const at::ScalarType type = resultType(grad, self);
  if (!accepts(row.opcode, type) || !exactAsDouble(threshold)) return Result::owned(at::Tensor());
  checkThresholdFits(type, threshold);
  return binaryOp(row.opcode, row.promotion, grad, self, out, {threshold.toDouble()});
}

}  // namespace

at::Tensor thresholdBackward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& threshold) {
  at::Tensor r = *thresholdBackwardOp(grad, self, threshold, {});
  return r.defined() ? r : Fallback<ATEN_OP(threshold_backward)>::call(grad, self, threshold);
}

at::Tensor& thresholdBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& threshold,
                                 at::Tensor& result) {
  if (!thresholdBackwardOp(grad, self, threshold, result)->defined()) {
    Fallback<ATEN_OP2(threshold_backward, grad_input)>::call(grad, self, threshold, result);
  }
  return result;
}

at::Tensor geluBackward(const at::Tensor& grad, const at::Tensor& self, c10::string_view approximate) {
  const AtenInstruction& row = geluBackwardRow(approximate);
  at::Tensor r = *binaryOp(row.opcode, row.promotion, grad, self, {});
  return r.defined() ? r : Fallback<ATEN_OP(gelu_backward)>::call(grad, self, approximate);
}

at::Tensor& geluBackwardOut(const at::Tensor& grad, const at::Tensor& self, c10::string_view approximate,
                            at::Tensor& result) {
  const AtenInstruction& row = geluBackwardRow(approximate);
  if (!binaryOp(row.opcode, row.promotion, grad, self, result)->defined()) {
    Fallback<ATEN_OP2(gelu_backward, grad_input)>::call(grad, self, approximate, result);
  }
  return result;
}

at::Tensor divMode(const at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode) {
  if (!mode) return at::div(self, other);
  const AtenInstruction* row = roundingRow(mode);
  at::Tensor r = row ? *binaryOp(row->opcode, row->promotion, self, other, {}) : at::Tensor();
  return r.defined() ? r : Fallback<ATEN_OP2(div, Tensor_mode)>::call(self, other, mode);
}

at::Tensor& divModeInplace(at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode) {
  if (!mode) return self.div_(other);
  const AtenInstruction* row = roundingRow(mode);
  if (!row || !binaryOp(row->opcode, row->promotion, self, other, self)->defined()) {
    Fallback<ATEN_OP2(div_, Tensor_mode)>::call(self, other, mode);
  }
  return self;
}

at::Tensor& divModeOut(const at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode,
                       at::Tensor& out) {
  if (!mode) return at::div_out(out, self, other);
  const AtenInstruction* row = roundingRow(mode);
  if (!row || !binaryOp(row->opcode, row->promotion, self, other, out)->defined()) {
    Fallback<ATEN_OP2(div, out_mode)>::call(self, other, mode, out);
  }
  return out;
}

at::Tensor& fillScalar(at::Tensor& self, const at::Scalar& value) { return fill(self, value); }

// The CPU's fill_.Tensor: a 0-dim value of another device read as a number, one of self's
// copied (broadcast) on the device, without reading it on the host.
at::Tensor& fillTensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  if (self.device() != value.device()) return fill(self, value.item());
  return self.copy_(self.is_alias_of(value) ? value.clone() : value);
}

at::Tensor& zero(at::Tensor& self) { return fill(self, 0); }

}  // namespace pto::torch_glue
