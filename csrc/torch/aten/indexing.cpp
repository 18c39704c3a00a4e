#include "indexing.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/Reduction.h>
#include <ATen/native/Resize.h>
#include <ATen/Operators.h>

#include <cmath>
#include <limits>
#include <vector>

#include "../dtype_map.h"
#include "advanced_indexing.h"
#include "composite.h"
#include "fallback.h"
#include "instruction_launch.h"
#include "recipe_launch.h"

namespace pto::torch_glue {
namespace {

// gather's recipe (csrc/recipes/products.cpp) when torch's own rules hold; false sends
// the op to the CPU, which raises PyTorch's message for what does not.
bool gatherInto(const at::Tensor& out, const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  if (index.scalar_type() != at::kLong || self.dim() != index.dim() ||
      out.scalar_type() != self.scalar_type() || !ptoDType(self.scalar_type()) ||
      index.device() != self.device() || out.device() != self.device()) {
    return false;
  }
  const int64_t axis = at::maybe_wrap_dim(dim, self.dim());
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d != axis && index.size(d) > self.size(d)) return false;
  }
  if (out.numel() == 0) return true;
  return RecipeCall(atenName<ATEN_OP(gather)>()).tensor("self", self).value("dim", axis).tensor("index", index)
      .result(out).launch();
}

// aten's index_add checks: out is written while index and source are read.
void checkIndexAddOverlap(const at::Tensor& out, const at::Tensor& index, const at::Tensor& source) {
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, index);
  at::assert_no_overlap(out, source);
}

// out = self, then out[..., index[i], ...] += alpha * source[..., i, ...].
bool indexAddInto(at::Tensor& out, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                  const at::Tensor& source, const at::Scalar& alpha) {
  if (self.dim() == 0 || index.dim() > 1 || source.dim() != self.dim() || source.scalar_type() != self.scalar_type() ||
      (index.scalar_type() != at::kLong && index.scalar_type() != at::kInt) ||
      !accepts(isa::Opcode::kIndexAdd, self.scalar_type()) || index.device() != self.device() ||
      source.device() != self.device() || out.device() != self.device()) {
    return false;
  }
  const int64_t axis = at::maybe_wrap_dim(dim, self.dim());
  if (source.size(axis) != index.numel()) return false;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d != axis && source.size(d) != self.size(d)) return false;
  }
  if (!out.is_same(self)) {
    at::native::resize_output(out, self.sizes());
    out.copy_(self);
  }
  if (index.numel() == 0) return true;
  const at::Tensor scaled = alpha.toDouble() == 1.0 ? source : at::mul(source, alpha);
  launchInstruction(isa::Opcode::kIndexAdd, out, {scaled, index.to(at::kLong).reshape({-1})},
                    {static_cast<double>(axis), 0.0});
  return true;
}

// tril/triu: one ttril/ttriu; out may be self (in place: each element is read
// before it is written, at the same position).
template <isa::Opcode opcode, class Out>
at::Tensor& triangleOut(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  if (self.dim() < 2 || out.device() != self.device() || out.scalar_type() != self.scalar_type() ||
      !accepts(opcode, self.scalar_type())) {
    return Fallback<Out>::call(self, diagonal, out);
  }
  if (!out.is_same(self)) at::native::resize_output(out, self.sizes());
  if (out.numel() > 0) launchInstruction(opcode, out, {self}, {static_cast<double>(diagonal), 0.0});
  return out;
}

template <isa::Opcode opcode, class Out>
at::Tensor triangle(const at::Tensor& self, int64_t diagonal) {
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  return triangleOut<opcode, Out>(self, diagonal, out);
}

template <isa::Opcode opcode, class Out>
at::Tensor& triangleInplace(at::Tensor& self, int64_t diagonal) {
  return triangleOut<opcode, Out>(self, diagonal, self);
}

// The per-sample class weights of nll_loss: weight[target], 0 where ignored.
struct Picks {
  at::Tensor safe_target;  // target with ignored entries replaced by class 0
  at::Tensor weights;      // [N]
  at::Tensor valid;        // [N] bool: target != ignore_index
};

Picks picks(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
            int64_t ignore_index) {
  const at::Tensor valid = at::ne(target, ignore_index);
  const at::Tensor safe = at::where(valid, target, at::zeros({}, target.options()));
  const at::Tensor class_weights = weight && weight->defined() ? weight->index_select(0, safe)
                                                               : at::ones(target.sizes(), self.options());
  return {safe, at::where(valid, class_weights, at::zeros({}, self.options())), valid};
}

// The CPU's check of nll_loss's class weights: one per class, or none.
void checkClassWeights(const at::Tensor& self, const std::optional<at::Tensor>& weight) {
  if (!weight || !weight->defined()) return;
  const int64_t classes = self.size(-1);
  TORCH_CHECK(weight->dim() <= 1 && weight->numel() == classes, "weight tensor should be defined either for all ",
              classes, " classes or no classes but got weight tensor of shape: ", weight->sizes());
}

bool nllNative(const at::Tensor& self, const at::Tensor& target) {
  return (self.dim() == 2 && target.dim() == 1 && target.size(0) == self.size(0)) &&
         target.scalar_type() == at::kLong && at::isFloatingType(self.scalar_type());
}

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

}  // namespace

at::Tensor tril(const at::Tensor& self, int64_t diagonal) {
  return triangle<isa::Opcode::kTril, ATEN_OP2(tril, out)>(self, diagonal);
}
at::Tensor& trilOut(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  return triangleOut<isa::Opcode::kTril, ATEN_OP2(tril, out)>(self, diagonal, out);
}
at::Tensor& trilInplace(at::Tensor& self, int64_t diagonal) {
  return triangleInplace<isa::Opcode::kTril, ATEN_OP2(tril, out)>(self, diagonal);
}
at::Tensor triu(const at::Tensor& self, int64_t diagonal) {
  return triangle<isa::Opcode::kTriu, ATEN_OP2(triu, out)>(self, diagonal);
}
at::Tensor& triuOut(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  return triangleOut<isa::Opcode::kTriu, ATEN_OP2(triu, out)>(self, diagonal, out);
}
at::Tensor& triuInplace(at::Tensor& self, int64_t diagonal) {
  return triangleInplace<isa::Opcode::kTriu, ATEN_OP2(triu, out)>(self, diagonal);
}

at::Tensor gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad) {
  at::Tensor out = at::empty(index.sizes(), self.options());
  return gatherInto(out, self, dim, index) ? out : Fallback<ATEN_OP(gather)>::call(self, dim, index, sparse_grad);
}

at::Tensor& gatherOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad, at::Tensor& out) {
  if (out.device() == self.device()) at::native::resize_output(out, index.sizes());
  // aten's gather checks, on the resized out.
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_partial_overlap(out, index);
  if (!gatherInto(out, self, dim, index)) Fallback<ATEN_OP2(gather, out)>::call(self, dim, index, sparse_grad, out);
  return out;
}

at::Tensor& indexSelectOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, index);
  const bool native = self.dim() > 0 && index.dim() <= 1 &&
                      (index.scalar_type() == at::kLong || index.scalar_type() == at::kInt);
  if (native) {
    const int64_t axis = at::maybe_wrap_dim(dim, self.dim());
    std::vector<int64_t> shape = self.sizes().vec();
    shape[axis] = index.numel();
    std::vector<int64_t> spread(self.dim(), 1);
    spread[axis] = index.numel();
    at::native::resize_output(out, shape);
    const at::Tensor positions = index.to(at::kLong).reshape(spread).expand(shape);
    if (gatherInto(out, self, axis, positions)) return out;
  }
  return Fallback<ATEN_OP2(index_select, out)>::call(self, dim, index, out);
}

at::Tensor indexSelect(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::Tensor out = at::empty({0}, self.options());
  return indexSelectOut(self, dim, index, out);
}

namespace {

// arange's recipe over `out` in row-major order: directly into a vector, through a
// contiguous range copied into out's shape otherwise. False where it does not apply.
bool writeRange(at::Tensor& out, double first, double step) {
  const at::Tensor range = out.dim() == 1 ? out : at::empty({out.numel()}, out.options());
  if (!RecipeCall(atenName<ATEN_OP2(arange, start_step)>()).value("start", first).value("step", step)
           .result(range).launch()) {
    return false;
  }
  if (!range.is_same(out)) out.copy_(range.view(out.sizes()));
  return true;
}

}  // namespace

at::Tensor& arangeOut(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step, at::Tensor& out) {
  const double first = start.toDouble(), last = end.toDouble(), stride = step.toDouble();
  const bool sane = stride != 0 && std::isfinite(first) && std::isfinite(last) &&
                    (stride > 0 ? last >= first : last <= first) && ptoDType(out.scalar_type());
  if (!sane) return Fallback<ATEN_OP2(arange, start_out)>::call(start, end, step, out);
  const double length = std::ceil((last - first) / stride);
  TORCH_CHECK(length >= 0 && length <= static_cast<double>(std::numeric_limits<int64_t>::max()),
              "invalid size, possible overflow?");
  auto count = static_cast<int64_t>(length);
  if (out.scalar_type() == at::kLong) {
    // PyTorch counts an int64 range in integers, from start, end and step truncated
    // (arange(0., -8.000001, -4) is [0, -4]); other dtypes count from the doubles.
    const int64_t from = start.toLong(), to = end.toLong(), by = step.toLong();
    if (by == 0) return Fallback<ATEN_OP2(arange, start_out)>::call(start, end, step, out);
    count = (to - from + by - (by > 0 ? 1 : -1)) / by;
  }
  // As the CPU's arange: an out of another element count is resized to the range
  // (with its warning); one of the same count keeps its shape and strides.
  if (out.numel() != count) {
    if (out.numel() > 0) {
      TORCH_WARN("The number of elements in the out tensor of shape ", out.sizes(), " is ",
                 out.numel(), " which does not match the computed number of elements ", count,
                 ". Note that this may occur as a result of rounding error. "
                 "The out tensor will be resized to a tensor of shape (", count, ",).");
    }
    out.resize_({count});
  }
  // Also for no element: the recipe says whether out's dtype has a range (bool has none).
  if (!writeRange(out, first, stride)) return Fallback<ATEN_OP2(arange, start_out)>::call(start, end, step, out);
  return out;
}

// linspace as PyTorch's CPU kernel computes it: a step in the output's precision,
// the first half counted up from start and the second down from end, so that both
// ends are exact. float32 and float64 only: for float16/bfloat16 the CPU rounds the
// index itself to the dtype, a different sequence, which the fallback keeps.
at::Tensor& linspaceOut(const at::Scalar& start, const at::Scalar& end, int64_t steps, at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  if (out.scalar_type() != at::kFloat && out.scalar_type() != at::kDouble) {
    return Fallback<ATEN_OP2(linspace, out)>::call(start, end, steps, out);
  }
  // As the CPU's linspace: resized only to another element count; otherwise written
  // in out's own shape and strides, in row-major order.
  if (out.numel() != steps) out.resize_({steps});
  if (steps <= 1) return steps == 1 ? out.fill_(start) : out;
  const bool wide = out.scalar_type() == at::kDouble;
  const double first = start.toDouble(), last = end.toDouble();
  const double step = wide ? (last - first) / static_cast<double>(steps - 1)
                           : static_cast<double>((static_cast<float>(last) - static_cast<float>(first)) /
                                                 static_cast<float>(steps - 1));
  const at::Tensor index = at::arange(steps, out.options().dtype(wide ? at::kDouble : at::kFloat));
  const at::Tensor up = at::mul(index, step).add_(first);
  const at::Tensor down = at::rsub(at::rsub(index, steps - 1).mul_(step), last);
  return out.copy_(at::where(at::lt(index, steps / 2), up, down).view(out.sizes()));
}

at::Tensor& eyeOut(int64_t n, int64_t m, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  // As the CPU's: resize_ (silent, strides kept at the same size), zeros, then
  // the diagonal, so that an expanded out is written as the CPU writes it.
  out.resize_({n, m});
  out.zero_();
  if (n > 0 && m > 0) out.diagonal().fill_(1);
  return out;
}

at::Tensor& eyeSquareOut(int64_t n, at::Tensor& out) { return eyeOut(n, n, out); }

at::Tensor oneHot(const at::Tensor& self, int64_t num_classes) {
  TORCH_CHECK(self.scalar_type() == at::kLong, "one_hot is only applicable to index tensor of type LongTensor.");
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.numel() == 0) {
    TORCH_CHECK(num_classes > 0, "Can not infer total number of classes from empty tensor.");
    shape.push_back(num_classes);
    return at::empty(shape, self.options());
  }
  const at::Tensor bounds = at::stack({self.min(), self.max()}).cpu();
  TORCH_CHECK(bounds[0].item<int64_t>() >= 0, "Class values must be non-negative.");
  const int64_t largest = bounds[1].item<int64_t>();
  if (num_classes == -1) num_classes = largest + 1;
  TORCH_CHECK(num_classes > largest, "Class values must be smaller than num_classes.");
  shape.push_back(num_classes);
  return at::zeros(shape, self.options()).scatter_(-1, self.unsqueeze(-1), 1);
}

at::Tensor& indexAddOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                        const at::Scalar& alpha, at::Tensor& out) {
  checkIndexAddOverlap(out, index, source);
  if (!indexAddInto(out, self, dim, index, source, alpha)) {
    Fallback<ATEN_OP2(index_add, out)>::call(self, dim, index, source, alpha, out);
  }
  return out;
}

at::Tensor indexAdd(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                    const at::Scalar& alpha) {
  at::Tensor out = at::empty({0}, self.options());
  return indexAddOut(self, dim, index, source, alpha, out);
}

at::Tensor& indexAddInplace(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                            const at::Scalar& alpha) {
  checkIndexAddOverlap(self, index, source);
  if (!indexAddInto(self, self, dim, index, source, alpha)) {
    Fallback<ATEN_OP(index_add_)>::call(self, dim, index, source, alpha);
  }
  return self;
}

// embedding's gradient: each token's gradient row added into its weight row.
at::Tensor embeddingDenseBackward(const at::Tensor& grad_output, const at::Tensor& indices, c10::SymInt num_weights,
                                  c10::SymInt padding_idx, bool scale_grad_by_freq) {
  if (scale_grad_by_freq || !at::isFloatingType(grad_output.scalar_type())) {
    return at::native::call_fallback_fn_symint<&cpuFallback, ATEN_OP(embedding_dense_backward)>::call(
        grad_output, indices, num_weights, padding_idx, scale_grad_by_freq);
  }
  const int64_t rows = num_weights.expect_int(), padding = padding_idx.expect_int();
  const at::Tensor flat_indices = indices.reshape({-1});
  at::Tensor flat_grad = grad_output.reshape({flat_indices.numel(), grad_output.size(-1)});
  if (padding >= 0) flat_grad = at::mul(flat_grad, at::ne(flat_indices, padding).unsqueeze(1).to(flat_grad.scalar_type()));
  at::Tensor grad_weight = at::zeros({rows, grad_output.size(-1)}, grad_output.options());
  return indexAddInplace(grad_weight, 0, flat_indices, flat_grad, 1);
}

std::tuple<at::Tensor, at::Tensor> nllLossForward(const at::Tensor& self, const at::Tensor& target,
                                                  const std::optional<at::Tensor>& weight, int64_t reduction,
                                                  int64_t ignore_index) {
  if (!nllNative(self, target)) {
    return Fallback<ATEN_OP(nll_loss_forward)>::call(self, target, weight, reduction, ignore_index);
  }
  checkClassWeights(self, weight);
  const Picks p = picks(self, target, weight, ignore_index);
  const at::Tensor picked = self.gather(1, p.safe_target.unsqueeze(1)).squeeze(1);
  const at::Tensor losses = at::neg(at::mul(picked, p.weights));
  const at::Tensor total = p.weights.sum();
  if (reduction == at::Reduction::None) return {losses, total};
  if (reduction == at::Reduction::Sum) return {losses.sum(), total};
  return {at::div(losses.sum(), total), total};
}

at::Tensor nllLossBackward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                           const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                           const at::Tensor& total_weight) {
  if (!nllNative(self, target)) {
    return Fallback<ATEN_OP(nll_loss_backward)>::call(grad_output, self, target, weight, reduction, ignore_index,
                                                      total_weight);
  }
  checkClassWeights(self, weight);
  const Picks p = picks(self, target, weight, ignore_index);
  // The CPU's order, weight * -(grad / total); an ignored row stays 0 even
  // when every row is ignored (total 0: the coefficient is NaN there).
  const at::Tensor scale = reduction == at::Reduction::Mean ? at::div(grad_output, total_weight) : grad_output;
  const at::Tensor coefficient = at::mul(p.weights, at::neg(scale));
  const at::Tensor classes = at::arange(self.size(1), target.options());
  const at::Tensor chosen =
      at::logical_and(at::eq(classes.unsqueeze(0), p.safe_target.unsqueeze(1)), p.valid.unsqueeze(1));
  return at::where(chosen, coefficient.unsqueeze(1), at::zeros({}, self.options()));
}

at::Tensor& indexFillScalar(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value) {
  TORCH_CHECK(index.dim() <= 1, "index_fill_(): Index is supposed to be a vector");
  TORCH_CHECK_INDEX(index.scalar_type() == at::kLong, "index_fill_(): Expected dtype int64 for index.");
  TORCH_CHECK(self.is_complex() || !value.isComplex(),
              "index_fill_(): Converting complex Scalar to non-complex type is not supported");
  at::assert_no_overlap(self, index);
  if (self.dim() == 0 || index.numel() == 0) return self.dim() == 0 && index.numel() > 0 ? self.fill_(value) : self;
  const int64_t axis = at::maybe_wrap_dim(dim, self.dim());
  checkIndexOnHost(index, axis, self.size(axis));
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes) {
    // As the CPU: a warning, and each element written once (all of them when the
    // indexed dimension itself repeats).
    TORCH_WARN("Use of index_fill_ on expanded tensors is deprecated. Please clone() the tensor before performing "
               "this operation. This also applies to advanced indexing e.g. tensor[indices] = tensor");
    at::Tensor distinct = distinctElements(self);
    if (self.stride(axis) == 0) distinct.fill_(value);
    else indexFillScalar(distinct, axis, index, value);
    return self;
  }
  // An index on the CPU is allowed, as on CUDA: it moves to self's device.
  const at::Tensor positions = positionsAlong(index.to(self.device()), axis, self.sizes(), self.size(axis));
  return self.scatter_(axis, positions, value);
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
  TORCH_CHECK_NOT_IMPLEMENTED(at::isIntegralType(self.scalar_type(), /*includeBool=*/false),
                              "\"bincount_cpu\" not implemented for '", self.scalar_type(), "'");
  TORCH_CHECK(self.dim() == 1, "bincount only supports 1-d non-negative integral inputs.");
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

}  // namespace pto::torch_glue
