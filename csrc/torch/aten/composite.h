// Helpers shared by the aten ops pto runs as sequences of native instructions.
#pragma once

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>

namespace pto::backend {

// float16/bfloat16 compositions run in float32 and round once at the end, as
// PyTorch's fused CPU kernels do; other dtypes (and undefined tensors) pass as they are.
inline at::Tensor widened(const at::Tensor& t) {
  const bool reduced = t.defined() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16);
  return reduced ? t.to(at::kFloat) : t;
}

// Writes `value` into `out`, resized to its shape (PyTorch's out= rule), in out's dtype.
inline at::Tensor& assign(at::Tensor& out, const at::Tensor& value) {
  at::native::resize_output(out, value.sizes());
  return out.copy_(value);
}

// Whether a and b share any element (where torch cannot tell, it says no): a kernel
// writing one while it reads the other would see its own writes.
inline bool overlaps(const at::Tensor& a, const at::Tensor& b) {
  const at::MemOverlapStatus status = at::get_overlap_status(a, b);
  return status == at::MemOverlapStatus::Full || status == at::MemOverlapStatus::Partial;
}

}  // namespace pto::backend
