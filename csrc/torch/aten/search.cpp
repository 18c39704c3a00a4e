#include "search.h"

#include <ATen/Operators.h>
#include <ATen/ScalarOps.h>
#include <ATen/native/Resize.h>

#include <climits>
#include <vector>

#include "../dtype_map.h"
#include "composite.h"
#include "fallback.h"
#include "instruction_launch.h"

namespace pto::torch_glue {
namespace {

// Whether the lines of `sorted` have what each value needs: PyTorch's shape rules for
// the two (searchsorted_pre_check's), then the dtype they are compared in.
bool shapesSearchable(const at::Tensor& sorted, const at::Tensor& values) {
  if (sorted.dim() == 0 || (values.dim() == 0 && sorted.dim() != 1)) return false;
  if (sorted.dim() > 1) {
    if (sorted.dim() != values.dim()) return false;
    for (int64_t d = 0; d + 1 < sorted.dim(); ++d) {
      if (sorted.size(d) != values.size(d)) return false;
    }
  }
  return accepts(isa::Opcode::kSearchSorted, at::result_type(sorted, values));
}

// Whether the call passes PyTorch's checks and tsearchsorted takes it; else the CPU
// fallback raises PyTorch's error (or computes what pto has no kernel for). A sorter's
// range is checked as the CPU checks it, by its min and max on the host.
bool searchable(const at::Tensor& sorted, const at::Tensor& values, const at::Tensor& out, bool out_int32, bool right,
                std::optional<c10::string_view> side, const at::Tensor& sorter) {
  if (side && ((*side != "left" && *side != "right") || (right && *side != "right"))) return false;
  const c10::Device device = values.device();
  if (sorted.device() != device || out.device() != device) return false;
  if (out.scalar_type() != (out_int32 ? at::kInt : at::kLong)) return false;
  if (!shapesSearchable(sorted, values) || (out_int32 && sorted.size(-1) >= INT_MAX)) return false;
  if (!sorter.defined()) return true;
  if (sorter.device() != device || sorter.sizes() != sorted.sizes() || sorter.scalar_type() != at::kLong ||
      sorter.numel() == 0) {
    return false;
  }
  return sorter.min().item<int64_t>() >= 0 && sorter.max().item<int64_t>() < sorted.size(-1);
}

// The positions of `values` in their lines of `sorted` (rearranged by sorter where it
// is defined), into out, resized to values' shape.
void searchInto(const at::Tensor& sorted, const at::Tensor& values, bool right, const at::Tensor& sorter,
                at::Tensor& out) {
  at::native::resize_output(out, values.sizes());
  if (values.numel() == 0) return;
  const at::ScalarType common = at::result_type(sorted, values);
  at::Tensor lines = sorted.to(common);
  if (sorter.defined()) lines = lines.gather(-1, sorter);
  const at::Tensor searched = values.dim() == 0 ? values.to(common).view({1}) : values.to(common);
  if (lines.dim() == 1 && searched.dim() > 1) {  // one line for every value
    std::vector<int64_t> shape(searched.sizes().begin(), searched.sizes().end());
    shape.back() = lines.size(0);
    lines = lines.expand(shape);
  }
  const bool direct = out.scalar_type() == at::kLong && !sharesStorage(out, searched) && !sharesStorage(out, lines);
  const at::Tensor positions = direct ? out.view(searched.sizes()) : at::empty(searched.sizes(), out.options().dtype(at::kLong));
  launchInstruction(isa::Opcode::kSearchSorted, positions, {lines, searched}, {right ? 1.0 : 0.0});
  if (!direct) out.copy_(positions.view(out.sizes()));
}

bool isRight(bool right, std::optional<c10::string_view> side) { return side ? *side == "right" : right; }

const at::Tensor& sorterOf(const std::optional<at::Tensor>& sorter) {
  static const at::Tensor none;
  return sorter ? *sorter : none;
}

// A number searched for: a 0-dim tensor on the sequence's device that promotes as a
// number does (PyTorch's searchsorted_scalar_tensor).
at::Tensor wrappedOn(const at::Scalar& value, c10::Device device) {
  at::Tensor tensor = c10::scalar_to_tensor(value, device);
  tensor.unsafeGetTensorImpl()->set_wrapped_number(true);
  return tensor;
}

at::Tensor positionsFor(const at::Tensor& values, bool out_int32) {
  return at::empty({0}, values.options().dtype(out_int32 ? at::kInt : at::kLong));
}

}  // namespace

at::Tensor& searchsortedOut(const at::Tensor& sorted_sequence, const at::Tensor& self, bool out_int32, bool right,
                            std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter,
                            at::Tensor& out) {
  if (!searchable(sorted_sequence, self, out, out_int32, right, side, sorterOf(sorter))) {
    return Fallback<ATEN_OP2(searchsorted, Tensor_out)>::call(sorted_sequence, self, out_int32, right, side, sorter,
                                                              out);
  }
  searchInto(sorted_sequence, self, isRight(right, side), sorterOf(sorter), out);
  return out;
}

at::Tensor searchsorted(const at::Tensor& sorted_sequence, const at::Tensor& self, bool out_int32, bool right,
                        std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter) {
  at::Tensor out = positionsFor(self, out_int32);
  if (!searchable(sorted_sequence, self, out, out_int32, right, side, sorterOf(sorter))) {
    return Fallback<ATEN_OP2(searchsorted, Tensor)>::call(sorted_sequence, self, out_int32, right, side, sorter);
  }
  searchInto(sorted_sequence, self, isRight(right, side), sorterOf(sorter), out);
  return out;
}

at::Tensor searchsortedScalar(const at::Tensor& sorted_sequence, const at::Scalar& self, bool out_int32, bool right,
                              std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter) {
  const at::Tensor value = wrappedOn(self, sorted_sequence.device());
  at::Tensor out = positionsFor(value, out_int32);
  if (!searchable(sorted_sequence, value, out, out_int32, right, side, sorterOf(sorter))) {
    return Fallback<ATEN_OP2(searchsorted, Scalar)>::call(sorted_sequence, self, out_int32, right, side, sorter);
  }
  searchInto(sorted_sequence, value, isRight(right, side), sorterOf(sorter), out);
  return out;
}

at::Tensor& searchsortedScalarOut(const at::Tensor& sorted_sequence, const at::Scalar& self, bool out_int32,
                                  bool right, std::optional<c10::string_view> side,
                                  const std::optional<at::Tensor>& sorter, at::Tensor& out) {
  const at::Tensor value = wrappedOn(self, sorted_sequence.device());
  if (!searchable(sorted_sequence, value, out, out_int32, right, side, sorterOf(sorter))) {
    return Fallback<ATEN_OP2(searchsorted, Scalar_out)>::call(sorted_sequence, self, out_int32, right, side, sorter,
                                                              out);
  }
  searchInto(sorted_sequence, value, isRight(right, side), sorterOf(sorter), out);
  return out;
}

at::Tensor& bucketizeOut(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right,
                         at::Tensor& out) {
  if (boundaries.dim() != 1 || !searchable(boundaries, self, out, out_int32, right, std::nullopt, {})) {
    return Fallback<ATEN_OP2(bucketize, Tensor_out)>::call(self, boundaries, out_int32, right, out);
  }
  searchInto(boundaries, self, right, {}, out);
  return out;
}

at::Tensor bucketize(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right) {
  at::Tensor out = positionsFor(self, out_int32);
  if (boundaries.dim() != 1 || !searchable(boundaries, self, out, out_int32, right, std::nullopt, {})) {
    return Fallback<ATEN_OP2(bucketize, Tensor)>::call(self, boundaries, out_int32, right);
  }
  searchInto(boundaries, self, right, {}, out);
  return out;
}

at::Tensor bucketizeScalar(const at::Scalar& self, const at::Tensor& boundaries, bool out_int32, bool right) {
  const at::Tensor value = wrappedOn(self, boundaries.device());
  at::Tensor out = positionsFor(value, out_int32);
  if (boundaries.dim() != 1 || !searchable(boundaries, value, out, out_int32, right, std::nullopt, {})) {
    return Fallback<ATEN_OP2(bucketize, Scalar)>::call(self, boundaries, out_int32, right);
  }
  searchInto(boundaries, value, right, {}, out);
  return out;
}

}  // namespace pto::torch_glue
