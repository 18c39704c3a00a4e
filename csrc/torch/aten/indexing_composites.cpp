// Indexing ops pto runs as a few native instructions around one scatter:
// index_fill_, index_copy, masked_scatter_, repeat_interleave, bincount and unique.
// Those whose output size depends on the data read it on the host first (a sync,
// as on CUDA), and check there what PyTorch's CPU kernels check.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <vector>

#include "composite.h"

namespace pto::backend {
namespace {

// `index` (1-D or 0-dim) as positions along `axis` of a tensor shaped `shape`,
// negative ones counted from the end.
at::Tensor positionsAlong(const at::Tensor& index, int64_t axis, at::IntArrayRef shape, int64_t extent) {
  const at::Tensor flat = index.to(at::kLong).reshape({-1});
  const at::Tensor wrapped = at::where(at::lt(flat, 0), at::add(flat, extent), flat);
  std::vector<int64_t> spread(shape.size(), 1);
  spread[axis] = flat.numel();
  std::vector<int64_t> expanded = shape.vec();
  expanded[axis] = flat.numel();
  return wrapped.view(spread).expand(expanded);
}

at::Tensor& indexFillScalar(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value) {
  TORCH_CHECK(index.dim() <= 1, "index_fill_(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_fill_(): Expected dtype int32/int64 for index");
  at::assert_no_overlap(self, index);
  if (self.dim() == 0 || index.numel() == 0) return self.dim() == 0 && index.numel() > 0 ? self.fill_(value) : self;
  const int64_t axis = at::maybe_wrap_dim(dim, self.dim());
  return self.scatter_(axis, positionsAlong(index, axis, self.sizes(), self.size(axis)), value);
}

at::Tensor& indexFillTensor(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "index_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  return indexFillScalar(self, dim, index, value.item());
}

at::Tensor& indexCopyInplace(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source) {
  TORCH_CHECK(index.dim() <= 1, "index_copy_(): Index should have dimension 1 or 0 (got ", index.dim(), ")");
  TORCH_CHECK(index.scalar_type() == at::kLong, "index_copy_(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "index_copy_(): self and source expected to have the same ",
              "dtype, but got (self) ", self.scalar_type(), " and (source) ", source.scalar_type());
  at::assert_no_internal_overlap(self);
  at::assert_no_overlap(self, index);
  at::assert_no_overlap(self, source);
  if (self.dim() == 0 || index.numel() == 0) return index.numel() > 0 ? self.copy_(source.reshape({})) : self;
  const int64_t axis = at::maybe_wrap_dim(dim, self.dim());
  const at::Tensor values = source.dim() == 0 ? source.reshape(std::vector<int64_t>(self.dim(), 1)) : source;
  TORCH_CHECK(values.size(axis) == index.numel(), "index_copy_(): Number of indices (", index.numel(),
              ") should be equal to source.size(dim) (", values.size(axis), ")");
  return self.scatter_(axis, positionsAlong(index, axis, values.sizes(), self.size(axis)), values);
}

at::Tensor& indexCopyOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                         at::Tensor& out) {
  if (!out.is_same(self)) assign(out, self);
  return indexCopyInplace(out, dim, index, source);
}

// self[mask] = source's first elements, in row-major order.
at::Tensor& maskedScatter(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "masked_scatter_: expected self and source to have same ",
              "dtypes but got ", self.scalar_type(), " and ", source.scalar_type());
  at::assert_no_internal_overlap(self);
  at::Tensor target = self.dim() == 0 ? self.view({1}) : self;  // 0-dim: as a one-element line
  const at::Tensor selected = mask.expand(self.sizes()).reshape(target.sizes());
  const int64_t count = selected.sum().item<int64_t>();
  TORCH_CHECK(source.numel() >= count, "Number of elements of source < number of ones in mask");
  // masked_scatter_ may read a source that aliases self (index_put_ may not): read it first.
  const at::Tensor taken = source.reshape({-1}).narrow(0, 0, count);
  target.index_put_({std::optional<at::Tensor>(selected)}, overlaps(self, taken) ? taken.clone() : taken);
  return self;
}

// repeat_interleave(repeats): i repeated repeats[i] times. A 1 marks where each run
// starts (scatter_add: empty runs share a mark), and a running sum numbers them.
at::Tensor repeatInterleave(const at::Tensor& repeats, std::optional<int64_t> output_size) {
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
              "repeats has to be Long or Int tensor");
  const at::Tensor counts = repeats.to(at::kLong);
  if (counts.numel() > 0) TORCH_CHECK(counts.min().item<int64_t>() >= 0, "repeats can not be negative");
  const at::Tensor ends = at::cumsum(counts, 0);
  const int64_t total = output_size.value_or(counts.numel() > 0 ? ends[-1].item<int64_t>() : 0);
  if (total == 0) return at::empty({0}, repeats.options());
  at::Tensor marks = at::zeros({total + 1}, counts.options());
  marks.scatter_add_(0, at::sub(ends, counts), at::ones_like(counts));
  return at::cumsum(marks, 0).narrow(0, 0, total).sub_(1).to(repeats.scalar_type());
}

// bincount: a scatter_add of ones (or the weights) into max + 1 bins.
at::Tensor bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights, int64_t minlength) {
  const bool weighted = weights.has_value() && weights->defined();
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  TORCH_CHECK(self.dim() == 1 && at::isIntegralType(self.scalar_type(), false),
              "bincount only supports 1-d non-negative integral inputs.");
  TORCH_CHECK(!weighted || (weights->dim() == 1 && weights->size(0) == self.size(0)),
              "weights should be 1-d and have the same length as input");
  const at::ScalarType type = !weighted ? at::kLong
                              : weights->scalar_type() == at::kFloat ? at::kFloat : at::kDouble;
  if (self.numel() == 0) return at::zeros({minlength}, self.options().dtype(type));
  TORCH_CHECK(self.min().item<int64_t>() >= 0, "bincount only supports 1-d non-negative integral inputs.");
  const int64_t bins = std::max(self.max().item<int64_t>() + 1, minlength);
  const at::Tensor values = weighted ? weights->to(type) : at::ones({self.numel()}, self.options().dtype(type));
  return at::zeros({bins}, values.options()).scatter_add_(0, self.to(at::kLong), values);
}

// torch.unique: one stable sort, a flag where each new value starts (NaNs are all
// distinct, as the CPU's != makes them), a running count numbering the groups, and
// scatters of the groups back to the input's positions (inverse) and of ones (counts).
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique(const at::Tensor& self, bool sorted, bool return_inverse,
                                                      bool return_counts) {
  const auto longs = self.options().dtype(at::kLong);
  const int64_t n = self.numel();
  if (n == 0) {
    return {at::empty({0}, self.options()), return_inverse ? at::empty(self.sizes(), longs) : at::empty({0}, longs),
            at::empty({0}, longs)};
  }
  const auto [values, order] = at::sort(self.reshape({-1}), /*stable=*/true, 0, false);
  at::Tensor starts = at::ones({n}, self.options().dtype(at::kBool));
  if (n > 1) starts.narrow(0, 1, n - 1).copy_(at::ne(values.narrow(0, 1, n - 1), values.narrow(0, 0, n - 1)));
  const at::Tensor group = at::cumsum(starts, 0).sub_(1);
  const at::Tensor distinct = at::masked_select(values, starts);
  at::Tensor inverse = at::empty({0}, longs), counts = at::empty({0}, longs);
  if (return_inverse) inverse = at::empty({n}, longs).scatter_(0, order, group).view(self.sizes());
  if (return_counts) counts = at::zeros({distinct.numel()}, longs).scatter_add_(0, group, at::ones({n}, longs));
  return {distinct, inverse, counts};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index_fill_.int_Scalar", TORCH_FN(indexFillScalar));
  m.impl("index_fill_.int_Tensor", TORCH_FN(indexFillTensor));
  m.impl("index_copy_", TORCH_FN(indexCopyInplace));
  m.impl("index_copy.out", TORCH_FN(indexCopyOut));
  m.impl("masked_scatter_", TORCH_FN(maskedScatter));
  m.impl("repeat_interleave.Tensor", TORCH_FN(repeatInterleave));
  m.impl("bincount", TORCH_FN(bincount));
  m.impl("_unique2", TORCH_FN(unique));
}

}  // namespace pto::backend
