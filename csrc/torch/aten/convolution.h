// Convolution on pto. torch routes it for out-of-tree backends to the
// *_overrideable entry points, which the global fallback never sees. Floating
// convolutions of 1 to 3 spatial dims (any stride, padding, dilation and groups,
// plain or transposed) run natively as im2col (one tmov from an overlapping
// strided view of the padded input) and a tmatmul; their backward as tmatmuls and
// a col2im of strided tadds. A transposed convolution is a plain one's input
// gradient, and its gradients are the plain one's other products. Other dtypes
// compute on the CPU, counted as fallback.
#pragma once

#include <ATen/ATen.h>

namespace pto::torch_glue {

at::Tensor convolutionOverrideable(const at::Tensor& input, const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                   c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                   bool transposed, c10::IntArrayRef output_padding, int64_t groups);

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolutionBackwardOverrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask);

// torch.nn.functional.unfold: the windows of a batch of images as columns
// [N, C*kh*kw, L], one tmov from the strided view of the padded input.
at::Tensor im2col(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef dilation, at::IntArrayRef padding,
                  at::IntArrayRef stride);

// torch.nn.functional.fold: columns [N, C*kh*kw, L] summed back into images.
at::Tensor col2im(const at::Tensor& self, at::IntArrayRef output_size, at::IntArrayRef kernel,
                  at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride);

}  // namespace pto::torch_glue
