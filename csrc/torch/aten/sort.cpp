#include "sort.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/Operators.h>

#include <vector>

#include "../dtype_map.h"
#include "composite.h"
#include "fallback.h"
#include "instruction_launch.h"

namespace pto::torch_glue {
namespace {

// PyTorch's own checks on the outputs (else the CPU raises them), and a dtype the instruction takes.
bool selectsNatively(isa::Opcode opcode, const at::Tensor& self, const at::Tensor& values, const at::Tensor& indices) {
  return accepts(opcode, self.scalar_type()) && values.scalar_type() == self.scalar_type() &&
         indices.scalar_type() == at::kLong && values.device() == self.device() && indices.device() == self.device();
}

// The positions `opcode` picks along `axis` into indices, then the values at them into
// values; through temporaries where an output shares memory with self.
void selectInto(isa::Opcode opcode, const at::Tensor& self, int64_t axis, bool flag, at::Tensor& values,
                at::Tensor& indices) {
  if (indices.numel() == 0) return;
  const at::Tensor positions = sharesStorage(indices, self) ? at::empty(indices.sizes(), indices.options()) : indices;
  launchInstruction(opcode, positions, {self}, {static_cast<double>(axis), flag ? 1.0 : 0.0});
  const at::Tensor picked = sharesStorage(values, self) || sharesStorage(values, positions)
                                ? at::empty(values.sizes(), values.options()) : values;
  launchInstruction(isa::Opcode::kGather, picked, {self, positions}, {static_cast<double>(axis), 0.0});
  if (!positions.is_same(indices)) indices.copy_(positions);
  if (!picked.is_same(values)) values.copy_(picked);
}

// The scan of self, converted to out's dtype, into out; out may be self (in place).
template <isa::Opcode opcode, class Out>
at::Tensor& scanOut(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  if ((dtype && *dtype != out.scalar_type()) || out.device() != self.device() || !ptoDType(self.scalar_type()) ||
      !accepts(opcode, out.scalar_type())) {
    return Fallback<Out>::call(self, dim, dtype, out);
  }
  const int64_t axis = at::maybe_wrap_dim(dim, self.dim());
  if (!out.is_same(self)) at::native::resize_output(out, self.sizes());
  if (out.numel() == 0) return out;
  const at::Tensor input = self.to(out.scalar_type());
  // aten's scan iterator checks (in place is a full overlap, which they allow).
  at::assert_no_internal_overlap(out);
  at::assert_no_partial_overlap(out, input);
  const bool in_place = at::get_overlap_status(out, input) == at::MemOverlapStatus::Full;
  const at::Tensor result = !in_place && sharesStorage(out, input) ? at::empty(out.sizes(), out.options()) : out;
  launchInstruction(opcode, result, {input}, {static_cast<double>(axis), 0.0});
  if (!result.is_same(out)) out.copy_(result);
  return out;
}

// Order statistics from one stable sort along the axis (NaN sorts last, in input
// order): the entry at position[...] (a tensor with a length-1 axis) of the sorted
// values and of the sort's positions.
std::tuple<at::Tensor&, at::Tensor&> pickFromSorted(const at::Tensor& self, int64_t axis, bool keepdim,
                                                    const at::Tensor& position, at::Tensor& values,
                                                    at::Tensor& indices) {
  const at::Tensor line = self.dim() == 0 ? self.view({1}) : self;
  const auto [sorted, order] = at::sort(line, /*stable=*/true, axis, false);
  at::Tensor value = at::gather(sorted, axis, position), index = at::gather(order, axis, position);
  if (!keepdim || self.dim() == 0) {
    value = value.squeeze(axis);
    index = index.squeeze(axis);
  }
  if (self.dim() == 0) {
    value = value.squeeze();
    index = index.squeeze();
  }
  at::native::resize_output(values, value.sizes());
  at::native::resize_output(indices, index.sizes());
  values.copy_(value);
  indices.copy_(index);
  return {values, indices};
}

at::Tensor positionTensor(const at::Tensor& self, int64_t axis, int64_t position) {
  std::vector<int64_t> shape = self.dim() == 0 ? std::vector<int64_t>{1} : self.sizes().vec();
  shape[axis] = 1;
  return at::full(shape, position, self.options().dtype(at::kLong));
}

bool sortable(const at::Tensor& self) { return accepts(isa::Opcode::kArgsort, self.scalar_type()) && self.numel() > 0; }

// median's and kthvalue's kernels on the CPU (and CUDA) have no bool instance: theirs raises.
bool selectable(const at::Tensor& self) { return sortable(self) && self.scalar_type() != at::kBool; }

// The lower median along dim; a line holding NaN gives its first NaN (median) or
// the median of the rest (nanmedian), as PyTorch does.
std::tuple<at::Tensor&, at::Tensor&> medianAlong(const at::Tensor& self, int64_t dim, bool keepdim, bool skip_nan,
                                                 at::Tensor& values, at::Tensor& indices) {
  const int64_t axis = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const at::Tensor line = self.dim() == 0 ? self.view({1}) : self;
  const int64_t extent = line.size(axis);
  const at::Tensor nans = at::isnan(line).sum(axis, /*keepdim=*/true);
  const at::Tensor valid = at::rsub(nans, extent);
  const at::Tensor position = skip_nan ? at::div(at::sub(valid, 1), 2, "floor").clamp_min_(0)
                                       : at::where(at::gt(nans, 0), valid, at::full({}, (extent - 1) / 2, nans.options()));
  return pickFromSorted(self, axis, keepdim, position, values, indices);
}

template <bool skip_nan, class Op>
std::tuple<at::Tensor&, at::Tensor&> medianOut(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& values,
                                               at::Tensor& indices) {
  const int64_t axis = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (!selectable(self) || (self.dim() > 0 && self.size(axis) == 0)) {
    return Fallback<Op>::call(self, dim, keepdim, values, indices);
  }
  return medianAlong(self, axis, keepdim, skip_nan, values, indices);
}

template <bool skip_nan, class Op>
at::Tensor medianAll(const at::Tensor& self) {
  if (!selectable(self)) return Fallback<Op>::call(self);
  at::Tensor values = at::empty({0}, self.options()), indices = at::empty({0}, self.options().dtype(at::kLong));
  medianAlong(self.reshape({-1}), 0, false, skip_nan, values, indices);
  return values;
}

}  // namespace

at::Tensor& cumsumOut(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  return scanOut<isa::Opcode::kCumsum, ATEN_OP2(cumsum, out)>(self, dim, dtype, out);
}

at::Tensor& cumprodOut(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  return scanOut<isa::Opcode::kCumprod, ATEN_OP2(cumprod, out)>(self, dim, dtype, out);
}

std::tuple<at::Tensor&, at::Tensor&> medianDimOut(const at::Tensor& self, int64_t dim, bool keepdim,
                                                  at::Tensor& values, at::Tensor& indices) {
  return medianOut<false, ATEN_OP2(median, dim_values)>(self, dim, keepdim, values, indices);
}

std::tuple<at::Tensor&, at::Tensor&> nanmedianDimOut(const at::Tensor& self, int64_t dim, bool keepdim,
                                                     at::Tensor& values, at::Tensor& indices) {
  return medianOut<true, ATEN_OP2(nanmedian, dim_values)>(self, dim, keepdim, values, indices);
}

at::Tensor median(const at::Tensor& self) { return medianAll<false, ATEN_OP(median)>(self); }
at::Tensor nanmedian(const at::Tensor& self) { return medianAll<true, ATEN_OP(nanmedian)>(self); }

// Always stable: an unstable sort may order equal values any way, and this is one.
std::tuple<at::Tensor&, at::Tensor&> sortOut(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                              bool descending, at::Tensor& values, at::Tensor& indices) {
  if (!selectsNatively(isa::Opcode::kArgsort, self, values, indices)) {
    return Fallback<ATEN_OP2(sort, values_stable)>::call(self, stable, dim, descending, values, indices);
  }
  const int64_t axis = at::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(values, self.sizes());
  at::native::resize_output(indices, self.sizes());
  // aten's sort copies self into values (copy_'s checks), then sorts both outputs in place.
  at::assert_no_internal_overlap(values);
  at::assert_no_partial_overlap(values, self);
  at::assert_no_internal_overlap(indices);
  selectInto(isa::Opcode::kArgsort, self, axis, descending, values, indices);
  return {values, indices};
}

// Always sorted: with sorted=False PyTorch promises no order, so this one will do.
std::tuple<at::Tensor&, at::Tensor&> topkOut(const at::Tensor& self, c10::SymInt k, int64_t dim, bool largest,
                                              bool sorted, at::Tensor& values, at::Tensor& indices) {
  const int64_t axis = at::maybe_wrap_dim(dim, self.dim());
  const int64_t count = k.expect_int();
  if (!selectsNatively(isa::Opcode::kTopk, self, values, indices) || count < 0 ||
      count > (self.dim() > 0 ? self.size(axis) : 1)) {
    return at::native::call_fallback_fn_symint<&cpuFallback, ATEN_OP2(topk, values)>::call(
        self, k, dim, largest, sorted, values, indices);
  }
  std::vector<int64_t> shape = self.sizes().vec();
  if (!shape.empty()) shape[axis] = count;
  at::native::resize_output(values, shape);
  at::native::resize_output(indices, shape);
  // aten's topk iterator checks: two outputs, self read.
  for (const at::Tensor& out : {values, indices}) {
    at::assert_no_internal_overlap(out);
    at::assert_no_partial_overlap(out, self);
  }
  selectInto(isa::Opcode::kTopk, self, axis, largest, values, indices);
  return {values, indices};
}

// kthvalue: the k-th smallest along dim, NaN counted largest.
std::tuple<at::Tensor&, at::Tensor&> kthvalueOut(const at::Tensor& self, int64_t k, int64_t dim, bool keepdim,
                                                 at::Tensor& values, at::Tensor& indices) {
  const int64_t axis = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const int64_t extent = self.dim() == 0 ? 1 : self.size(axis);
  // aten's checks: the results' dtypes, and no memory shared with self.
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), "output values must be of same type as input");
  TORCH_CHECK(indices.scalar_type() == at::kLong, "output indices must be of scalar type Long");
  at::assert_no_overlap(values, self);
  at::assert_no_overlap(indices, self);
  if (!selectable(self) || k < 1 || k > extent) {
    return Fallback<ATEN_OP2(kthvalue, values)>::call(self, k, dim, keepdim, values, indices);
  }
  return pickFromSorted(self, axis, keepdim, positionTensor(self, axis, k - 1), values, indices);
}

}  // namespace pto::torch_glue
