// Convolution recipes: aten's convolutions and their gradients as the Conv group's
// instructions, in float32 or bfloat16 (float16 widened to float32), summed in float32
// and rounded once, as PyTorch's CPU kernels do. float64 takes none: the eager kernel
// runs it as im2col and GEMMs (csrc/torch/aten/convolution.cpp). A transposed
// convolution is the input gradient of the plain one whose input has its output's
// shape, and its gradients are that convolution's output and weight gradient.
#include <algorithm>

#include "families.h"
#include "isa/convolution.h"

namespace pto::recipes {
namespace {

using isa::DType;
using isa::Opcode;

// The Conv instructions' immediates from aten's arguments: groups, then stride,
// padding and dilation per spatial dimension (the unused ones 1, 0 and 1); beta 0.
std::array<double, isa::kMaxImmediates> convImmediates(const Arguments& args, int64_t spatial) {
  const std::vector<int64_t> stride = *args.dims("stride"), padding = *args.dims("padding"),
                             dilation = *args.dims("dilation");
  if (static_cast<int64_t>(stride.size()) != spatial || static_cast<int64_t>(padding.size()) != spatial ||
      static_cast<int64_t>(dilation.size()) != spatial) {
    throw NotApplicable("a convolution's stride, padding and dilation need one value per spatial dimension");
  }
  std::array<double, isa::kMaxImmediates> immediates{};
  immediates[isa::kConvGroups] = static_cast<double>(args.integer("groups"));
  for (int64_t i = 0; i < isa::kMaxConvSpatial; ++i) {
    const bool used = i < spatial;
    immediates[isa::kConvStride + i] = used ? static_cast<double>(stride[i]) : 1.0;
    immediates[isa::kConvPad + i] = used ? static_cast<double>(padding[i]) : 0.0;
    immediates[isa::kConvDilation + i] = used ? static_cast<double>(dilation[i]) : 1.0;
  }
  return immediates;
}

// The dtype the Conv instructions of a convolution of `dtype` take: bfloat16 itself
// (they sum in float32) unless `rounds_twice` (a result rounded, then added to), else
// float32 for it and float16, or none.
DType computeType(DType dtype, bool rounds_twice = false) {
  if (dtype == DType::kBFloat16 && !rounds_twice) return dtype;
  if (widened(dtype) != DType::kFloat32) throw NotApplicable("a convolution in " + std::string(isa::dtypeName(dtype)));
  return DType::kFloat32;
}

// Whether `view`'s elements are distinct and packed in some order of its dimensions
// (NCHW, channels_last, a permutation or a slice of one): oneDNN's memory descriptors
// take no repeated elements (a gradient of sum() is one value broadcast by stride 0).
bool isDense(const View& view) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < view.rank(); ++d) {
    if (view.shape[d] != 1) dims.push_back(d);
  }
  std::ranges::sort(dims, [&](int64_t a, int64_t b) { return view.strides[a] < view.strides[b]; });
  int64_t reach = 1;
  for (int64_t d : dims) {
    if (view.strides[d] < reach) return false;
    reach = view.strides[d] * view.shape[d];
  }
  return true;
}

// A new buffer of `dtype` at `view`'s shape, its dimensions packed in the stride order
// of `layout` (of view's rank): a channels_last operand's copy stays channels_last,
// which oneDNN's direct kernels read in place beside the other channels_last operands.
View temporaryLike(Recipe& r, DType dtype, const View& view, const View& layout) {
  std::vector<int64_t> order(static_cast<size_t>(view.rank()));
  for (int64_t d = 0; d < view.rank(); ++d) order[d] = d;
  std::ranges::stable_sort(order, [&](int64_t a, int64_t b) { return layout.strides[a] > layout.strides[b]; });
  std::vector<int64_t> shape, inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    shape.push_back(view.shape[order[i]]);
    inverse[order[i]] = static_cast<int64_t>(i);
  }
  return permute(r.temporary(dtype, shape), inverse);
}

// An operand as the Conv instructions take it: `view` itself where it is dense and of
// `dtype`, else a copy of dtype laid out as view (if dense) or `layout`.
View prepared(Recipe& r, const View& view, DType dtype, const View& layout) {
  const bool dense = isDense(view);
  if (dense && view.dtype == dtype) return view;
  return r.copy(temporaryLike(r, dtype, view, dense ? view : layout), view);
}

// Where the sum meant for `result` is computed: the result itself, or a temporary of
// dtype laid out as it, which Recipe::settle then rounds into it.
View sumFor(Recipe& r, const View& result, DType dtype) {
  return result.dtype == dtype ? result : temporaryLike(r, dtype, result, result);
}

// A bias [C] along dimension 1 of `shape`.
View alongChannels(const View& bias, const std::vector<int64_t>& shape) {
  View out = bias;
  out.shape = shape;
  out.strides.assign(shape.size(), 0);
  out.strides[1] = bias.strides[0];
  return out;
}

void convolution(Recipe& r, const Arguments& args) {
  const View x = args.tensor("input"), w = args.tensor("weight");
  const View& out = args.result();
  const std::optional<View> bias = args.optionalTensor("bias");
  // A transposed convolution's bias is added after the products: in float32 throughout.
  const DType compute = computeType(out.dtype, bias && args.flag("transposed"));
  std::array<double, isa::kMaxImmediates> immediates = convImmediates(args, x.rank() - 2);
  const View sum = sumFor(r, out, compute);
  const View x_wide = prepared(r, x, compute, x), w_wide = prepared(r, w, compute, w);
  if (args.flag("transposed")) {
    r.emit(Opcode::kConvBackwardData, sum, {x_wide, w_wide}, immediates);
    if (bias) r.emit(Opcode::kAdd, sum, {sum, alongChannels(r.cast(*bias, compute), sum.shape)}, {1.0});
  } else {
    if (bias) {
      r.copy(sum, alongChannels(*bias, sum.shape));
      immediates[isa::kConvBeta] = 1.0;  // the products summed onto the bias
    }
    r.emit(Opcode::kConv, sum, {x_wide, w_wide}, immediates);
  }
  r.settle(out, sum);
}

// The input and weight gradients output_mask asks for, its results in that order (the
// bias's, a sum, is the eager kernel's).
void convolutionBackward(Recipe& r, const Arguments& args) {
  const View grad = args.tensor("grad_output"), x = args.tensor("input"), w = args.tensor("weight");
  const DType compute = computeType(grad.dtype);
  const std::array<double, isa::kMaxImmediates> immediates = convImmediates(args, x.rank() - 2);
  const std::vector<int64_t> mask = *args.dims("output_mask");
  const bool transposed = args.flag("transposed");
  const View grad_wide = prepared(r, grad, compute, x);
  size_t next = 0;
  if (mask.at(0)) {
    const View& grad_input = args.result(next++);
    const View sum = sumFor(r, grad_input, compute);
    r.emit(transposed ? Opcode::kConv : Opcode::kConvBackwardData, sum, {grad_wide, prepared(r, w, compute, w)},
           immediates);
    r.settle(grad_input, sum);
  }
  if (mask.at(1)) {
    const View& grad_weight = args.result(next++);
    const View sum = sumFor(r, grad_weight, compute);
    const View x_wide = prepared(r, x, compute, x);
    // tconvbwdw takes (dL/dy, x): a transposed convolution's input plays dL/dy.
    r.emit(Opcode::kConvBackwardWeight, sum, transposed ? std::vector<View>{x_wide, grad_wide}
                                                        : std::vector<View>{grad_wide, x_wide}, immediates);
    r.settle(grad_weight, sum);
  }
}

}  // namespace

void addConvolutionRecipes(Table& table) {
  table["aten::convolution_overrideable"] = convolution;
  table["aten::convolution_backward_overrideable"] = convolutionBackward;
}

}  // namespace pto::recipes
