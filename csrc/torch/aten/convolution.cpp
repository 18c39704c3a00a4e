#include "convolution.h"

#include <ATen/Operators.h>

#include <utility>
#include <vector>

#include "composite.h"
#include "fallback.h"
#include "recipe_launch.h"

namespace pto::torch_glue {
namespace {

// The geometry of one convolution: N, C, spatial sizes, and per spatial dimension
// the kernel, stride, padding and dilation, as torch passes them.
struct Geometry {
  int64_t batch, channels, groups;
  std::vector<int64_t> kernel, stride, padding, dilation, output;

  int64_t spatial() const { return static_cast<int64_t>(kernel.size()); }
  int64_t kernelVolume() const {
    int64_t volume = 1;
    for (int64_t k : kernel) volume *= k;
    return volume;
  }
  int64_t outputVolume() const {
    int64_t volume = 1;
    for (int64_t o : output) volume *= o;
    return volume;
  }
};

// `input` is the convolution's input shape [N, C, S1..Sd].
Geometry geometryOf(c10::IntArrayRef input, c10::IntArrayRef kernel, c10::IntArrayRef stride,
                    c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups) {
  Geometry g{input[0], input[1], groups, {}, {}, {}, {}, {}};
  for (size_t d = 0; d + 2 < input.size(); ++d) {
    g.kernel.push_back(kernel[d]);
    g.stride.push_back(stride[d]);
    g.padding.push_back(padding[d]);
    g.dilation.push_back(dilation[d]);
    g.output.push_back((input[d + 2] + 2 * padding[d] - dilation[d] * (kernel[d] - 1) - 1) / stride[d] + 1);
  }
  return g;
}

// The input, zero-padded, contiguous.
at::Tensor padded(const at::Tensor& input, const Geometry& g) {
  std::vector<int64_t> pads;
  for (int64_t d = g.spatial() - 1; d >= 0; --d) pads.insert(pads.end(), {g.padding[d], g.padding[d]});
  return at::constant_pad_nd(input, pads, 0).contiguous();
}

// The windows of the padded input as a view [N, C, k1..kd, o1..od]: overlapping
// windows and all (a strided operand may repeat elements), no copy.
at::Tensor windowsOf(const at::Tensor& xp, const Geometry& g) {
  std::vector<int64_t> sizes{g.batch, g.channels}, strides{xp.stride(0), xp.stride(1)};
  for (int64_t d = 0; d < g.spatial(); ++d) {
    sizes.push_back(g.kernel[d]);
    strides.push_back(g.dilation[d] * xp.stride(d + 2));
  }
  for (int64_t d = 0; d < g.spatial(); ++d) {
    sizes.push_back(g.output[d]);
    strides.push_back(g.stride[d] * xp.stride(d + 2));
  }
  return xp.as_strided(sizes, strides, xp.storage_offset());
}

// im2col for the GEMM: one tmov lays the windows out as [C, k1..kd, N, o1..od], that
// is columns [G, C/G * K, N * L], so that each group is ONE large GEMM (the batch
// folded into its columns), which BLAS spreads over every core.
at::Tensor columns(const at::Tensor& xp, const Geometry& g) {
  std::vector<int64_t> channels_first{1};
  for (int64_t d = 0; d < g.spatial(); ++d) channels_first.push_back(d + 2);
  channels_first.push_back(0);
  for (int64_t d = 0; d < g.spatial(); ++d) channels_first.push_back(g.spatial() + 2 + d);
  const at::Tensor windows = windowsOf(xp, g).permute(channels_first);
  at::Tensor cols = at::empty(windows.sizes(), xp.options());
  cols.copy_(windows);
  return cols.view({g.groups, g.channels / g.groups * g.kernelVolume(), g.batch * g.outputVolume()});
}

// [N, Cout, o...] <-> the GEMMs' [G, Cout/G, N * L].
at::Tensor toGemmLayout(const at::Tensor& t, const Geometry& g) {
  return t.reshape({g.batch, g.groups, t.size(1) / g.groups, g.outputVolume()}).permute({1, 2, 0, 3})
      .reshape({g.groups, t.size(1) / g.groups, g.batch * g.outputVolume()});
}

at::Tensor fromGemmLayout(const at::Tensor& t, const Geometry& g, int64_t channels) {
  std::vector<int64_t> shape{g.batch, channels};
  shape.insert(shape.end(), g.output.begin(), g.output.end());
  return t.view({channels, g.batch, g.outputVolume()}).transpose(0, 1).contiguous().view(shape);
}

// col2im: `windows` [N, C, k1..kd, o1..od] added back onto the input they were taken
// from, kernel offset by kernel offset; for one offset the windows' elements are
// distinct, so each add is a plain strided tadd into the padded input. Returns the
// sum at the input's spatial sizes [N, C, S1..Sd], the padding cut away.
at::Tensor addWindows(const at::Tensor& windows, const Geometry& g, at::IntArrayRef spatial) {
  std::vector<int64_t> padded_shape{g.batch, g.channels};
  for (int64_t d = 0; d < g.spatial(); ++d) padded_shape.push_back(spatial[d] + 2 * g.padding[d]);
  at::Tensor sum = at::zeros(padded_shape, windows.options());
  std::vector<int64_t> sizes{g.batch, g.channels}, strides{sum.stride(0), sum.stride(1)};
  for (int64_t d = 0; d < g.spatial(); ++d) {
    sizes.push_back(g.output[d]);
    strides.push_back(g.stride[d] * sum.stride(d + 2));
  }
  for (int64_t k = 0; k < g.kernelVolume(); ++k) {
    int64_t rest = k, offset = 0;
    std::vector<at::indexing::TensorIndex> at_offset{at::indexing::Slice(), at::indexing::Slice()};
    std::vector<int64_t> position(static_cast<size_t>(g.spatial()));
    for (int64_t d = g.spatial() - 1; d >= 0; --d) {
      position[d] = rest % g.kernel[d];
      rest /= g.kernel[d];
      offset += position[d] * g.dilation[d] * sum.stride(d + 2);
    }
    for (int64_t d = 0; d < g.spatial(); ++d) at_offset.emplace_back(position[d]);
    sum.as_strided(sizes, strides, offset).add_(windows.index(at_offset));
  }
  for (int64_t d = 0; d < g.spatial(); ++d) sum = sum.narrow(d + 2, g.padding[d], spatial[d]);
  return sum.contiguous();
}

// Which convolutions run natively: floating, 1 to 3 spatial dims, plain or transposed.
bool native(const at::Tensor& input, const at::Tensor& weight) {
  return input.dim() >= 3 && input.dim() <= 5 && at::isFloatingType(input.scalar_type()) &&
         weight.scalar_type() == input.scalar_type() && input.numel() > 0;
}

// The three products every convolution and its gradients are made of, for the
// plain convolution of geometry g (input [N, C, S..], weight [Cout, C/G, k..],
// output [N, Cout, o..]); a transposed convolution is the plain one's input gradient.

// The output: im2col, then one GEMM per group.
at::Tensor convolve(const at::Tensor& input, const at::Tensor& weight, const Geometry& g) {
  const int64_t out_channels = weight.size(0);
  const at::Tensor cols = columns(padded(input, g), g);
  const at::Tensor w = weight.reshape({g.groups, out_channels / g.groups, -1});
  return fromGemmLayout(at::matmul(w, cols), g, out_channels);
}

// d output / d input for `grad` [N, Cout, o..]: the columns' gradient W^T @ grad, laid
// out [C, k.., N, o..], added back by col2im onto the input's spatial sizes. In
// float32 for float16/bfloat16: the caller rounds once, after anything it still adds
// (a transposed convolution's bias), as the CPU's kernels do.
at::Tensor wideInputGradient(const at::Tensor& grad_output, const at::Tensor& weight, const Geometry& g,
                             c10::IntArrayRef spatial) {
  const int64_t out_channels = weight.size(0);
  const at::Tensor w = widened(weight).reshape({g.groups, out_channels / g.groups, -1}).transpose(-1, -2);
  std::vector<int64_t> window{g.channels};
  window.insert(window.end(), g.kernel.begin(), g.kernel.end());
  window.push_back(g.batch);
  window.insert(window.end(), g.output.begin(), g.output.end());
  std::vector<int64_t> batch_first{g.spatial() + 1, 0};
  for (int64_t d = 1; d < 2 * g.spatial() + 2; ++d) {
    if (d != g.spatial() + 1) batch_first.push_back(d);
  }
  const at::Tensor grad_cols = at::matmul(w, toGemmLayout(widened(grad_output), g)).view(window).permute(batch_first);
  return addWindows(grad_cols, g, spatial);
}

// d output / d weight: grad @ columns^T, the batch summed inside the GEMM.
at::Tensor weightGradient(const at::Tensor& grad_output, const at::Tensor& input, const Geometry& g,
                          c10::IntArrayRef weight_sizes) {
  const at::Tensor cols = columns(padded(input, g), g);
  return at::matmul(toGemmLayout(grad_output, g), cols.transpose(-1, -2)).view(weight_sizes);
}

// The geometry of the plain convolution whose input gradient a transposed one is:
// its input has the transposed convolution's output shape.
Geometry transposedGeometry(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
                            c10::IntArrayRef padding, c10::IntArrayRef dilation, c10::IntArrayRef output_padding,
                            int64_t groups, std::vector<int64_t>* output_shape) {
  *output_shape = {input.size(0), weight.size(1) * groups};
  for (int64_t d = 0; d + 2 < input.dim(); ++d) {
    output_shape->push_back((input.size(d + 2) - 1) * stride[d] - 2 * padding[d] +
                            dilation[d] * (weight.size(d + 2) - 1) + output_padding[d] + 1);
  }
  Geometry g = geometryOf(*output_shape, weight.sizes().slice(2), stride, padding, dilation, groups);
  // output_padding may leave room for one more window than the input fills: those
  // positions read nothing.
  for (int64_t d = 0; d < g.spatial(); ++d) g.output[d] = input.size(d + 2);
  return g;
}

// Sums a bias [C] onto channel dimension 1.
at::Tensor& addBias(at::Tensor& out, const std::optional<at::Tensor>& bias) {
  if (bias && bias->defined()) {
    std::vector<int64_t> spread(static_cast<size_t>(out.dim()), 1);
    spread[1] = bias->numel();
    out.add_(bias->view(spread));
  }
  return out;
}

at::Tensor backTo(const at::Tensor& result, const c10::Device& device) {
  return result.defined() ? result.to(device) : result;
}

// The CPU's (oneDNN's) and CUDA's rule for a convolution's results: channels_last
// when the input or the weight is.
c10::MemoryFormat convolutionFormat(const at::Tensor& input, const at::Tensor& weight) {
  const c10::MemoryFormat last = input.dim() == 5 ? c10::MemoryFormat::ChannelsLast3d : c10::MemoryFormat::ChannelsLast;
  const bool channels_last = input.dim() >= 4 &&
      (input.suggest_memory_format() == last || weight.suggest_memory_format() == last);
  return channels_last ? last : c10::MemoryFormat::Contiguous;
}

// The im2col and GEMM convolution, for what the Conv instructions do not take (float64).
at::Tensor im2colConvolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                             c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                             bool transposed, c10::IntArrayRef output_padding, int64_t groups) {
  if (transposed) {  // the bias added in float32 too: one rounding, as oneDNN's kernel does
    std::vector<int64_t> shape;
    const Geometry g = transposedGeometry(input, weight, stride, padding, dilation, output_padding, groups, &shape);
    at::Tensor sum = wideInputGradient(input, weight, g, c10::IntArrayRef(shape).slice(2));
    return addBias(sum, widened(bias.value_or(at::Tensor()))).to(input.scalar_type())
        .contiguous(convolutionFormat(input, weight));
  }
  at::Tensor out = convolve(input, weight, geometryOf(input.sizes(), weight.sizes().slice(2), stride, padding, dilation, groups));
  return addBias(out, bias).contiguous(convolutionFormat(input, weight));
}

// The input and weight gradients of im2colConvolution.
std::pair<at::Tensor, at::Tensor> im2colConvolutionBackward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  at::Tensor grad_input, grad_weight;
  if (transposed) {  // the plain convolution's roles swapped: its input is grad_output's shape
    std::vector<int64_t> shape;
    const Geometry g = transposedGeometry(input, weight, stride, padding, dilation, output_padding, groups, &shape);
    if (output_mask[0]) grad_input = convolve(grad_output, weight, g);
    if (output_mask[1]) grad_weight = weightGradient(input, grad_output, g, weight.sizes());
  } else {
    const Geometry g = geometryOf(input.sizes(), weight.sizes().slice(2), stride, padding, dilation, groups);
    if (output_mask[0]) {
      grad_input = wideInputGradient(grad_output, weight, g, input.sizes().slice(2)).to(grad_output.scalar_type());
    }
    if (output_mask[1]) grad_weight = weightGradient(grad_output, input, g, weight.sizes());
  }
  const c10::MemoryFormat format = convolutionFormat(input, weight);
  if (grad_input.defined()) grad_input = grad_input.contiguous(format);
  if (grad_weight.defined()) grad_weight = grad_weight.contiguous(weight.suggest_memory_format());
  return {grad_input, grad_weight};
}

}  // namespace

at::Tensor convolutionOverrideable(const at::Tensor& input, const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                   c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                   bool transposed, c10::IntArrayRef output_padding, int64_t groups) {
  if (!native(input, weight)) {
    enterCpuFallback("aten::convolution_overrideable");
    std::optional<at::Tensor> bias_cpu;
    if (bias && bias->defined()) bias_cpu = bias->cpu();
    return at::convolution(input.cpu(), weight.cpu(), bias_cpu, stride, padding, dilation, transposed,
                           output_padding, groups).to(input.device());
  }
  std::vector<int64_t> shape;
  if (transposed) {
    transposedGeometry(input, weight, stride, padding, dilation, output_padding, groups, &shape);
  } else {
    const Geometry g = geometryOf(input.sizes(), weight.sizes().slice(2), stride, padding, dilation, groups);
    shape = {input.size(0), weight.size(0)};
    shape.insert(shape.end(), g.output.begin(), g.output.end());
  }
  at::Tensor out = at::empty(shape, input.options().memory_format(convolutionFormat(input, weight)));
  if (out.numel() == 0) return out;
  RecipeCall call(atenName<ATEN_OP(convolution_overrideable)>());
  call.tensor("input", input).tensor("weight", weight).tensor("bias", bias);
  call.value("stride", stride.vec()).value("padding", padding.vec()).value("dilation", dilation.vec());
  call.value("transposed", transposed).value("output_padding", output_padding.vec()).value("groups", groups);
  if (call.result(out).launch()) return out;
  return im2colConvolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolutionBackwardOverrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  if (!native(input, weight)) {
    enterCpuFallback("aten::convolution_backward_overrideable");
    const int64_t bias_size = transposed ? weight.size(1) * groups : weight.size(0);
    const std::vector<c10::SymInt> bias_sizes{c10::SymInt(bias_size)};
    auto [grad_input, grad_weight, grad_bias] = at::convolution_backward_symint(
        grad_output.cpu(), input.cpu(), weight.cpu(), c10::SymIntArrayRef(bias_sizes),
        c10::fromIntArrayRefSlow(stride), c10::fromIntArrayRefSlow(padding),
        c10::fromIntArrayRefSlow(dilation), transposed, c10::fromIntArrayRefSlow(output_padding),
        c10::SymInt(groups), output_mask);
    const c10::Device device = input.device();
    return {backTo(grad_input, device), backTo(grad_weight, device), backTo(grad_bias, device)};
  }
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[2]) {
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < grad_output.dim(); ++d) dims.push_back(d);
    grad_bias = grad_output.sum(dims);
  }
  if (output_mask[0]) grad_input = at::empty(input.sizes(), input.options().memory_format(convolutionFormat(input, weight)));
  if (output_mask[1]) grad_weight = at::empty(weight.sizes(), weight.options().memory_format(weight.suggest_memory_format()));
  if (!output_mask[0] && !output_mask[1]) return {grad_input, grad_weight, grad_bias};
  if (grad_output.numel() == 0) {  // nothing summed: zeros, as the CPU's
    if (grad_input.defined()) grad_input.zero_();
    if (grad_weight.defined()) grad_weight.zero_();
    return {grad_input, grad_weight, grad_bias};
  }
  RecipeCall call(atenName<ATEN_OP(convolution_backward_overrideable)>());
  call.tensor("grad_output", grad_output).tensor("input", input).tensor("weight", weight);
  call.value("stride", stride.vec()).value("padding", padding.vec()).value("dilation", dilation.vec());
  call.value("transposed", transposed).value("output_padding", output_padding.vec()).value("groups", groups);
  call.value("output_mask", std::vector<int64_t>{output_mask[0], output_mask[1], output_mask[2]});
  if (grad_input.defined()) call.result(grad_input);
  if (grad_weight.defined()) call.result(grad_weight);
  if (call.launch()) return {grad_input, grad_weight, grad_bias};
  auto [im2col_input, im2col_weight] = im2colConvolutionBackward(grad_output, input, weight, stride, padding, dilation,
                                                                 transposed, output_padding, groups, output_mask);
  return {im2col_input, im2col_weight, grad_bias};
}

// torch.nn.functional.unfold: the windows of a batch of images as columns
// [N, C*kh*kw, L], one tmov from the strided view of the padded input.
at::Tensor im2col(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef dilation, at::IntArrayRef padding,
                  at::IntArrayRef stride) {
  const at::Tensor meta = at::im2col(metaTwin(self), kernel, dilation, padding, stride);  // PyTorch's checks
  const bool batched = self.dim() == 4;
  const at::Tensor input = batched ? self : self.unsqueeze(0);
  const Geometry g = geometryOf(input.sizes(), kernel, stride, padding, dilation, 1);
  const at::Tensor windows = windowsOf(padded(input, g), g);
  at::Tensor cols = at::empty(windows.sizes(), self.options());
  cols.copy_(windows);
  return cols.view(meta.sizes());
}

// torch.nn.functional.fold: columns [N, C*kh*kw, L] summed back into images.
at::Tensor col2im(const at::Tensor& self, at::IntArrayRef output_size, at::IntArrayRef kernel,
                  at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  const at::Tensor meta = at::col2im(metaTwin(self), output_size, kernel, dilation, padding, stride);
  const bool batched = self.dim() == 3;
  const at::Tensor image = batched ? meta : meta.unsqueeze(0);
  const Geometry g = geometryOf(image.sizes(), kernel, stride, padding, dilation, 1);
  const at::Tensor windows = self.reshape({g.batch, g.channels, g.kernel[0], g.kernel[1], g.output[0], g.output[1]});
  const at::Tensor sum = addWindows(windows, g, output_size);
  return batched ? sum : sum.squeeze(0);
}

}  // namespace pto::torch_glue
