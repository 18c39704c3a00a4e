#include "elementwise.h"

#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>

#include "../dtype_map.h"
#include "instruction_launch.h"

namespace pto::backend {
namespace {

using isa::Opcode;

bool isPto(const at::Tensor& t) { return t.device().type() == c10::kPrivateUse1; }

// The pto device of an op's tensors; CPU tensors may only join as 0-dim scalars.
c10::Device commonDevice(std::initializer_list<at::Tensor> tensors, std::string_view op) {
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

// `t` as a pto tensor of `dtype` on `device`: CPU scalars are filled in, other
// dtypes converted on the device.
at::Tensor onDevice(const at::Tensor& t, at::ScalarType dtype, const c10::Device& device) {
  if (!isPto(t)) {
    at::Tensor scalar = at::empty({}, t.options().dtype(dtype).device(device));
    fill(scalar, t.item());
    return scalar;
  }
  return t.scalar_type() == dtype ? t : t.to(dtype);
}

// The output tensor of an op: a new one, `self` (in-place) or `out`, checked as torch checks.
at::Tensor outputFor(const at::Tensor& out, const at::Tensor& like, c10::IntArrayRef shape,
                     at::ScalarType result, const c10::Device& device) {
  if (!out.defined()) {
    // As TensorIterator does: a result of the input's shape keeps its layout (a
    // transposed input gives a transposed result), so views the CPU allows on the
    // result are allowed on pto too.
    const auto options = like.options().dtype(result).device(device);
    if (like.sizes() == shape) return at::empty_like(like, options, at::MemoryFormat::Preserve);
    return at::empty(shape, options);
  }
  TORCH_CHECK(at::canCast(result, out.scalar_type()), "result type ", result,
              " can't be cast to the desired output type ", out.scalar_type());
  TORCH_CHECK(out.device() == device, "Expected out tensor to be on ", device, " but got ", out.device());
  at::native::resize_output(out, shape);
  at::assert_no_internal_overlap(out);
  return out;
}

// Runs the instruction into `out`, through a temporary when out's dtype differs.
void launchInto(Opcode opcode, const at::Tensor& out, at::ScalarType result,
                std::initializer_list<at::Tensor> inputs, std::array<double, isa::kMaxImmediates> imm) {
  if (out.numel() == 0) return;
  for (const at::Tensor& input : inputs) at::assert_no_partial_overlap(out, input);
  if (out.scalar_type() == result) {
    launchInstruction(opcode, out, inputs, imm);
    return;
  }
  at::Tensor temporary = at::empty(out.sizes(), out.options().dtype(result));
  launchInstruction(opcode, temporary, inputs, imm);
  copyOnDevice(out, temporary);
}

}  // namespace

at::Tensor binaryOp(Opcode opcode, Promotion promotion, const at::Tensor& self, const at::Tensor& other,
                    const at::Tensor& out, double alpha) {
  const auto name = isa::info(opcode).name;
  const c10::Device device = commonDevice({self, other, out}, name);
  at::ScalarType compute = at::result_type(self, other);
  if (promotion == Promotion::kIntToFloat && at::isIntegralType(compute, /*includeBool=*/true)) {
    compute = c10::typeMetaToScalarType(at::get_default_dtype());
  }
  if (!accepts(opcode, compute)) return {};
  const at::ScalarType result = promotion == Promotion::kCompare ? at::kBool : compute;
  const std::vector<int64_t> shape = at::infer_size(self.sizes(), other.sizes());
  const at::Tensor output = outputFor(out, self, shape, result, device);
  const at::Tensor a = onDevice(self, compute, device).expand(shape);
  const at::Tensor b = onDevice(other, compute, device).expand(shape);
  launchInto(opcode, output, result, {a, b}, {alpha, 0.0});
  return output;
}

at::Tensor unaryOp(Opcode opcode, Promotion promotion, const at::Tensor& self, const at::Tensor& out) {
  const c10::Device device = commonDevice({self, out}, isa::info(opcode).name);
  at::ScalarType compute = self.scalar_type();
  if (promotion == Promotion::kIntToFloat && at::isIntegralType(compute, /*includeBool=*/true)) {
    compute = c10::typeMetaToScalarType(at::get_default_dtype());
  }
  if (!accepts(opcode, compute)) return {};
  const at::Tensor output = outputFor(out, self, self.sizes(), compute, device);
  launchInto(opcode, output, compute, {onDevice(self, compute, device)}, {});
  return output;
}

at::Tensor whereOp(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other,
                   const at::Tensor& out) {
  constexpr AtenInstruction row = atenInstruction("where");
  const c10::Device device = commonDevice({condition, self, other, out}, isa::info(row.opcode).name);
  const at::ScalarType compute = at::result_type(self, other);
  if (condition.scalar_type() != at::kBool || !accepts(row.opcode, compute)) return {};
  const std::vector<int64_t> shape =
      at::infer_size(at::infer_size(condition.sizes(), self.sizes()), other.sizes());
  const at::Tensor output = outputFor(out, self, shape, compute, device);
  launchInto(row.opcode, output, compute,
             {onDevice(condition, at::kBool, device).expand(shape),
              onDevice(self, compute, device).expand(shape),
              onDevice(other, compute, device).expand(shape)}, {});
  return output;
}

bool copyOnDevice(const at::Tensor& dst, const at::Tensor& src) {
  if (!ptoDType(dst.scalar_type()) || !ptoDType(src.scalar_type())) return false;
  if (dst.numel() == 0) return true;
  const Opcode opcode = dst.scalar_type() == src.scalar_type() ? Opcode::kMove : Opcode::kConvert;
  launchInstruction(opcode, dst, {src.expand(dst.sizes())});
  return true;
}

at::Tensor& fill(at::Tensor& self, const at::Scalar& value) {
  const auto dtype = ptoDType(self.scalar_type());
  // The immediate is a double: integers beyond 2^53 would not survive it.
  const bool exact = !value.isIntegral(false) ||
                     static_cast<int64_t>(static_cast<double>(value.toLong())) == value.toLong();
  if (!dtype || value.isComplex() || !exact) {
    at::Tensor host = at::empty(self.sizes(), self.options().device(at::kCPU));
    host.fill_(value);
    self.copy_(host);
    return self;
  }
  if (self.numel() > 0) {
    const double immediate = value.isBoolean() ? static_cast<double>(value.toBool()) : value.toDouble();
    // An expanded tensor (stride 0) holds each element once: fill that, as CPU's
    // fill_ allows, since an instruction's output may not write an element twice.
    at::Tensor distinct = self;
    for (int64_t d = 0; d < self.dim(); ++d) {
      if (self.stride(d) == 0) distinct = distinct.narrow(d, 0, 1);
    }
    launchInstruction(Opcode::kFill, distinct, {}, {immediate, 0.0});
  }
  return self;
}

}  // namespace pto::backend
