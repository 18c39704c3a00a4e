// Row recipes: softmax and log_softmax with their gradients (one row instruction
// over the softmax dimension moved last: a view, no copy) and the normalisations.
#include <cmath>
#include <vector>

#include "aten_instructions.h"
#include "families.h"

namespace pto::recipes {
namespace {

using isa::DType;
using isa::Opcode;

// A rank-0 operand as a row of one element: a row instruction needs a row.
View asRow(const View& view, int64_t dim) {
  if (view.rank() == 0) return *viewAs(view, {1});
  return moveLast(view, dim);
}

void rowForward(Recipe& r, const Arguments& args, Opcode opcode,
                std::array<double, isa::kMaxImmediates> immediates = {}) {
  const View& out = args.result();
  const int64_t dim = args.integer("dim");
  r.emit(opcode, asRow(out, dim), {r.cast(asRow(args.tensor("self"), dim), out.dtype)}, immediates);
}

void rowBackward(Recipe& r, const Arguments& args, Opcode opcode) {
  const View& out = args.result();
  const int64_t dim = args.integer("dim");
  r.emit(opcode, asRow(out, dim),
         {r.cast(asRow(args.tensor("grad_output"), dim), out.dtype), r.cast(asRow(args.tensor("output"), dim), out.dtype)});
}

// The trailing `count`-element dims of `view` (from `axis` on) merged into one: a view
// where the strides allow it, else a row-major copy.
View rows(Recipe& r, const View& view, int64_t axis) {
  std::vector<int64_t> shape(view.shape.begin(), view.shape.begin() + axis);
  int64_t count = 1;
  for (int64_t d = axis; d < view.rank(); ++d) count *= view.shape[d];
  shape.push_back(count);
  return r.reshape(view, shape);
}

// layer_norm as three row instructions over x with its normalised dims as one row:
// tlayernorm for the output, tsum and trowrstd for the statistics the backward reads.
// False where they do not apply: a dtype tlayernorm does not take, or a weight or bias
// of another dtype than x's (the statistics in float32 there, as aten computes them).
bool fusedLayerNorm(Recipe& r, const Arguments& args, const View& x, int64_t axis, double eps) {
  const std::optional<View> weight = args.optionalTensor("weight"), bias = args.optionalTensor("bias");
  for (const std::optional<View>& p : {weight, bias}) {
    if (p && p->dtype != x.dtype) return false;
  }
  if (!isa::acceptedDTypes(Opcode::kLayerNorm).contains(x.dtype)) return false;
  const View row = rows(r, x, axis);
  const int64_t count = row.shape.back();
  auto parameter = [&](const std::optional<View>& p, double absent) {
    return expand(p ? rows(r, *p, 0) : r.scalar(absent, x.dtype), row.shape);
  };
  r.emit(Opcode::kLayerNorm, rows(r, args.result(0), axis), {row, parameter(weight, 1.0), parameter(bias, 0.0)}, {eps});
  const View mean = expand(rows(r, args.result(1), axis), row.shape);
  r.emit(Opcode::kSum, mean, {r.cast(row, mean.dtype)}, {1.0 / static_cast<double>(count)});
  const View rstd = expand(rows(r, args.result(2), axis), row.shape);
  r.emit(Opcode::kRowRstd, rstd, {r.cast(row, rstd.dtype)}, {eps});
  return true;
}

// Else mean, centre, variance, rstd, scale and shift in float32 for float16/bfloat16
// (rounded once at the end, as aten's CPU kernel does): one row kernel after fusion.
void composedLayerNorm(Recipe& r, const Arguments& args, const View& x, int64_t axis, double eps) {
  const DType compute = widened(x.dtype);
  std::vector<int64_t> dims;
  int64_t count = 1;
  for (int64_t d = axis; d < x.rank(); ++d) {
    dims.push_back(d);
    count *= x.shape[d];
  }
  const double inverse_count = 1.0 / static_cast<double>(count);
  const View xc = r.cast(x, compute);
  const View mean = r.resultIn(args.result(1), compute);
  r.emit(Opcode::kSum, spread(mean, x.shape, dims), {xc}, {inverse_count});
  const Opcode sub = atenInstruction("sub").opcode, mul = atenInstruction("mul").opcode, add = atenInstruction("add").opcode;
  const View centred = r.emit(sub, r.temporary(compute, x.shape), {xc, spread(mean, x.shape, dims)}, {1.0});
  const View square = r.emit(mul, r.temporary(compute, x.shape), {centred, centred});
  const View variance = r.temporary(compute, mean.shape);
  r.emit(Opcode::kSum, spread(variance, x.shape, dims), {square}, {inverse_count});
  const View shifted = r.emit(add, r.temporary(compute, mean.shape), {variance, r.operand(eps, compute, mean.shape)}, {1.0});
  const View rstd = r.emit(atenInstruction("rsqrt").opcode, r.resultIn(args.result(2), compute), {shifted});
  View out = r.emit(mul, r.temporary(compute, x.shape), {centred, spread(rstd, x.shape, dims)});
  if (const std::optional<View> weight = args.optionalTensor("weight")) {
    out = r.emit(mul, r.temporary(compute, x.shape), {out, r.operand(*weight, compute, x.shape)});
  }
  if (const std::optional<View> bias = args.optionalTensor("bias")) {
    out = r.emit(add, r.temporary(compute, x.shape), {out, r.operand(*bias, compute, x.shape)}, {1.0});
  }
  r.copy(args.result(0), out);
  r.settle(args.result(1), mean);
  r.settle(args.result(2), rstd);
}

// torch.finfo(dtype).eps: rms_norm's eps where none is given.
double machineEpsilon(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return std::ldexp(1.0, -10);
    case DType::kBFloat16: return std::ldexp(1.0, -7);
    case DType::kFloat32: return std::ldexp(1.0, -23);
    default: return std::ldexp(1.0, -52);
  }
}

}  // namespace

void addRowRecipes(Table& table) {
  table["aten::_softmax"] = [](Recipe& r, const Arguments& args) { rowForward(r, args, Opcode::kSoftmax); };
  // Attention's softmax: a row of -inf (a query every key is masked from) gives 0.
  table["aten::_safe_softmax"] = [](Recipe& r, const Arguments& args) {
    rowForward(r, args, Opcode::kSoftmax, {1.0});
  };
  table["aten::_log_softmax"] = [](Recipe& r, const Arguments& args) { rowForward(r, args, Opcode::kLogSoftmax); };
  table["aten::_softmax_backward_data"] = [](Recipe& r, const Arguments& args) {
    rowBackward(r, args, Opcode::kSoftmaxGrad);
  };
  table["aten::_log_softmax_backward_data"] = [](Recipe& r, const Arguments& args) {
    rowBackward(r, args, Opcode::kLogSoftmaxGrad);
  };
  table["aten::native_layer_norm"] = [](Recipe& r, const Arguments& args) {
    const View x = args.tensor("input");
    const int64_t axis = x.rank() - static_cast<int64_t>(args.dims("normalized_shape")->size());
    int64_t count = 1;
    for (int64_t d = axis; d < x.rank(); ++d) count *= x.shape[d];
    // Empty rows: their mean is NaN, which no sum gives.
    if (count == 0 || x.numel() == 0) throw NotApplicable("layer_norm over empty rows");
    const double eps = args.number("eps");
    if (!fusedLayerNorm(r, args, x, axis, eps)) composedLayerNorm(r, args, x, axis, eps);
  };
  // One trmsnorm for the output; the rstd beside it as mean(x * x) + eps, rsqrt.
  table["aten::_fused_rms_norm"] = [](Recipe& r, const Arguments& args) {
    const View x = args.tensor("input");
    if (args.dims("normalized_shape")->size() != 1 || x.rank() == 0 || x.numel() == 0 ||
        !isa::acceptedDTypes(Opcode::kRmsNorm).contains(x.dtype)) {
      throw NotApplicable("rms_norm over several dims, of no elements or of this dtype");
    }
    const double eps = args.number("eps", machineEpsilon(x.dtype));
    const std::optional<View> weight = args.optionalTensor("weight");
    r.emit(Opcode::kRmsNorm, args.result(0), {x, r.operand(weight ? Operand{*weight} : Operand{1.0}, x.dtype, x.shape)},
           {eps});
    const View square = r.emit(atenInstruction("mul").opcode, r.temporary(x.dtype, x.shape), {x, x});
    std::vector<int64_t> kept = x.shape;
    kept.back() = 1;
    const View mean = r.temporary(x.dtype, kept);
    r.emit(Opcode::kSum, spread(mean, x.shape, {x.rank() - 1}), {square}, {1.0 / static_cast<double>(x.shape.back())});
    const View shifted = r.emit(atenInstruction("add").opcode, r.temporary(x.dtype, kept),
                                {mean, r.operand(eps, x.dtype, kept)}, {1.0});
    const View rstd = r.emit(atenInstruction("rsqrt").opcode, r.resultIn(args.result(1), x.dtype), {shifted});
    r.settle(args.result(1), rstd);
  };
}

}  // namespace pto::recipes
