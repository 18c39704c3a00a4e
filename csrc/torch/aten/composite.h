// Helpers shared by the aten ops pto runs as sequences of native instructions.
#pragma once

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>

#include <algorithm>

namespace pto::torch_glue {

// float16/bfloat16 compositions run in float32 and round once at the end, as
// PyTorch's fused CPU kernels do; other dtypes (and undefined tensors) pass as they are.
inline at::Tensor widened(const at::Tensor& t) {
  const bool reduced = t.defined() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16);
  return reduced ? t.to(at::kFloat) : t;
}

// A CPU kernel of PyTorch's that dispatches on the floating types alone (elu, mish, glu,
// softplus …) refuses the others, integers, bool and complex, with NotImplementedError
// naming it; a composition of pto's instructions would compute them.
inline void checkFloatingKernel(const char* kernel, at::ScalarType type) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(type), "\"", kernel, "\" not implemented for '", c10::toString(type), "'");
}

// Writes `value` into `out`, resized to its shape (PyTorch's out= rule), in out's dtype:
// one the result casts to under torch's rule (no float into an integer, complex into a
// real or anything but bool into bool), checked before out changes, as the CPU does.
inline at::Tensor& assign(at::Tensor& out, const at::Tensor& value) {
  TORCH_CHECK(at::canCast(value.scalar_type(), out.scalar_type()), "result type ", value.scalar_type(),
              " can't be cast to the desired output type ", out.scalar_type());
  at::native::resize_output(out, value.sizes());
  return out.copy_(value);
}

// An in-place op writes self: the result's broadcast shape must be self's own, as
// TensorIterator requires of an output that is also an input (a CPU tensor never
// grows in place).
inline void checkInplaceShape(const at::Tensor& self, c10::IntArrayRef shape) {
  TORCH_CHECK(self.sizes() == shape, "output with shape ", self.sizes(), " doesn't match the broadcast shape ",
              shape);
}

// An in-place op's result written over self: of self's shape and of a dtype that casts
// to self's, checked before self changes.
inline at::Tensor& assignInplace(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(at::canCast(value.scalar_type(), self.scalar_type()), "result type ", value.scalar_type(),
              " can't be cast to the desired output type ", self.scalar_type());
  checkInplaceShape(self, value.sizes());
  return self.copy_(value);
}

// assign() for a pointwise op's out= form, after the checks aten's TensorIterator
// makes there: no element of out written twice, none read from an input that
// out only partly covers, and an out that is one of the inputs (the in-place forms
// torch composes as out=self) not resized.
inline at::Tensor& assignPointwise(at::Tensor& out, std::initializer_list<at::Tensor> inputs,
                                   const at::Tensor& value) {
  at::assert_no_internal_overlap(out);
  for (const at::Tensor& input : inputs) {
    at::assert_no_partial_overlap(out, input);
    if (input.is_same(out)) checkInplaceShape(out, value.sizes());
  }
  return assign(out, value);
}

// Whether a and b share any element (where torch cannot tell, it says no): a kernel
// writing one while it reads the other would see its own writes.
inline bool overlaps(const at::Tensor& a, const at::Tensor& b) {
  const at::MemOverlapStatus status = at::get_overlap_status(a, b);
  return status == at::MemOverlapStatus::Full || status == at::MemOverlapStatus::Partial;
}

// Whether writing `out` may change `in` before an instruction has read all of it: any
// shared storage counts (stricter than overlaps, which trusts torch's overlap analysis
// and says no where it cannot tell).
inline bool sharesStorage(const at::Tensor& out, const at::Tensor& in) {
  return out.numel() > 0 && in.numel() > 0 && out.storage().is_alias_of(in.storage());
}

// The tensor as a meta tensor over a storage of the same size: the same view
// (sizes, strides, offset) with no data. Meta kernels run on it give PyTorch's
// shape checks and result geometry, and view ops their view, without touching memory.
inline at::Tensor metaTwin(const at::Tensor& t) {
  const int64_t storage_elements =
      static_cast<int64_t>(t.storage().nbytes() / std::max<size_t>(t.itemsize(), 1));
  return at::empty({storage_elements}, t.options().device(at::kMeta))
      .as_strided(t.sizes(), t.strides(), t.storage_offset());
}

// `value` laid out as the op's result is on the CPU: with the strides of `meta`, the
// result torch's meta kernel gives for the same inputs (channels_last in, channels_last
// out); a copy only where value's own layout differs.
inline at::Tensor inLayoutOf(const at::Tensor& meta, const at::Tensor& value) {
  if (value.strides() == meta.strides()) return value;
  return at::empty_strided(meta.sizes(), meta.strides(), value.options()).copy_(value);
}

// The elements of a tensor that repeats some (expand: stride 0 along a dimension) once
// each: every repeated dimension narrowed to one. The CPU's deprecated in-place ops on
// such a tensor (masked_fill_, index_fill_) write each element; pto writes these.
inline at::Tensor distinctElements(const at::Tensor& t) {
  at::Tensor distinct = t;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.stride(d) == 0 && t.size(d) > 1) distinct = distinct.narrow(d, 0, 1);
  }
  return distinct;
}

}  // namespace pto::torch_glue
