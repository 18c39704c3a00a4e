// 2-D pooling and upsampling (nearest, bilinear) on pto. A pooling window is a strided view:
// the padded input seen as [N, C, oh, ow, kh, kw] (overlapping windows and all), so
// max pooling is one tamax and one targmax over its last two dims, average pooling
// one tsum. Backward adds each kernel offset's share into a strided view of the
// padded gradient, one tadd per offset: no scatter, deterministic. Shapes and
// PyTorch's argument checks come from the ops' Meta kernels, run first.
#pragma once

#include <ATen/ATen.h>

namespace pto::torch_glue {

// max_pool2d: values and, as PyTorch returns them, indices into each plane's H*W.
std::tuple<at::Tensor, at::Tensor> maxPool(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                                           at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode);
std::tuple<at::Tensor&, at::Tensor&> maxPoolOut(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                                                at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                                                at::Tensor& out, at::Tensor& indices);

// Each kernel offset adds the gradient of the windows whose maximum it held.
at::Tensor maxPoolBackward(const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef kernel,
                           at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                           const at::Tensor& indices);
at::Tensor& maxPoolBackwardOut(const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef kernel,
                               at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                               bool ceil_mode, const at::Tensor& indices, at::Tensor& grad_input);
at::Tensor avgPool(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                   bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override);
at::Tensor& avgPoolOut(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                       bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override,
                       at::Tensor& out);
at::Tensor avgPoolBackward(const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef kernel,
                           at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override);
at::Tensor& avgPoolBackwardOut(const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef kernel,
                               at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                               bool count_include_pad, std::optional<int64_t> divisor_override,
                               at::Tensor& grad_input);
at::Tensor adaptiveAvgPool(const at::Tensor& self, at::IntArrayRef output_size);
at::Tensor adaptiveAvgPoolBackward(const at::Tensor& grad, const at::Tensor& self);
at::Tensor upsampleNearest(const at::Tensor& self, at::IntArrayRef output_size, std::optional<double> scales_h,
                           std::optional<double> scales_w);
at::Tensor& upsampleNearestOut(const at::Tensor& self, at::IntArrayRef output_size, std::optional<double> scales_h,
                               std::optional<double> scales_w, at::Tensor& out);
at::Tensor upsampleNearestBackward(const at::Tensor& grad, at::IntArrayRef output_size, at::IntArrayRef input_size,
                                   std::optional<double> scales_h, std::optional<double> scales_w);
at::Tensor upsampleBilinear(const at::Tensor& self, at::IntArrayRef output_size, bool align_corners,
                            std::optional<double> scales_h, std::optional<double> scales_w);
at::Tensor& upsampleBilinearOut(const at::Tensor& self, at::IntArrayRef output_size, bool align_corners,
                                std::optional<double> scales_h, std::optional<double> scales_w, at::Tensor& out);
at::Tensor upsampleBilinearBackward(const at::Tensor& grad, at::IntArrayRef output_size, at::IntArrayRef input_size,
                                    bool align_corners, std::optional<double> scales_h, std::optional<double> scales_w);

// grid_sampler_2d/3d and their backward, float16/bfloat16 sampled in float32.
at::Tensor gridSampler2d(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation, int64_t padding,
                         bool align_corners);
at::Tensor gridSampler3d(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation, int64_t padding,
                         bool align_corners);
std::tuple<at::Tensor, at::Tensor> gridSampler2dBackward(const at::Tensor& grad, const at::Tensor& input,
                                                         const at::Tensor& grid, int64_t interpolation,
                                                         int64_t padding, bool align_corners,
                                                         std::array<bool, 2> output_mask);
std::tuple<at::Tensor, at::Tensor> gridSampler3dBackward(const at::Tensor& grad, const at::Tensor& input,
                                                         const at::Tensor& grid, int64_t interpolation,
                                                         int64_t padding, bool align_corners,
                                                         std::array<bool, 2> output_mask);

}  // namespace pto::torch_glue
