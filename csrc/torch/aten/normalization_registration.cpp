// Statistics on pto (var, std) and layer_norm, forward and backward, as short
// sequences of native instructions with two-pass formulas (sums accumulate in
// double). float16/bfloat16 inputs compute in float32, as PyTorch's CPU kernels do.
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/Operators.h>
#include <torch/library.h>

#include "fallback.h"
#include "reduction.h"

namespace pto::backend {
namespace {

struct Layout {
  std::vector<int64_t> normalized;  // the trailing dims statistics run over
  std::vector<int64_t> batch;       // the leading dims, one statistic each
};

Layout layoutOf(const at::Tensor& input, c10::SymIntArrayRef normalized_shape) {
  const int64_t count = static_cast<int64_t>(normalized_shape.size());
  const int64_t axis = input.dim() - count;
  TORCH_CHECK(axis >= 0 && input.sizes().slice(axis).equals(C10_AS_INTARRAYREF_SLOW(normalized_shape)),
              "Given normalized_shape=", normalized_shape, ", expected input with shape [*",
              normalized_shape, "], but got input of size", input.sizes());
  Layout layout;
  for (int64_t d = 0; d < input.dim(); ++d) (d < axis ? layout.batch : layout.normalized).push_back(d);
  return layout;
}

at::Tensor wide(const at::Tensor& t) {
  return t.defined() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16) ? t.to(at::kFloat) : t;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layerNorm(const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                                                         const std::optional<at::Tensor>& weight,
                                                         const std::optional<at::Tensor>& bias, double eps) {
  const Layout layout = layoutOf(input, normalized_shape);
  const at::Tensor x = wide(input);
  const at::Tensor mean = x.mean(layout.normalized, /*keepdim=*/true);
  const at::Tensor centered = x - mean;
  const at::Tensor variance = (centered * centered).mean(layout.normalized, /*keepdim=*/true);
  const at::Tensor rstd = (variance + eps).rsqrt();
  at::Tensor out = centered * rstd;
  if (weight && weight->defined()) out = out * wide(*weight);
  if (bias && bias->defined()) out = out + wide(*bias);
  return {out.to(input.scalar_type()), mean.to(input.scalar_type()), rstd.to(input.scalar_type())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layerNormBackward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, std::array<bool, 3> output_mask) {
  const Layout layout = layoutOf(input, normalized_shape);
  const at::Tensor x = wide(input), dy = wide(grad_out), mu = wide(mean), inv = wide(rstd);
  const at::Tensor normalized = (x - mu) * inv;
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    const at::Tensor g = weight && weight->defined() ? dy * wide(*weight) : dy;
    const at::Tensor g_mean = g.mean(layout.normalized, /*keepdim=*/true);
    const at::Tensor gx_mean = (g * normalized).mean(layout.normalized, /*keepdim=*/true);
    grad_input = ((g - g_mean - normalized * gx_mean) * inv).to(input.scalar_type());
  }
  // Summed over the batch dims; with none, sum() of an empty dim list would sum everything.
  auto overBatch = [&](const at::Tensor& t) { return layout.batch.empty() ? t : t.sum(layout.batch); };
  if (output_mask[1] && weight && weight->defined()) {
    grad_weight = overBatch(dy * normalized).to(weight->scalar_type());
  }
  if (output_mask[2] && bias && bias->defined()) {
    grad_bias = overBatch(dy).to(bias->scalar_type());
  }
  return {grad_input, grad_weight, grad_bias};
}

// sum((x - mean)^2) / (n - correction) over `dim`; undefined for non-float input.
at::Tensor variance(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                    bool keepdim) {
  if (!at::isFloatingType(self.scalar_type())) return {};
  const at::Tensor x = wide(self);
  const int64_t count = reducedCount(self, dim);
  const double divisor = static_cast<double>(count) - (correction ? correction->toDouble() : 1.0);
  const at::OptionalIntArrayRef dims = dim && !dim->empty() ? dim : std::nullopt;
  const at::Tensor centered = count > 0 ? x - x.mean(dims, /*keepdim=*/true) : x;
  const at::Tensor squares = (centered * centered).sum(dims, keepdim);
  return (divisor > 0 ? squares / divisor : squares / 0.0).to(self.scalar_type());
}

at::Tensor var(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
               bool keepdim) {
  at::Tensor r = variance(self, dim, correction, keepdim);
  return r.defined() ? r
                     : at::native::call_fallback_fn<&cpuFallback, ATEN_OP2(var, correction)>::call(self, dim, correction, keepdim);
}

at::Tensor& varOut(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                   bool keepdim, at::Tensor& out) {
  at::Tensor r = variance(self, dim, correction, keepdim);
  if (!r.defined()) {
    return at::native::call_fallback_fn<&cpuFallback, ATEN_OP2(var, correction_out)>::call(self, dim, correction, keepdim, out);
  }
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

at::Tensor stddev(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                  bool keepdim) {
  at::Tensor r = variance(self, dim, correction, keepdim);
  return r.defined() ? r.sqrt()
                     : at::native::call_fallback_fn<&cpuFallback, ATEN_OP2(std, correction)>::call(self, dim, correction, keepdim);
}

at::Tensor& stddevOut(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                      bool keepdim, at::Tensor& out) {
  at::Tensor r = variance(self, dim, correction, keepdim);
  if (!r.defined()) {
    return at::native::call_fallback_fn<&cpuFallback, ATEN_OP2(std, correction_out)>::call(self, dim, correction, keepdim, out);
  }
  at::native::resize_output(out, r.sizes());
  return out.copy_(r.sqrt());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("var.correction", TORCH_FN(var));
  m.impl("var.correction_out", TORCH_FN(varOut));
  m.impl("std.correction", TORCH_FN(stddev));
  m.impl("std.correction_out", TORCH_FN(stddevOut));
  m.impl("native_layer_norm", TORCH_FN(layerNorm));
  m.impl("native_layer_norm_backward", TORCH_FN(layerNormBackward));
}

}  // namespace pto::backend
