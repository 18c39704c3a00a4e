#include "normalization.h"

#include <ATen/Operators.h>
#include <ATen/native/layer_norm.h>
#include <ATen/ops/_fused_rms_norm_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/native_group_norm_native.h>

#include <optional>

#include "../dtype_map.h"
#include "composite.h"
#include "fallback.h"
#include "instruction_launch.h"
#include "recipe_launch.h"
#include "reduction.h"

namespace pto::torch_glue {
namespace {

struct Layout {
  std::vector<int64_t> normalized;  // the trailing dims statistics run over
  std::vector<int64_t> batch;       // the leading dims, one statistic each
};

// After the CPU kernel's own checks of the shapes (torch's _check_layer_norm_inputs).
Layout layoutOf(const at::Tensor& input, c10::SymIntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,
                const std::optional<at::Tensor>& bias) {
  at::native::_check_layer_norm_inputs(input, C10_AS_INTARRAYREF_SLOW(normalized_shape),
                                       weight.value_or(at::Tensor()), bias.value_or(at::Tensor()));
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  Layout layout;
  for (int64_t d = 0; d < input.dim(); ++d) (d < axis ? layout.batch : layout.normalized).push_back(d);
  return layout;
}

// A parameter's gradient: `t` summed over the batch dims (with none, sum() of an empty
// dim list would sum everything).
at::Tensor summedOverBatch(const Layout& layout, const at::Tensor& t) {
  return layout.batch.empty() ? t : t.sum(layout.batch);
}

// sum((x - mean)^2) / (n - correction) over `dim`, its recipe (csrc/recipes/reductions.cpp);
// undefined where PTO does not compute it (non-float input).
at::Tensor variance(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                    bool keepdim, const char* op) {
  if (!at::isFloatingType(self.scalar_type())) return {};
  const int64_t count = reducedCount(self, dim);
  const double divisor = static_cast<double>(count) - (correction ? correction->toDouble() : 1.0);
  if (divisor <= 0) {
    TORCH_WARN(op, "(): degrees of freedom is <= 0. Correction should be strictly less than the "
               "reduction factor (input numel divided by output numel).");
  }
  at::Tensor out = at::empty(at::sum(metaTwin(self), dim, keepdim).sizes(), self.options());
  const bool native = RecipeCall("aten::var.correction")
                          .tensor("self", self)
                          .value("dim", dim ? recipes::Value{dim->vec()} : recipes::Value{})
                          .value("correction", correction ? recipes::Value{correction->toDouble()} : recipes::Value{})
                          .value("keepdim", keepdim)
                          .result(out)
                          .launch();
  return native ? out : at::Tensor();
}

// batch_norm: statistics per channel (dim 1) over every other dim.
std::vector<int64_t> batchDims(const at::Tensor& input) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  return dims;
}

// A per-channel vector shaped to broadcast against the input: [1, C, 1, ...].
at::Tensor perChannel(const at::Tensor& vector, const at::Tensor& input) {
  std::vector<int64_t> shape(input.dim(), 1);
  shape[1] = input.size(1);
  return vector.reshape(shape);
}

// The dtype of batch_norm's saved statistics, as the CPU gives them: the input's, or
// float32 where a float16/bfloat16 input comes with float32 parameters (mixed type).
at::ScalarType statisticsType(const at::Tensor& input, std::initializer_list<std::optional<at::Tensor>> parameters) {
  if (!at::isReducedFloatingType(input.scalar_type())) return input.scalar_type();
  for (const std::optional<at::Tensor>& p : parameters) {
    if (p && p->defined() && p->scalar_type() == at::kFloat) return at::kFloat;
  }
  return input.scalar_type();
}

}  // namespace

// The recipe (csrc/recipes/rows.cpp): tlayernorm and the statistics where the
// parameters share the input's dtype, else the arithmetic in float32 for
// float16/bfloat16; the CPU where it does not apply (empty rows, integer inputs).
std::tuple<at::Tensor, at::Tensor, at::Tensor> layerNorm(const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                                                         const std::optional<at::Tensor>& weight,
                                                         const std::optional<at::Tensor>& bias, double eps) {
  const Layout layout = layoutOf(input, normalized_shape, weight, bias);
  std::vector<int64_t> statistics_shape(input.sizes().begin(), input.sizes().end());
  for (int64_t d : layout.normalized) statistics_shape[d] = 1;
  at::Tensor out = at::empty(input.sizes(), input.options());
  at::Tensor mean = at::empty(statistics_shape, input.options());
  at::Tensor rstd = at::empty(statistics_shape, input.options());
  const bool native = RecipeCall("aten::native_layer_norm")
                          .tensor("input", input)
                          .value("normalized_shape", C10_AS_INTARRAYREF_SLOW(normalized_shape).vec())
                          .tensor("weight", weight)
                          .tensor("bias", bias)
                          .value("eps", eps)
                          .result(out)
                          .result(mean)
                          .result(rstd)
                          .launch();
  if (!native) {
    return Fallback<ATEN_OP(native_layer_norm)>::call(input, C10_AS_INTARRAYREF_SLOW(normalized_shape), weight, bias, eps);
  }
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layerNormBackward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, std::array<bool, 3> output_mask) {
  const Layout layout = layoutOf(input, normalized_shape, weight, bias);
  const at::Tensor x = widened(input), dy = widened(grad_out), mu = widened(mean), inv = widened(rstd);
  const at::Tensor normalized = (x - mu) * inv;
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    const at::Tensor g = weight && weight->defined() ? dy * widened(*weight) : dy;
    const at::Tensor g_mean = g.mean(layout.normalized, /*keepdim=*/true);
    const at::Tensor gx_mean = (g * normalized).mean(layout.normalized, /*keepdim=*/true);
    grad_input = ((g - g_mean - normalized * gx_mean) * inv).to(input.scalar_type());
  }
  if (output_mask[1] && weight && weight->defined()) {
    grad_weight = summedOverBatch(layout, dy * normalized).to(weight->scalar_type());
  }
  if (output_mask[2] && bias && bias->defined()) {
    grad_bias = summedOverBatch(layout, dy).to(bias->scalar_type());
  }
  return {grad_input, grad_weight, grad_bias};
}

// The recipe where it applies: one normalised (last) dim of a float32/float64 input
// (not channels_last, whose result the composite lays out as its input), and a weight
// of that length and dtype. Elsewhere torch's composite, the CPU's own (float16/bfloat16
// compute in float32 there; a mismatched weight promotes).
std::tuple<at::Tensor, at::Tensor> fusedRmsNorm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                                const std::optional<at::Tensor>& weight, std::optional<double> eps) {
  const bool weighted = weight && weight->defined();
  const bool fits = normalized_shape.size() == 1 && input.dim() > 0 && input.numel() > 0 &&
                    input.suggest_memory_format() == at::MemoryFormat::Contiguous &&
                    input.size(-1) == normalized_shape[0] &&
                    (input.scalar_type() == at::kFloat || input.scalar_type() == at::kDouble) &&
                    (!weighted || (weight->sizes() == normalized_shape && weight->scalar_type() == input.scalar_type()));
  if (fits) {
    std::vector<int64_t> statistics_shape(input.sizes().begin(), input.sizes().end());
    statistics_shape.back() = 1;
    at::Tensor out = at::empty(input.sizes(), input.options());
    at::Tensor rstd = at::empty(statistics_shape, input.options());
    const bool native = RecipeCall("aten::_fused_rms_norm")
                            .tensor("input", input)
                            .value("normalized_shape", normalized_shape.vec())
                            .tensor("weight", weight)
                            .value("eps", eps ? recipes::Value{*eps} : recipes::Value{})
                            .result(out)
                            .result(rstd)
                            .launch();
    if (native) return {out, rstd};
  }
  return at::compositeimplicitautograd::_fused_rms_norm(input, normalized_shape, weight, eps);
}

// x_hat = x * rstd; grad_input = (g - x_hat * mean(g * x_hat)) * rstd with g = grad * weight,
// grad_weight = grad * x_hat summed over the batch dims; in float32 for float16/bfloat16.
std::tuple<at::Tensor, at::Tensor> fusedRmsNormBackward(const at::Tensor& grad_out, const at::Tensor& input,
                                                        at::IntArrayRef normalized_shape, const at::Tensor& rstd,
                                                        const std::optional<at::Tensor>& weight,
                                                        std::array<bool, 2> output_mask) {
  const Layout layout = layoutOf(input, c10::fromIntArrayRefSlow(normalized_shape), weight, std::nullopt);
  const at::Tensor dy = widened(grad_out);
  const at::Tensor normalized = widened(input) * widened(rstd);
  at::Tensor grad_input, grad_weight;
  if (output_mask[0]) {
    const at::Tensor g = weight && weight->defined() ? dy * widened(*weight) : dy;
    const at::Tensor gx_mean = (g * normalized).mean(layout.normalized, /*keepdim=*/true);
    grad_input = ((g - normalized * gx_mean) * widened(rstd)).to(input.scalar_type());
  }
  if (output_mask[1] && weight && weight->defined()) {
    grad_weight = summedOverBatch(layout, dy * normalized).to(weight->scalar_type());
  }
  return {grad_input, grad_weight};
}

at::Tensor var(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
               bool keepdim) {
  at::Tensor r = variance(self, dim, correction, keepdim, "var");
  return r.defined() ? r
                     : Fallback<ATEN_OP2(var, correction)>::call(self, dim, correction, keepdim);
}

at::Tensor& varOut(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                   bool keepdim, at::Tensor& out) {
  at::Tensor r = variance(self, dim, correction, keepdim, "var");
  if (!r.defined()) {
    return Fallback<ATEN_OP2(var, correction_out)>::call(self, dim, correction, keepdim, out);
  }
  return assign(out, r);
}

at::Tensor stddev(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                  bool keepdim) {
  at::Tensor r = variance(self, dim, correction, keepdim, "std");
  return r.defined() ? r.sqrt()
                     : Fallback<ATEN_OP2(std, correction)>::call(self, dim, correction, keepdim);
}

at::Tensor& stddevOut(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                      bool keepdim, at::Tensor& out) {
  at::Tensor r = variance(self, dim, correction, keepdim, "std");
  if (!r.defined()) {
    return Fallback<ATEN_OP2(std, correction_out)>::call(self, dim, correction, keepdim, out);
  }
  return assign(out, r.sqrt());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> groupNorm(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                                         const std::optional<at::Tensor>& bias, int64_t n, int64_t c,
                                                         int64_t hw, int64_t group, double eps) {
  // The CPU kernel's contract: the input dense in its own memory format (F.group_norm
  // makes it so first).
  const at::MemoryFormat format = input.suggest_memory_format();
  TORCH_CHECK(input.is_contiguous(format), "Expected X.is_contiguous(memory_format) to be true, but got false.  "
              "(Could this error message be improved?  If so, please report an enhancement request to PyTorch.)");
  auto wide = [](const std::optional<at::Tensor>& p) { return p && p->defined() ? widened(*p) : at::Tensor(); };
  auto [y, mean, rstd] =
      at::native::math_group_norm(widened(input).contiguous(), wide(weight), wide(bias), n, c, hw, group, eps);
  const at::ScalarType statistics = statisticsType(input, {weight, bias});
  return {y.to(input.scalar_type()).contiguous(format), mean.to(statistics), rstd.to(statistics)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batchNorm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, bool training,
    double momentum, double eps) {
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected an input with at least 2 dims, got ", input.sizes());
  const at::Tensor x = widened(input);
  const std::vector<int64_t> dims = batchDims(input);
  const at::ScalarType statistics = statisticsType(input, {weight, bias, running_mean, running_var});
  at::Tensor mean, invstd, save_mean, save_invstd;
  if (training) {
    mean = x.mean(dims);
    const at::Tensor centered = x - perChannel(mean, x);
    const at::Tensor biased = (centered * centered).mean(dims);
    invstd = (biased + eps).rsqrt();
    const int64_t n = input.numel() / input.size(1);
    if (running_mean && running_mean->defined()) {
      running_mean->copy_(*running_mean * (1 - momentum) + mean * momentum);
    }
    if (running_var && running_var->defined()) {
      const at::Tensor unbiased = n > 1 ? biased * (static_cast<double>(n) / static_cast<double>(n - 1)) : biased;
      running_var->copy_(*running_var * (1 - momentum) + unbiased * momentum);
    }
    save_mean = mean.to(statistics);
    save_invstd = invstd.to(statistics);
  } else {
    TORCH_CHECK(running_mean && running_mean->defined() && running_var && running_var->defined(),
                "batch_norm: running_mean and running_var must be defined in evaluation mode");
    mean = widened(*running_mean);
    invstd = (widened(*running_var) + eps).rsqrt();
    save_mean = at::empty({0}, x.options().dtype(statistics));
    save_invstd = at::empty({0}, x.options().dtype(statistics));
  }
  at::Tensor out = (x - perChannel(mean, x)) * perChannel(invstd, x);
  if (weight && weight->defined()) out = out * perChannel(widened(*weight), x);
  if (bias && bias->defined()) out = out + perChannel(widened(*bias), x);
  return {out.to(input.scalar_type()), save_mean, save_invstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batchNormBackward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd, bool train,
    double eps, std::array<bool, 3> output_mask) {
  const at::Tensor x = widened(input), dy = widened(grad_out);
  const std::vector<int64_t> dims = batchDims(input);
  const at::Tensor mean = train ? widened(*save_mean) : widened(*running_mean);
  const at::Tensor invstd = train ? widened(*save_invstd) : (widened(*running_var) + eps).rsqrt();
  const at::Tensor normalized = (x - perChannel(mean, x)) * perChannel(invstd, x);
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    const at::Tensor g = weight && weight->defined() ? dy * perChannel(widened(*weight), x) : dy;
    at::Tensor result = g;
    if (train) {
      result = g - perChannel(g.mean(dims), x) - normalized * perChannel((g * normalized).mean(dims), x);
    }
    grad_input = (result * perChannel(invstd, x)).to(input.scalar_type());
  }
  if (output_mask[1]) {
    grad_weight = (dy * normalized).sum(dims);
    if (weight && weight->defined()) grad_weight = grad_weight.to(weight->scalar_type());
  }
  if (output_mask[2]) grad_bias = dy.sum(dims).to(grad_weight.defined() ? grad_weight.scalar_type() : x.scalar_type());
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace pto::torch_glue
