#include "concat.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/Operators.h>

#include "../dtype_map.h"
#include "elementwise.h"
#include "fallback.h"
#include "instruction_launch.h"

namespace pto::torch_glue {
namespace {

// cat skips 1-d empty tensors whatever the other shapes, as PyTorch always has.
bool skipped(const at::Tensor& t) { return t.dim() == 1 && t.numel() == 0; }

c10::MemoryFormat commonFormat(const std::vector<at::Tensor>& inputs) {
  const c10::MemoryFormat format = inputs.front().suggest_memory_format();
  for (const at::Tensor& t : inputs) {
    if (t.suggest_memory_format() != format) return c10::MemoryFormat::Contiguous;
  }
  return format;
}

bool catNative(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  std::vector<at::Tensor> inputs;
  int64_t position = 0;
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.dim() > 0, "zero-dimensional tensor (at position ", position, ") cannot be concatenated");
    ++position;
    if (t.device() != out.device() || !ptoDType(t.scalar_type())) return false;
    if (!skipped(t)) inputs.push_back(t);
  }
  if (!ptoDType(out.scalar_type())) return false;
  if (inputs.empty()) {
    at::native::resize_output(out, {0});
    return true;
  }
  const at::Tensor& first = inputs.front();
  const int64_t d = at::maybe_wrap_dim(dim, first.dim());
  std::vector<int64_t> shape = first.sizes().vec();
  shape[d] = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    TORCH_CHECK(t.dim() == first.dim(), "Tensors must have same number of dimensions: got ", first.dim(),
                " and ", t.dim());
    for (int64_t k = 0; k < t.dim(); ++k) {
      TORCH_CHECK(k == d || t.size(k) == first.size(k), "Sizes of tensors must match except in dimension ", d,
                  ". Expected size ", first.size(k), " but got size ", t.size(k), " for tensor number ", i,
                  " in the list.");
    }
    shape[d] += t.size(d);
  }
  // An out cat allocates (or resizes) takes the inputs' common memory format, as the
  // CPU's does: channels_last when every input is, else contiguous.
  if (at::native::resize_output(out, shape)) out.unsafeGetTensorImpl()->empty_tensor_restride(commonFormat(inputs));
  // aten's cat checks, on the resized out (stack reaches them too).
  at::assert_no_internal_overlap(out);
  for (const at::Tensor& t : tensors) at::assert_no_overlap(out, t);
  int64_t offset = 0;
  for (const at::Tensor& t : inputs) {
    if (t.numel() > 0) copyOnDevice(out.narrow(d, offset, t.size(d)), t);
    offset += t.size(d);
  }
  return true;
}

at::ScalarType catType(const at::ITensorListRef& tensors) {
  std::optional<at::ScalarType> type;
  for (const at::Tensor& t : tensors) type = type ? at::promote_types(*type, t.scalar_type()) : t.scalar_type();
  return type.value_or(at::kFloat);
}

}  // namespace

at::Tensor& catOut(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  TORCH_CHECK_TYPE(at::canCast(catType(tensors), out.scalar_type()),
                   "torch.cat(): input types can't be cast to the desired output type ", out.scalar_type());
  if (!catNative(tensors, dim, out)) {
    Fallback<ATEN_OP2(cat, out)>::call(tensors, dim, out);
  }
  return out;
}

at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  TORCH_CHECK(tensors.size() > 0, "torch.cat(): expected a non-empty list of Tensors");
  at::Tensor out = at::empty({0}, tensors.front().options().dtype(catType(tensors)));
  return catOut(tensors, dim, out);
}

}  // namespace pto::torch_glue
