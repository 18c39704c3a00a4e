#include "pooling.h"

#include <ATen/ATen.h>
#include <ATen/Operators.h>

#include <cmath>
#include <limits>
#include <vector>

#include "composite.h"
#include "fallback.h"
#include "reduction.h"

namespace pto::torch_glue {
namespace {

// One spatial dimension of a pooling: kernel, stride, padding, dilation, and the
// padded extent the windows need (ceil_mode's last window may run past the input).
struct Axis {
  int64_t kernel, stride, pad, dilation, input, output;
  int64_t padAfter() const { return std::max<int64_t>(pad, (output - 1) * stride + dilation * (kernel - 1) + 1 - input - pad); }
};

struct Window {
  Axis h, w;
};

Window windowOf(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                at::IntArrayRef dilation, int64_t out_h, int64_t out_w) {
  auto pick = [](at::IntArrayRef values, size_t i, int64_t otherwise) {
    return values.empty() ? otherwise : values[values.size() == 1 ? 0 : i];
  };
  const int64_t kh = pick(kernel, 0, 1), kw = pick(kernel, 1, 1);
  return {{kh, pick(stride, 0, kh), pick(padding, 0, 0), pick(dilation, 0, 1), self.size(-2), out_h},
          {kw, pick(stride, 1, kw), pick(padding, 1, 0), pick(dilation, 1, 1), self.size(-1), out_w}};
}

bool unpadded(const Window& g) {
  return g.h.pad == 0 && g.w.pad == 0 && g.h.padAfter() == 0 && g.w.padAfter() == 0;
}

// The input padded with `value` (-inf for max, 0 for sums), as [B, Hp, Wp] with
// B = N*C: the input itself (a view) when no window reaches past it.
at::Tensor paddedInput(const at::Tensor& self, const Window& g, double value) {
  const at::Tensor flat = self.reshape({-1, self.size(-2), self.size(-1)});
  if (unpadded(g)) return flat;
  return at::constant_pad_nd(flat, {g.w.pad, g.w.padAfter(), g.h.pad, g.h.padAfter()}, value).contiguous();
}

// The windows of a [B, Hp, Wp] tensor: [B, oh, ow, kh, kw], a view.
at::Tensor windows(const at::Tensor& padded, const Window& g) {
  const int64_t sb = padded.stride(0), sh = padded.stride(1), sw = padded.stride(2);
  return padded.as_strided({padded.size(0), g.h.output, g.w.output, g.h.kernel, g.w.kernel},
                           {sb, g.h.stride * sh, g.w.stride * sw, g.h.dilation * sh, g.w.dilation * sw},
                           padded.storage_offset());
}

// The view of a [B, Hp, Wp] tensor that kernel offset (i, j) of every window reads: [B, oh, ow].
at::Tensor offsetView(const at::Tensor& padded, const Window& g, int64_t i, int64_t j) {
  const int64_t sh = padded.stride(1), sw = padded.stride(2);
  return padded.as_strided({padded.size(0), g.h.output, g.w.output}, {padded.stride(0), g.h.stride * sh, g.w.stride * sw},
                           padded.storage_offset() + i * g.h.dilation * sh + j * g.w.dilation * sw);
}

// The gradient of the input from a padded gradient: the padding cut away.
at::Tensor cropped(const at::Tensor& grad_padded, const Window& g, const at::Tensor& self) {
  return grad_padded.narrow(1, g.h.pad, g.h.input).narrow(2, g.w.pad, g.w.input).reshape(self.sizes()).contiguous();
}

bool poolable(const at::Tensor& self) {
  return at::isFloatingType(self.scalar_type()) && (self.dim() == 3 || self.dim() == 4) && self.numel() > 0;
}

std::vector<int64_t> outputShape(const at::Tensor& self, int64_t out_h, int64_t out_w) {
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - 2);
  shape.insert(shape.end(), {out_h, out_w});
  return shape;
}

// The divisor of each window of avg_pool2d, as PyTorch counts it: the override, or
// the window clipped to the padded input (count_include_pad) or to the input itself.
at::Tensor divisors(const at::Tensor& self, const Window& g, bool count_include_pad) {
  at::Tensor ones = at::ones({1, g.h.input, g.w.input}, self.options());
  if (count_include_pad) ones = at::constant_pad_nd(ones, {g.w.pad, g.w.pad, g.h.pad, g.h.pad}, 1.0);
  Window reach = g;
  if (count_include_pad) {
    reach.h.input += 2 * g.h.pad;
    reach.w.input += 2 * g.w.pad;
    reach.h.pad = reach.w.pad = 0;
  }
  return at::sum(windows(paddedInput(ones, reach, 0.0), reach), {3, 4});  // [1, oh, ow]
}

at::Tensor avgPoolDivisor(const at::Tensor& self, const Window& g, bool count_include_pad,
                          std::optional<int64_t> divisor_override) {
  if (divisor_override) return at::full({}, static_cast<double>(*divisor_override), self.options());
  if (unpadded(g)) return at::full({}, static_cast<double>(g.h.kernel * g.w.kernel), self.options());
  return divisors(self, g, count_include_pad);
}

// Adaptive average pooling whose output divides the input: an average pool with
// kernel = stride = input / output (global pooling to 1x1 included).
bool evenlyAdaptive(const at::Tensor& self, at::IntArrayRef output_size) {
  return self.dim() >= 3 && output_size.size() == 2 && output_size[0] > 0 && output_size[1] > 0 &&
         self.size(-2) % output_size[0] == 0 && self.size(-1) % output_size[1] == 0;
}

// Nearest upsampling reads input row floor(i * scale) for output row i (scale =
// in/out, or 1/scale_factor when given), computed in float as PyTorch does; the
// gather is two index_selects, the backward two index_adds.
at::Tensor nearestIndex(int64_t input, int64_t output, std::optional<double> scale, const at::TensorOptions& options) {
  if (output == input || output == 2 * input) {  // PyTorch's exact cases, whatever the scale
    return at::div(at::arange(output, options.dtype(at::kLong)), output / input, "floor");
  }
  const float ratio = scale.has_value() && *scale > 0 ? static_cast<float>(1.0 / *scale)
                                                      : static_cast<float>(input) / static_cast<float>(output);
  std::vector<int64_t> index(static_cast<size_t>(output));
  for (int64_t i = 0; i < output; ++i) {
    index[i] = std::min(static_cast<int64_t>(std::floor(static_cast<float>(i) * ratio)), input - 1);
  }
  return at::tensor(index, at::TensorOptions().dtype(at::kLong)).to(options.device());
}

// Bilinear upsampling: output row i reads rows h0 = floor(src) and h1 = h0 + 1 (the
// last row at the edge) with weights 1 - (src - h0) and src - h0, src computed as
// PyTorch's area_pixel_compute_source_index does; columns likewise. The blend is
// gathers (index_select) and multiply-adds; the backward, index_adds.
struct LinearAxis {
  at::Tensor low, high, low_weight, high_weight;  // [out] indices (int64) and weights
};

// Indices and weights in T, PyTorch's opmath type: double for float64, float otherwise.
template <typename T>
LinearAxis linearAxisIn(int64_t input, int64_t output, bool align_corners, std::optional<double> scale,
                        const at::TensorOptions& options) {
  const T ratio = align_corners ? (output > 1 ? static_cast<T>(input - 1) / static_cast<T>(output - 1) : T(0))
                  : scale.has_value() && *scale > 0 ? static_cast<T>(1.0 / *scale)
                                                    : static_cast<T>(input) / static_cast<T>(output);
  std::vector<int64_t> low(static_cast<size_t>(output)), high(low.size());
  std::vector<T> low_weight(low.size()), high_weight(low.size());
  for (int64_t i = 0; i < output; ++i) {
    const T source = align_corners ? ratio * static_cast<T>(i)
                                   : std::max(ratio * (static_cast<T>(i) + T(0.5)) - T(0.5), T(0));
    low[i] = std::min(static_cast<int64_t>(source), input - 1);
    high[i] = std::min(low[i] + 1, input - 1);
    high_weight[i] = std::min(std::max(source - static_cast<T>(low[i]), T(0)), T(1));
    low_weight[i] = T(1) - high_weight[i];
  }
  const auto device = options.device();
  const auto weights = options.dtype(at::isReducedFloatingType(options.dtype().toScalarType())
                                         ? at::kFloat : options.dtype().toScalarType());
  return {at::tensor(low, at::kLong).to(device), at::tensor(high, at::kLong).to(device),
          at::tensor(low_weight).to(weights), at::tensor(high_weight).to(weights)};
}

LinearAxis linearAxis(int64_t input, int64_t output, bool align_corners, std::optional<double> scale,
                      const at::TensorOptions& options) {
  return options.dtype() == at::kDouble ? linearAxisIn<double>(input, output, align_corners, scale, options)
                                        : linearAxisIn<float>(input, output, align_corners, scale, options);
}

bool bilinearNative(const at::Tensor& t) { return at::isFloatingType(t.scalar_type()) && t.dim() == 4; }

}  // namespace

// max_pool2d: values and, as PyTorch returns them, indices into each plane's H*W.
std::tuple<at::Tensor, at::Tensor> maxPool(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                                           at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  const auto [meta, meta_indices] =
      at::max_pool2d_with_indices(metaTwin(self), kernel, stride, padding, dilation, ceil_mode);
  if (!poolable(self)) {
    return Fallback<ATEN_OP(max_pool2d_with_indices)>::call(self, kernel, stride, padding, dilation, ceil_mode);
  }
  const Window g = windowOf(self, kernel, stride, padding, dilation, meta.size(-2), meta.size(-1));
  const at::Tensor view = windows(paddedInput(self, g, -std::numeric_limits<double>::infinity()), g);
  const at::Tensor values = reduce(atenName<ATEN_OP(amax)>(), view, at::IntArrayRef{3, 4}, false, self.scalar_type(),
                                   self.scalar_type(), {});
  // The first maximum (or NaN) in window order, as a position in the flattened window.
  const at::Tensor k = reduce(atenName<ATEN_OP(argmax)>(), view, at::IntArrayRef{3, 4}, false, at::kLong, at::kLong, {});
  // Input position = the window's origin + the offset of its k-th element: a
  // lookup of k in a table of kh*kw offsets, added to an [oh, ow] table of origins.
  const auto longs = self.options().dtype(at::kLong);
  const at::Tensor origin = at::arange(g.h.output, longs).mul_(g.h.stride * g.w.input).sub_(g.h.pad * g.w.input)
                                .view({-1, 1}) + at::arange(g.w.output, longs).mul_(g.w.stride).sub_(g.w.pad);
  const at::Tensor offsets = (at::arange(g.h.kernel, longs).mul_(g.h.dilation * g.w.input).view({-1, 1}) +
                              at::arange(g.w.kernel, longs).mul_(g.w.dilation)).reshape({-1});
  const at::Tensor indices = at::index_select(offsets, 0, k.reshape({-1})).view(k.sizes()).add_(origin);
  const auto shape = outputShape(self, g.h.output, g.w.output);
  return {inLayoutOf(meta, values.view(shape)), inLayoutOf(meta_indices, indices.view(shape))};
}

std::tuple<at::Tensor&, at::Tensor&> maxPoolOut(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                                                at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                                                at::Tensor& out, at::Tensor& indices) {
  auto [values, positions] = maxPool(self, kernel, stride, padding, dilation, ceil_mode);
  assign(out, values);
  assign(indices, positions);
  return {out, indices};
}

// Each kernel offset adds the gradient of the windows whose maximum it held.
at::Tensor maxPoolBackward(const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef kernel,
                           at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                           const at::Tensor& indices) {
  if (!poolable(self) || grad.scalar_type() != self.scalar_type()) {
    return Fallback<ATEN_OP(max_pool2d_with_indices_backward)>::call(grad, self, kernel, stride, padding, dilation,
                                                                     ceil_mode, indices);
  }
  const Window g = windowOf(self, kernel, stride, padding, dilation, grad.size(-2), grad.size(-1));
  const at::Tensor flat_grad = grad.reshape({-1, g.h.output, g.w.output});
  const at::Tensor flat_indices = indices.reshape({-1, g.h.output, g.w.output});
  const at::Tensor oh = at::arange(g.h.output, indices.options()).view({1, -1, 1});
  const at::Tensor ow = at::arange(g.w.output, indices.options()).view({1, 1, -1});
  const at::Tensor zero = at::zeros({}, grad.options());
  at::Tensor grad_padded = at::zeros({flat_grad.size(0), g.h.input + g.h.pad + g.h.padAfter(),
                                      g.w.input + g.w.pad + g.w.padAfter()}, grad.options());
  for (int64_t i = 0; i < g.h.kernel; ++i) {
    for (int64_t j = 0; j < g.w.kernel; ++j) {
      const at::Tensor held = at::eq(flat_indices, (oh * g.h.stride + (i * g.h.dilation - g.h.pad)) * g.w.input +
                                                       ow * g.w.stride + (j * g.w.dilation - g.w.pad));
      offsetView(grad_padded, g, i, j).add_(at::where(held, flat_grad, zero));
    }
  }
  return cropped(grad_padded, g, self).contiguous(self.suggest_memory_format());  // the CPU's layout
}

at::Tensor& maxPoolBackwardOut(const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef kernel,
                               at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                               bool ceil_mode, const at::Tensor& indices, at::Tensor& grad_input) {
  return assign(grad_input, maxPoolBackward(grad, self, kernel, stride, padding, dilation, ceil_mode, indices));
}

at::Tensor avgPool(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                   bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  const at::Tensor meta = at::avg_pool2d(metaTwin(self), kernel, stride, padding, ceil_mode, count_include_pad,
                                         divisor_override);
  if (!poolable(self)) {
    return Fallback<ATEN_OP(avg_pool2d)>::call(self, kernel, stride, padding, ceil_mode, count_include_pad,
                                               divisor_override);
  }
  const Window g = windowOf(self, kernel, stride, padding, {}, meta.size(-2), meta.size(-1));
  const at::Tensor sums = at::sum(windows(paddedInput(widened(self), g, 0.0), g), {3, 4});
  const at::Tensor mean = at::div(sums, avgPoolDivisor(widened(self), g, count_include_pad, divisor_override));
  return inLayoutOf(meta, mean.to(self.scalar_type()).view(outputShape(self, g.h.output, g.w.output)));
}

at::Tensor& avgPoolOut(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                       bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override,
                       at::Tensor& out) {
  return assign(out, avgPool(self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override));
}

at::Tensor avgPoolBackward(const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef kernel,
                           at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override) {
  if (!poolable(self) || grad.scalar_type() != self.scalar_type()) {
    return Fallback<ATEN_OP(avg_pool2d_backward)>::call(grad, self, kernel, stride, padding, ceil_mode,
                                                        count_include_pad, divisor_override);
  }
  const at::Tensor meta = at::avg_pool2d_backward(metaTwin(grad), metaTwin(self), kernel, stride, padding, ceil_mode,
                                                  count_include_pad, divisor_override);
  const Window g = windowOf(self, kernel, stride, padding, {}, grad.size(-2), grad.size(-1));
  const at::Tensor share = at::div(widened(grad).reshape({-1, g.h.output, g.w.output}),
                                   avgPoolDivisor(widened(self), g, count_include_pad, divisor_override));
  at::Tensor grad_padded = at::zeros({share.size(0), g.h.input + g.h.pad + g.h.padAfter(),
                                      g.w.input + g.w.pad + g.w.padAfter()}, share.options());
  for (int64_t i = 0; i < g.h.kernel; ++i) {
    for (int64_t j = 0; j < g.w.kernel; ++j) offsetView(grad_padded, g, i, j).add_(share);
  }
  return inLayoutOf(meta, cropped(grad_padded, g, self).to(self.scalar_type()));
}

at::Tensor& avgPoolBackwardOut(const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef kernel,
                               at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                               bool count_include_pad, std::optional<int64_t> divisor_override,
                               at::Tensor& grad_input) {
  return assign(grad_input, avgPoolBackward(grad, self, kernel, stride, padding, ceil_mode, count_include_pad,
                                            divisor_override));
}

at::Tensor adaptiveAvgPool(const at::Tensor& self, at::IntArrayRef output_size) {
  const at::IntArrayRef size = output_size;
  if (!evenlyAdaptive(self, size) || !poolable(self)) {
    return Fallback<ATEN_OP(_adaptive_avg_pool2d)>::call(self, output_size);
  }
  const std::vector<int64_t> kernel{self.size(-2) / size[0], self.size(-1) / size[1]};
  return avgPool(self, kernel, kernel, {0, 0}, false, true, std::nullopt);
}

at::Tensor adaptiveAvgPoolBackward(const at::Tensor& grad, const at::Tensor& self) {
  const std::vector<int64_t> size{grad.size(-2), grad.size(-1)};
  if (!evenlyAdaptive(self, size) || !poolable(self)) {
    return Fallback<ATEN_OP(_adaptive_avg_pool2d_backward)>::call(grad, self);
  }
  const std::vector<int64_t> kernel{self.size(-2) / size[0], self.size(-1) / size[1]};
  return avgPoolBackward(grad, self, kernel, kernel, {0, 0}, false, true, std::nullopt);
}

at::Tensor upsampleNearest(const at::Tensor& self, at::IntArrayRef output_size, std::optional<double> scales_h,
                           std::optional<double> scales_w) {
  const at::Tensor meta = at::upsample_nearest2d(metaTwin(self), output_size, scales_h, scales_w);
  // The CPU's (and CUDA's) dtypes: uint8 and the floating ones.
  TORCH_CHECK(self.scalar_type() == at::kByte || at::isFloatingType(self.scalar_type()),
              "\"compute_indices_weights_nearest\" not implemented for '", c10::toString(self.scalar_type()), "'");
  const int64_t oh = meta.size(-2), ow = meta.size(-1);
  const at::Tensor rows = nearestIndex(self.size(-2), oh, scales_h, self.options());
  const at::Tensor cols = nearestIndex(self.size(-1), ow, scales_w, self.options());
  return at::index_select(at::index_select(self, -2, rows), -1, cols).contiguous(self.suggest_memory_format());
}

at::Tensor& upsampleNearestOut(const at::Tensor& self, at::IntArrayRef output_size, std::optional<double> scales_h,
                               std::optional<double> scales_w, at::Tensor& out) {
  return assign(out, upsampleNearest(self, output_size, scales_h, scales_w));
}

at::Tensor upsampleNearestBackward(const at::Tensor& grad, at::IntArrayRef output_size, at::IntArrayRef input_size,
                                   std::optional<double> scales_h, std::optional<double> scales_w) {
  const at::IntArrayRef in = input_size;
  const at::Tensor rows = nearestIndex(in[2], grad.size(-2), scales_h, grad.options());
  const at::Tensor cols = nearestIndex(in[3], grad.size(-1), scales_w, grad.options());
  const at::Tensor wide = widened(grad);
  at::Tensor by_rows = at::zeros({in[0], in[1], in[2], grad.size(-1)}, wide.options()).index_add_(2, rows, wide);
  return at::zeros({in[0], in[1], in[2], in[3]}, wide.options()).index_add_(3, cols, by_rows).to(grad.scalar_type())
      .contiguous(grad.suggest_memory_format());  // the CPU's layout
}

at::Tensor upsampleBilinear(const at::Tensor& self, at::IntArrayRef output_size, bool align_corners,
                            std::optional<double> scales_h, std::optional<double> scales_w) {
  const at::Tensor meta = at::upsample_bilinear2d(metaTwin(self), output_size, align_corners, scales_h, scales_w);
  if (!bilinearNative(self) || self.numel() == 0) {
    return Fallback<ATEN_OP(upsample_bilinear2d)>::call(self, output_size, align_corners, scales_h, scales_w);
  }
  const at::Tensor x = widened(self);
  const LinearAxis h = linearAxis(self.size(2), meta.size(2), align_corners, scales_h, x.options());
  const LinearAxis w = linearAxis(self.size(3), meta.size(3), align_corners, scales_w, x.options());
  auto columns = [&](const at::Tensor& rows) {
    return at::index_select(rows, 3, w.low).mul_(w.low_weight)
        .add_(at::index_select(rows, 3, w.high).mul_(w.high_weight));
  };
  const at::Tensor top = columns(at::index_select(x, 2, h.low)), bottom = columns(at::index_select(x, 2, h.high));
  return inLayoutOf(meta, top.mul_(h.low_weight.view({-1, 1})).add_(bottom.mul_(h.high_weight.view({-1, 1})))
                              .to(self.scalar_type()));
}

at::Tensor& upsampleBilinearOut(const at::Tensor& self, at::IntArrayRef output_size, bool align_corners,
                                std::optional<double> scales_h, std::optional<double> scales_w, at::Tensor& out) {
  return assign(out, upsampleBilinear(self, output_size, align_corners, scales_h, scales_w));
}

at::Tensor upsampleBilinearBackward(const at::Tensor& grad, at::IntArrayRef output_size, at::IntArrayRef input_size,
                                    bool align_corners, std::optional<double> scales_h, std::optional<double> scales_w) {
  if (!bilinearNative(grad)) {
    return Fallback<ATEN_OP(upsample_bilinear2d_backward)>::call(grad, output_size, input_size, align_corners,
                                                                 scales_h, scales_w);
  }
  const at::Tensor g = widened(grad);
  const LinearAxis h = linearAxis(input_size[2], grad.size(2), align_corners, scales_h, g.options());
  const LinearAxis w = linearAxis(input_size[3], grad.size(3), align_corners, scales_w, g.options());
  at::Tensor by_rows = at::zeros({input_size[0], input_size[1], input_size[2], grad.size(3)}, g.options());
  by_rows.index_add_(2, h.low, g.mul(h.low_weight.view({-1, 1}))).index_add_(2, h.high, g.mul(h.high_weight.view({-1, 1})));
  at::Tensor out = at::zeros({input_size[0], input_size[1], input_size[2], input_size[3]}, g.options());
  out.index_add_(3, w.low, by_rows.mul(w.low_weight)).index_add_(3, w.high, by_rows.mul(w.high_weight));
  return out.to(grad.scalar_type()).contiguous(grad.suggest_memory_format());  // the CPU's layout
}

// grid_sampler_2d/3d of float16/bfloat16 inputs in float32, rounded once at the end.
// The CPU's kernels compute the sampling positions in the input's dtype, which holds
// neither a pixel position past 256 (bfloat16) exactly nor its fraction: they blend
// the wrong pixels (errors of the inputs' own size at a width of 600), read outside
// the image (NaN, garbage, a crash at 345 x 456). Other dtypes, and inputs the CPU
// refuses (input and grid of two dtypes), go to the CPU kernel as they are.
namespace {

bool sampledInFloat(const at::Tensor& input, const at::Tensor& grid) {
  return at::isReducedFloatingType(input.scalar_type()) && grid.scalar_type() == input.scalar_type();
}

// Op: grid_sampler_2d or grid_sampler_3d, which share their arguments.
template <class Op>
at::Tensor sampled(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation, int64_t padding,
                   bool align_corners) {
  if (!sampledInFloat(input, grid)) return Fallback<Op>::call(input, grid, interpolation, padding, align_corners);
  return Fallback<Op>::call(widened(input), widened(grid), interpolation, padding, align_corners)
      .to(input.scalar_type());
}

// Op: grid_sampler_2d_backward or grid_sampler_3d_backward.
template <class Op>
std::tuple<at::Tensor, at::Tensor> sampledBackward(const at::Tensor& grad, const at::Tensor& input,
                                                   const at::Tensor& grid, int64_t interpolation, int64_t padding,
                                                   bool align_corners, std::array<bool, 2> output_mask) {
  if (!sampledInFloat(input, grid)) {
    return Fallback<Op>::call(grad, input, grid, interpolation, padding, align_corners, output_mask);
  }
  auto [grad_input, grad_grid] = Fallback<Op>::call(widened(grad), widened(input), widened(grid), interpolation,
                                                    padding, align_corners, output_mask);
  return {grad_input.defined() ? grad_input.to(input.scalar_type()) : grad_input,
          grad_grid.defined() ? grad_grid.to(grid.scalar_type()) : grad_grid};
}

}  // namespace

at::Tensor gridSampler2d(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation, int64_t padding,
                         bool align_corners) {
  return sampled<ATEN_OP(grid_sampler_2d)>(input, grid, interpolation, padding, align_corners);
}

at::Tensor gridSampler3d(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation, int64_t padding,
                         bool align_corners) {
  return sampled<ATEN_OP(grid_sampler_3d)>(input, grid, interpolation, padding, align_corners);
}

std::tuple<at::Tensor, at::Tensor> gridSampler2dBackward(const at::Tensor& grad, const at::Tensor& input,
                                                         const at::Tensor& grid, int64_t interpolation,
                                                         int64_t padding, bool align_corners,
                                                         std::array<bool, 2> output_mask) {
  return sampledBackward<ATEN_OP(grid_sampler_2d_backward)>(grad, input, grid, interpolation, padding, align_corners,
                                                            output_mask);
}

std::tuple<at::Tensor, at::Tensor> gridSampler3dBackward(const at::Tensor& grad, const at::Tensor& input,
                                                         const at::Tensor& grid, int64_t interpolation,
                                                         int64_t padding, bool align_corners,
                                                         std::array<bool, 2> output_mask) {
  return sampledBackward<ATEN_OP(grid_sampler_3d_backward)>(grad, input, grid, interpolation, padding, align_corners,
                                                            output_mask);
}

}  // namespace pto::torch_glue
