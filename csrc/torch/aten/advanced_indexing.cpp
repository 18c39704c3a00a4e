#include "advanced_indexing.h"

#include <ATen/Context.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/IndexingUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/Operators.h>

#include <array>
#include <optional>
#include <vector>

#include "../dtype_map.h"
#include "composite.h"
#include "fallback.h"
#include "instruction_launch.h"

namespace pto::torch_glue {
namespace {

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

// self viewed with the dimensions under each mask that merge into one (a mask over
// rows and columns of a contiguous matrix) merged, the masks flattened to match:
// their nonzero then has one column, an index along the merged dimension, so the
// gather or scatter needs no offsets. `dims[d]`: the dimension of self where view
// dimension d starts, for twrapindex's messages.
struct MergedMasks {
  at::Tensor view;
  c10::List<std::optional<at::Tensor>> indices;
  std::vector<int64_t> dims;
};

MergedMasks mergeMaskedDimensions(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  MergedMasks merged;
  std::vector<int64_t> sizes, strides;
  int64_t d = 0;
  for (const std::optional<at::Tensor>& index : indices) {
    const bool mask = index.has_value() && index->defined() &&
                      (index->scalar_type() == at::kBool || index->scalar_type() == at::kByte);
    const int64_t taken = mask ? index->dim() : 1;
    bool merges = mask && taken > 1;  // advancedIndex checked the mask's shape
    for (int64_t j = d; merges && j + 1 < d + taken; ++j) merges = self.stride(j) == self.stride(j + 1) * self.size(j + 1);
    if (merges) {
      sizes.push_back(c10::multiply_integers(self.sizes().slice(d, taken)));
      strides.push_back(self.stride(d + taken - 1));
      merged.dims.push_back(d);
      merged.indices.push_back(index->reshape({-1}));
    } else {
      for (int64_t j = d; j < d + taken; ++j) {
        sizes.push_back(self.size(j));
        strides.push_back(self.stride(j));
        merged.dims.push_back(j);
      }
      merged.indices.push_back(index);
    }
    d += taken;
  }
  for (; d < self.dim(); ++d) {
    sizes.push_back(self.size(d));
    strides.push_back(self.stride(d));
    merged.dims.push_back(d);
  }
  merged.view = self.as_strided(sizes, strides, self.storage_offset());
  return merged;
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
    const int64_t taken = mask ? index->dim() : 1;
    if ((!mask && type != at::kLong && type != at::kInt) || (mask && index->dim() == 0) ||
        (index->device() != self.device() && !index->is_cpu()) || consumed + taken > self.dim() ||
        (mask && index->sizes() != self.sizes().slice(consumed, taken))) {
      return std::nullopt;
    }
    if (!mask) checkIndexOnHost(*index, consumed, self.size(consumed));
    consumed += taken;
    moved.push_back(index->to(self.device()));
  }
  const MergedMasks merged = mergeMaskedDimensions(self, moved);
  std::vector<at::Tensor> expanded = at::native::expandTensors(merged.view, merged.indices);  // masks: tnonzero
  expanded.resize(merged.view.dim());
  const std::optional<at::DimVector> broadcast = broadcastShape(expanded);
  if (!broadcast) return std::nullopt;
  std::vector<int64_t> dims;  // self's indexed dimensions, which twrapindex names in its messages
  for (int64_t d = 0; d < merged.view.dim(); ++d) {
    if (expanded[d].defined()) dims.push_back(merged.dims[d]);
  }
  at::Tensor source = merged.view;
  if (!at::native::hasContiguousSubspace(expanded)) {
    std::tie(source, expanded) = at::native::transposeToFront(merged.view, expanded);
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

// aten's checks before an op writes out while it reads self and the indices.
void checkIndexingOverlap(const at::Tensor& out, const at::Tensor& self,
                          const c10::List<std::optional<at::Tensor>>& indices) {
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  for (const std::optional<at::Tensor>& index : indices) {
    if (index && index->defined()) at::assert_no_overlap(out, *index);
  }
}

}  // namespace

void checkIndexOnHost(const at::Tensor& index, int64_t dim, int64_t size) {
  if (index.numel() == 0) return;
  TORCH_CHECK_INDEX(size > 0, "index is out of bounds for dimension with size 0");
  if (!index.is_cpu()) return;
  const at::Tensor values = index.to(at::kLong).contiguous();
  const int64_t* value = values.const_data_ptr<int64_t>();
  for (int64_t i = 0; i < values.numel(); ++i) {
    TORCH_CHECK_INDEX(value[i] >= -size && value[i] < size, "index ", value[i], " is out of bounds for dimension ",
                      dim, " with size ", size);
  }
}

// The coordinates of self's nonzero elements, counted first on the host.
at::Tensor& nonzeroOut(const at::Tensor& self, at::Tensor& out) {
  // CUDA's check: a CPU out, even 0-dim, is not written from the device.
  TORCH_CHECK(out.device() == self.device(), "expected self and out to be on the same device, but got out on ",
              out.device(), " and self on ", self.device());
  if (!accepts(isa::Opcode::kNonzero, self.scalar_type()) || out.scalar_type() != at::kLong ||
      out.device() != self.device() || self.dim() > isa::kMaxRank) {
    return Fallback<ATEN_OP2(nonzero, out)>::call(self, out);
  }
  const int64_t count = (self.scalar_type() == at::kBool ? self : at::ne(self, 0)).sum().item<int64_t>();
  at::native::resize_output(out, {count, self.dim()});
  if (out.numel() > 0) launchInstruction(isa::Opcode::kNonzero, out, {self});
  return out;
}

at::Tensor nonzero(const at::Tensor& self) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return nonzeroOut(self, out);
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
  checkIndexingOverlap(out, self, indices);
  if (out.device() != self.device() || out.scalar_type() != self.scalar_type()) {
    return Fallback<ATEN_OP2(index, Tensor_out)>::call(self, indices, out);
  }
  return assign(out, indexGather(self, indices));
}

// self[indices] = values (+= with accumulate); values broadcast to the selection's shape.
namespace {

// index_put_ into a tensor whose elements repeat (expand), as the CPU writes it: each
// write goes to the memory location its element names, in the writes' order, so the
// last one to a location wins (or all add up, accumulating). The locations are an
// arange over self's storage viewed as self, indexed as self would be.
at::Tensor& indexPutThroughStorage(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                                   const at::Tensor& values, bool accumulate) {
  const auto extent = static_cast<int64_t>(self.storage().nbytes() / self.itemsize());
  const at::Tensor locations = at::arange(extent, self.options().dtype(at::kLong))
                                   .as_strided(self.sizes(), self.strides(), self.storage_offset());
  const at::Tensor targets = at::index(locations, indices);
  const at::Tensor source = values.to(self.device()).expand(targets.sizes());
  at::Tensor memory = self.as_strided({extent}, {1}, 0);
  memory.index_put_({targets.reshape({-1})}, source.reshape({-1}), accumulate);
  return self;
}

}  // namespace

at::Tensor& indexPut(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices, const at::Tensor& values,
                     bool accumulate, bool unsafe) {
  // aten's _index_put_impl_ checks (an expanded self is only deprecated there).
  at::assert_no_overlap(self, values);
  for (const std::optional<at::Tensor>& index : indices) {
    if (index && index->defined()) at::assert_no_overlap(self, *index);
  }
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes && values.scalar_type() == self.scalar_type()) {
    TORCH_WARN("Use of index_put_ on expanded tensors is deprecated. Please clone() the tensor before performing "
               "this operation. This also applies to advanced indexing e.g. tensor[indices] = tensor");
    return indexPutThroughStorage(self, indices, values, accumulate);
  }
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
  const at::Tensor source = values.to(self.device());
  launchInstruction(accumulate ? isa::Opcode::kScatterAdd : isa::Opcode::kScatter, plan->source,
                    {plan->folded(source.expand(plan->result_shape)), plan->foldedOffsets()}, plan->immediates());
  return self;
}

// take: self[index] over self flattened, negative indices counting from the end.
at::Tensor takeFlat(const at::Tensor& self, const at::Tensor& index) {
  if (index.scalar_type() != at::kLong || index.device() != self.device() || (self.numel() == 0 && index.numel() > 0)) {
    return Fallback<ATEN_OP(take)>::call(self, index);
  }
  return indexGather(self.reshape({-1}), {index});
}

at::Tensor& takeOut(const at::Tensor& self, const at::Tensor& index, at::Tensor& out) {
  if (out.device() != self.device() || out.scalar_type() != self.scalar_type()) {
    return Fallback<ATEN_OP2(take, out)>::call(self, index, out);
  }
  checkIndexingOverlap(out, self, {index});
  return assign(out, takeFlat(self, index));
}

// put_: self flattened, then index_put_ (a view: self must be contiguous).
at::Tensor& putFlat(at::Tensor& self, const at::Tensor& index, const at::Tensor& source, bool accumulate) {
  // The CPU's checks: without accumulate repeated indices make put_ nondeterministic
  // (torch's rule for every device), and overlaps are refused before the copies.
  if (!accumulate) at::globalContext().alertNotDeterministic("put_");
  at::assert_no_internal_overlap(self);
  at::assert_no_overlap(self, index);
  at::assert_no_overlap(self, source);
  if (!self.is_contiguous() || index.scalar_type() != at::kLong || source.scalar_type() != self.scalar_type() ||
      index.device() != self.device() || source.device() != self.device() || source.numel() != index.numel() ||
      (self.numel() == 0 && index.numel() > 0)) {
    return Fallback<ATEN_OP(put_)>::call(self, index, source, accumulate);
  }
  at::Tensor flat = self.view({-1});
  indexPut(flat, {index}, source.reshape(index.sizes()), accumulate, false);
  return self;
}

// masked_select: self[mask] over their broadcast shape (a native nonzero and gather).
at::Tensor maskedSelect(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  auto shape = at::infer_size(self.sizes(), mask.sizes());
  if (shape.empty()) shape = {1};  // 0-dim: as a one-element line
  return at::index(self.expand(shape), {std::optional<at::Tensor>(mask.expand(shape))});
}

at::Tensor& maskedSelectOut(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "masked_select(): self and result must have the same scalar type");
  checkIndexingOverlap(out, self, {mask});
  const at::Tensor selected = maskedSelect(self, mask);
  at::native::resize_output(out, selected.sizes());
  return out.copy_(selected);
}

}  // namespace pto::torch_glue
