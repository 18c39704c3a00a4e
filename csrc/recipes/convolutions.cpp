// Convolution recipes: aten's convolutions and their gradients as the Conv group's
// instructions, in float32 (float16 and bfloat16 widened, summed in float32 and
// rounded once, as PyTorch's CPU kernels do). float64 takes none: the eager kernel
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

// The dtype a convolution of `dtype` computes in: float32, or none.
DType computeType(DType dtype) {
  if (widened(dtype) != DType::kFloat32) throw NotApplicable("a convolution in " + std::string(isa::dtypeName(dtype)));
  return DType::kFloat32;
}

// `view` itself where its elements are distinct and packed in some order of its
// dimensions (NCHW, channels_last, a permutation or a slice of one), else a row-major
// copy: oneDNN's memory descriptors take no repeated elements (a gradient of sum() is
// one value broadcast by stride 0).
View dense(Recipe& r, const View& view) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < view.rank(); ++d) {
    if (view.shape[d] != 1) dims.push_back(d);
  }
  std::ranges::sort(dims, [&](int64_t a, int64_t b) { return view.strides[a] < view.strides[b]; });
  int64_t reach = 1;
  for (int64_t d : dims) {
    if (view.strides[d] < reach) return r.contiguous(view);
    reach = view.strides[d] * view.shape[d];
  }
  return view;
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
  const DType compute = computeType(out.dtype);
  std::array<double, isa::kMaxImmediates> immediates = convImmediates(args, x.rank() - 2);
  const View sum = r.resultIn(out, compute);
  const View x_wide = r.cast(dense(r, x), compute), w_wide = r.cast(dense(r, w), compute);
  const std::optional<View> bias = args.optionalTensor("bias");
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
  const View grad_wide = r.cast(dense(r, grad), compute);
  size_t next = 0;
  if (mask.at(0)) {
    const View& grad_input = args.result(next++);
    const View sum = r.resultIn(grad_input, compute);
    r.emit(transposed ? Opcode::kConv : Opcode::kConvBackwardData, sum, {grad_wide, r.cast(dense(r, w), compute)},
           immediates);
    r.settle(grad_input, sum);
  }
  if (mask.at(1)) {
    const View& grad_weight = args.result(next++);
    const View sum = r.resultIn(grad_weight, compute);
    const View x_wide = r.cast(dense(r, x), compute);
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
