// Statistics on pto (var, std), layer_norm and batch_norm, forward and backward, as short
// sequences of native instructions with two-pass formulas (sums accumulate in
// double). float16/bfloat16 inputs compute in float32, as PyTorch's CPU kernels do.
#pragma once

#include <ATen/ATen.h>

namespace pto::torch_glue {

std::tuple<at::Tensor, at::Tensor, at::Tensor> layerNorm(const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                                                         const std::optional<at::Tensor>& weight,
                                                         const std::optional<at::Tensor>& bias, double eps);
std::tuple<at::Tensor, at::Tensor, at::Tensor> layerNormBackward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, std::array<bool, 3> output_mask);
// _fused_rms_norm, what F.rms_norm calls (its output and the saved 1 / rms), and its
// gradient. torch's CPU has only the composite (pow, mean, add, rsqrt, mul): on pto the
// recipe (csrc/recipes/rows.cpp) runs it as one trmsnorm beside the saved statistic.
std::tuple<at::Tensor, at::Tensor> fusedRmsNorm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                                const std::optional<at::Tensor>& weight, std::optional<double> eps);
std::tuple<at::Tensor, at::Tensor> fusedRmsNormBackward(const at::Tensor& grad_out, const at::Tensor& input,
                                                        at::IntArrayRef normalized_shape, const at::Tensor& rstd,
                                                        const std::optional<at::Tensor>& weight,
                                                        std::array<bool, 2> output_mask);
at::Tensor var(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
               bool keepdim);
at::Tensor& varOut(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                   bool keepdim, at::Tensor& out);
at::Tensor stddev(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                  bool keepdim);
at::Tensor& stddevOut(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                      bool keepdim, at::Tensor& out);
// native_group_norm: torch's composite (math_group_norm) on a contiguous input, which
// it views as [1, N * groups, -1]; the result back in the input's memory format, as the
// CPU's is (a channels_last float16 input failed the view).
std::tuple<at::Tensor, at::Tensor, at::Tensor> groupNorm(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                                         const std::optional<at::Tensor>& bias, int64_t n, int64_t c,
                                                         int64_t hw, int64_t group, double eps);

std::tuple<at::Tensor, at::Tensor, at::Tensor> batchNorm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, bool training,
    double momentum, double eps);
std::tuple<at::Tensor, at::Tensor, at::Tensor> batchNormBackward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd, bool train,
    double eps, std::array<bool, 3> output_mask);

}  // namespace pto::torch_glue
