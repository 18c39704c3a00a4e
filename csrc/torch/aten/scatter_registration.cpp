// Scatter and advanced indexing on pto. scatter, scatter_add and scatter_reduce are
// one tscatter / tscatteradd / tscattermul / tscattermax / tscattermin (their
// functional and in-place forms reach the out= kernels here through torch's
// composites, after its shape checks). x[indices] is one tgather and
// x[indices] = values (index_put_) one tscatter / tscatteradd, along the indexed
// dimension, or over the element offsets of several (see AdvancedIndex). Boolean
// masks become indices through tnonzero, whose row count is read on the host: a
// sync, as on CUDA. An index out of range fails the kernel that meets it, and the
// next synchronising call raises, naming it.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/IndexingUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/Operators.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <vector>

#include "composite.h"
#include "fallback.h"
#include "instruction_launch.h"

namespace pto::backend {
namespace {

// A 0-dim tensor scatters as one element along dimension 0 (torch's rule).
at::Tensor atLeast1d(const at::Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }

bool overlaps(const at::Tensor& a, const at::Tensor& b) {
  const at::MemOverlapStatus status = at::get_overlap_status(a, b);
  return status == at::MemOverlapStatus::Full || status == at::MemOverlapStatus::Partial;
}

// out = self, then one tscatter / tscatteradd of src (its block of index's shape) into
// out along dim, when torch's rules hold; false sends the op to the CPU, which raises
// PyTorch's message for what does not.
bool scatterInto(isa::Opcode opcode, const at::Tensor& out, const at::Tensor& self, int64_t dim,
                 const at::Tensor& index, const at::Tensor& src) {
  const int64_t rank = std::max<int64_t>(self.dim(), 1);
  const bool fits = (index.scalar_type() == at::kLong || index.scalar_type() == at::kInt) &&
                    src.scalar_type() == self.scalar_type() &&
                    out.scalar_type() == self.scalar_type() && accepts(opcode, self.scalar_type()) &&
                    index.device() == self.device() && src.device() == self.device() &&
                    out.device() == self.device() && dim >= -rank && dim < rank &&
                    at::has_internal_overlap(out) != at::MemOverlap::Yes && !overlaps(out, index) &&
                    !overlaps(out, src);
  if (!fits) return false;
  const int64_t axis = dim < 0 ? dim + rank : dim;
  const at::Tensor positions = atLeast1d(index).to(at::kLong), values = atLeast1d(src), target = atLeast1d(self);
  if (index.numel() > 0) {
    if (positions.dim() != rank || values.dim() != rank) return false;
    for (int64_t d = 0; d < rank; ++d) {
      if ((d != axis && positions.size(d) > target.size(d)) || positions.size(d) > values.size(d)) return false;
    }
  }
  if (!out.is_same(self)) {
    at::native::resize_output(out, self.sizes());
    out.copy_(self);
  }
  if (index.numel() == 0) return true;
  launchInstruction(opcode, atLeast1d(out), {values.as_strided(positions.sizes(), values.strides()), positions},
                    {static_cast<double>(axis), 0.0});
  return true;
}

at::Tensor& scatterSrcOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                          at::Tensor& out) {
  if (!scatterInto(isa::Opcode::kScatter, out, self, dim, index, src)) {
    Fallback<ATEN_OP2(scatter, src_out)>::call(self, dim, index, src, out);
  }
  return out;
}

at::Tensor& scatterValueOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value,
                            at::Tensor& out) {
  const at::Tensor values = at::scalar_tensor(value, self.options()).expand(index.sizes());
  if (!scatterInto(isa::Opcode::kScatter, out, self, dim, index, values)) {
    Fallback<ATEN_OP2(scatter, value_out)>::call(self, dim, index, value, out);
  }
  return out;
}

at::Tensor& scatterAddOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                          at::Tensor& out) {
  if (!scatterInto(isa::Opcode::kScatterAdd, out, self, dim, index, src)) {
    Fallback<ATEN_OP2(scatter_add, out)>::call(self, dim, index, src, out);
  }
  return out;
}

// scatter's reduce= form: "add" or "multiply".
std::optional<isa::Opcode> scatterReduction(c10::string_view reduce) {
  if (reduce == "add") return isa::Opcode::kScatterAdd;
  if (reduce == "multiply") return isa::Opcode::kScatterMul;
  return std::nullopt;
}

at::Tensor& scatterReduceOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                             c10::string_view reduce, at::Tensor& out) {
  const std::optional<isa::Opcode> opcode = scatterReduction(reduce);
  if (!opcode || !scatterInto(*opcode, out, self, dim, index, src)) {
    Fallback<ATEN_OP2(scatter, reduce_out)>::call(self, dim, index, src, reduce, out);
  }
  return out;
}

at::Tensor& scatterValueReduceOut(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                  const at::Scalar& value, c10::string_view reduce, at::Tensor& out) {
  const std::optional<isa::Opcode> opcode = scatterReduction(reduce);
  const at::Tensor values = at::scalar_tensor(value, self.options()).expand(index.sizes());
  if (!opcode || !scatterInto(*opcode, out, self, dim, index, values)) {
    Fallback<ATEN_OP2(scatter, value_reduce_out)>::call(self, dim, index, value, reduce, out);
  }
  return out;
}

// scatter_reduce: one tscatteradd / tscattermul / tscattermax / tscattermin. Without
// self, the positions scattered to first take 0 (sum, mean), 1 (prod) or one of
// their values (amax, amin, which may see it twice). A mean divides the sum by the
// count of values, self counting as one, as torch does; integer means, which torch
// rounds down, stay on the CPU.
at::Tensor& scatterReduceTwoOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                c10::string_view reduce, bool include_self, at::Tensor& out) {
  const bool mean = reduce == "mean", extreme = reduce == "amax" || reduce == "amin";
  const std::optional<isa::Opcode> opcode =
      reduce == "sum" || mean ? std::optional(isa::Opcode::kScatterAdd)
      : reduce == "prod"      ? std::optional(isa::Opcode::kScatterMul)
      : reduce == "amax"      ? std::optional(isa::Opcode::kScatterMax)
      : reduce == "amin"      ? std::optional(isa::Opcode::kScatterMin)
                              : std::nullopt;
  const bool native =
      opcode && (!mean || at::isFloatingType(self.scalar_type())) &&
      (include_self ? scatterInto(*opcode, out, self, dim, index, src)
       : extreme    ? scatterInto(isa::Opcode::kScatter, out, self, dim, index, src)
                    : scatterInto(isa::Opcode::kScatter, out, self, dim, index,
                                  at::scalar_tensor(reduce == "prod" ? 1 : 0, self.options()).expand(index.sizes())));
  if (!native) {
    return Fallback<ATEN_OP2(scatter_reduce, two_out)>::call(self, dim, index, src, reduce, include_self, out);
  }
  if (!include_self) scatterInto(*opcode, out, out, dim, index, src);
  if (mean) {
    at::Tensor counts = at::full(self.sizes(), include_self ? 1 : 0, self.options());
    scatterInto(isa::Opcode::kScatterAdd, counts, counts, dim, index, at::ones({}, src.options()).expand(index.sizes()));
    out.div_(counts.clamp_min(1));
  }
  return out;
}

// The coordinates of self's nonzero elements, counted first on the host.
at::Tensor& nonzeroOut(const at::Tensor& self, at::Tensor& out) {
  if (!accepts(isa::Opcode::kNonzero, self.scalar_type()) || out.scalar_type() != at::kLong ||
      out.device() != self.device() || self.dim() > isa::kMaxRank) {
    return Fallback<ATEN_OP2(nonzero, out)>::call(self, out);
  }
  const int64_t count = at::ne(self, 0).sum().item<int64_t>();
  at::native::resize_output(out, {count, self.dim()});
  if (out.numel() > 0) launchInstruction(isa::Opcode::kNonzero, out, {self});
  return out;
}

at::Tensor nonzero(const at::Tensor& self) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return nonzeroOut(self, out);
}

// The indices' common shape, or nullopt where they do not broadcast together.
std::optional<at::DimVector> broadcastShape(const std::vector<at::Tensor>& indices) {
  std::optional<at::DimVector> shape;
  for (const at::Tensor& index : indices) {
    if (!index.defined()) continue;
    if (!shape) {
      shape = at::DimVector(index.sizes());
      continue;
    }
    const at::IntArrayRef sizes = index.sizes();
    for (size_t i = 1; i <= std::min(shape->size(), sizes.size()); ++i) {
      const int64_t a = (*shape)[shape->size() - i], b = sizes[sizes.size() - i];
      if (a != b && a != 1 && b != 1) return std::nullopt;
    }
    shape = at::infer_size_dimvector(*shape, sizes);
  }
  return shape;
}

// self[indices] as one gather or scatter along `axis` of `source`, by `offsets`.
// One indexed dimension: source is self, offsets the index itself, and the gather
// or scatter wraps negative indices (wrap=1) and checks the rest. Several: source
// views self's elements with the indexed dimensions (brought together, and to the
// front where torch moves them) folded into one axis of stride 1 whose positions are
// element offsets, which twrapindex (per index: wrapped and checked) and an add or
// multiply per index compute; if an index is out of range, its twrapindex fails, and
// the gather or scatter after it still stays inside self's elements.
struct AdvancedIndex {
  at::Tensor source;                  // [before..., the indexed extent or the span of offsets, after...]
  at::Tensor offsets;                 // i64, the indices' broadcast shape; undefined if nothing is selected
  int64_t axis = 0;                   // where the indexed dimensions start
  bool wrap = false;                  // one indexed dimension: offsets are indices, negative ones from the end
  std::vector<int64_t> result_shape;  // [before..., broadcast shape..., after...]

  bool selectsNothing() const { return !offsets.defined(); }
  std::array<double, isa::kMaxImmediates> immediates() const {
    return {static_cast<double>(axis), wrap ? 1.0 : 0.0};
  }
  // A tensor of the result's shape with the broadcast dimensions folded into the axis.
  at::Tensor folded(const at::Tensor& t) const {
    std::vector<int64_t> shape = source.sizes().vec();
    shape[axis] = offsets.numel();
    return t.reshape(shape);
  }
  // The offsets at the folded shape, the same for every position off the axis.
  at::Tensor foldedOffsets() const {
    std::vector<int64_t> spread(source.dim(), 1);
    spread[axis] = offsets.numel();
    std::vector<int64_t> shape = source.sizes().vec();
    shape[axis] = offsets.numel();
    return offsets.reshape(spread).expand(shape);
  }
};

// The element offsets of the selection of `count` indices from `axis` of `source`
// on, and source viewed with those dimensions folded into one axis of offsets.
void foldIndexedDimensions(AdvancedIndex& plan, const at::Tensor& source, const std::vector<at::Tensor>& indices,
                           const std::vector<int64_t>& dims) {
  const int64_t axis = plan.axis, count = static_cast<int64_t>(dims.size());
  int64_t span = 1;  // the largest offset + 1
  bool empty = false;
  for (int64_t d = axis; d < axis + count; ++d) {
    span += (source.size(d) - 1) * source.stride(d);
    empty |= source.size(d) == 0;
  }
  std::vector<int64_t> sizes = source.sizes().vec(), strides = source.strides().vec();
  sizes.erase(sizes.begin() + axis + 1, sizes.begin() + axis + count);
  strides.erase(strides.begin() + axis + 1, strides.begin() + axis + count);
  sizes[axis] = empty ? 0 : span;
  strides[axis] = 1;
  plan.source = source.as_strided(sizes, strides, source.storage_offset());
  if (c10::multiply_integers(plan.result_shape) == 0) return;
  for (int64_t j = 0; j < count; ++j) {
    const at::Tensor& index = indices[axis + j];
    const at::Tensor wrapped = at::empty(index.sizes(), index.options().dtype(at::kLong));
    if (wrapped.numel() > 0) {
      launchInstruction(isa::Opcode::kWrapIndex, wrapped, {index},
                        {static_cast<double>(source.size(axis + j)), static_cast<double>(dims[j])});
    }
    const int64_t stride = source.stride(axis + j);
    plan.offsets = j == 0 ? (stride == 1 ? wrapped : at::mul(wrapped, stride)) : at::add(plan.offsets, wrapped, stride);
  }
}

// nullopt where torch's rules do not hold (the CPU raises its message) or PTO cannot
// take the tensors; index tensors on the CPU move to self's device, as torch allows.
std::optional<AdvancedIndex> advancedIndex(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  if (self.dim() == 0 || self.dim() > isa::kMaxRank || !ptoDType(self.scalar_type())) return std::nullopt;
  c10::List<std::optional<at::Tensor>> moved;
  int64_t consumed = 0;  // dimensions of self the indices take
  for (const std::optional<at::Tensor>& index : indices) {
    if (!index.has_value() || !index->defined()) {
      moved.push_back(std::nullopt);
      ++consumed;
      continue;
    }
    const at::ScalarType type = index->scalar_type();
    const bool mask = type == at::kBool || type == at::kByte;
    if ((!mask && type != at::kLong && type != at::kInt) || (mask && index->dim() == 0) ||
        (index->device() != self.device() && !index->is_cpu())) {
      return std::nullopt;
    }
    consumed += mask ? index->dim() : 1;
    moved.push_back(index->to(self.device()));
  }
  if (consumed > self.dim()) return std::nullopt;
  std::vector<at::Tensor> expanded = at::native::expandTensors(self, moved);  // masks through tnonzero
  expanded.resize(self.dim());
  const std::optional<at::DimVector> broadcast = broadcastShape(expanded);
  if (!broadcast) return std::nullopt;
  std::vector<int64_t> dims;  // self's indexed dimensions, which twrapindex names in its messages
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (expanded[d].defined()) dims.push_back(d);
  }
  at::Tensor source = self;
  if (!at::native::hasContiguousSubspace(expanded)) {
    std::tie(source, expanded) = at::native::transposeToFront(self, expanded);
  }
  AdvancedIndex plan;
  while (!expanded[plan.axis].defined()) ++plan.axis;
  const auto count = static_cast<int64_t>(dims.size());
  plan.result_shape.assign(source.sizes().begin(), source.sizes().begin() + plan.axis);
  plan.result_shape.insert(plan.result_shape.end(), broadcast->begin(), broadcast->end());
  plan.result_shape.insert(plan.result_shape.end(), source.sizes().begin() + plan.axis + count, source.sizes().end());
  if (count > 1) {
    foldIndexedDimensions(plan, source, expanded, dims);
    return plan;
  }
  plan.source = source;
  plan.wrap = true;
  if (c10::multiply_integers(plan.result_shape) > 0) plan.offsets = expanded[plan.axis].to(at::kLong);
  return plan;
}

at::Tensor indexGather(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  const std::optional<AdvancedIndex> plan = advancedIndex(self, indices);
  if (!plan) return Fallback<ATEN_OP2(index, Tensor)>::call(self, indices);
  at::Tensor out = at::empty(plan->result_shape, self.options());
  if (!plan->selectsNothing()) {
    launchInstruction(isa::Opcode::kGather, plan->folded(out), {plan->source, plan->foldedOffsets()},
                      plan->immediates());
  }
  return out;
}

at::Tensor& indexOut(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices, at::Tensor& out) {
  if (out.device() != self.device() || out.scalar_type() != self.scalar_type() || overlaps(out, self)) {
    return Fallback<ATEN_OP2(index, Tensor_out)>::call(self, indices, out);
  }
  return assign(out, indexGather(self, indices));
}

// self[indices] = values (+= with accumulate); values broadcast to the selection's shape.
at::Tensor& indexPut(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices, const at::Tensor& values,
                     bool accumulate, bool unsafe) {
  const bool cpu_scalar = values.is_cpu() && values.dim() == 0;  // torch moves it to self's device
  std::optional<AdvancedIndex> plan;
  if (values.scalar_type() == self.scalar_type() && (values.device() == self.device() || cpu_scalar) &&
      at::has_internal_overlap(self) != at::MemOverlap::Yes) {
    plan = advancedIndex(self, indices);
  }
  if (!plan || !at::is_expandable_to(values.sizes(), plan->result_shape)) {
    return Fallback<ATEN_OP(_index_put_impl_)>::call(self, indices, values, accumulate, unsafe);
  }
  if (plan->selectsNothing()) return self;
  at::Tensor source = values.to(self.device());
  if (overlaps(self, source)) source = source.clone();  // read all of values before self changes
  launchInstruction(accumulate ? isa::Opcode::kScatterAdd : isa::Opcode::kScatter, plan->source,
                    {plan->folded(source.expand(plan->result_shape)), plan->foldedOffsets()}, plan->immediates());
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("scatter.src_out", TORCH_FN(scatterSrcOut));
  m.impl("scatter.value_out", TORCH_FN(scatterValueOut));
  m.impl("scatter_add.out", TORCH_FN(scatterAddOut));
  m.impl("scatter.reduce_out", TORCH_FN(scatterReduceOut));
  m.impl("scatter.value_reduce_out", TORCH_FN(scatterValueReduceOut));
  m.impl("scatter_reduce.two_out", TORCH_FN(scatterReduceTwoOut));
  m.impl("index.Tensor", TORCH_FN(indexGather));
  m.impl("index.Tensor_out", TORCH_FN(indexOut));
  m.impl("_index_put_impl_", TORCH_FN(indexPut));
  m.impl("nonzero", TORCH_FN(nonzero));
  m.impl("nonzero.out", TORCH_FN(nonzeroOut));
}

}  // namespace pto::backend
