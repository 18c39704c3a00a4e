// Activations pto runs as one native instruction with the activation's numbers for
// immediates (elu, and selu and celu through it, softplus, log_sigmoid, hardshrink,
// softshrink, and the gradients of elu, softplus, hardtanh, hardswish, leaky_relu,
// log_sigmoid, mish and the shrinks) or as short sequences of them (glu, prelu, logit,
// threshold),
// with the formulas of PyTorch's CPU kernels. float16/bfloat16 compute in float32 and
// round once.
#pragma once

#include <ATen/ATen.h>

#include "composite.h"

namespace pto::torch_glue {

// x > 0 ? scale * x : alpha * scale * (exp(input_scale * x) - 1)
at::Tensor eluOf(const at::Tensor& self, const at::Scalar& alpha, const at::Scalar& scale,
                 const at::Scalar& input_scale);
at::Tensor& eluOut(const at::Tensor& self, const at::Scalar& alpha, const at::Scalar& scale,
                   const at::Scalar& input_scale, at::Tensor& out);
at::Tensor& eluInplace(at::Tensor& self, const at::Scalar& alpha, const at::Scalar& scale,
                       const at::Scalar& input_scale);

// softplus(x) = log1p(exp(beta * x)) / beta, x itself where beta * x > threshold.
at::Tensor softplusOf(const at::Tensor& self, const at::Scalar& beta, const at::Scalar& threshold);
at::Tensor& softplusOut(const at::Tensor& self, const at::Scalar& beta, const at::Scalar& threshold, at::Tensor& out);

// log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|)), and its gradient.
std::tuple<at::Tensor, at::Tensor> logSigmoidForward(const at::Tensor& self);
std::tuple<at::Tensor&, at::Tensor&> logSigmoidForwardOut(const at::Tensor& self, at::Tensor& output,
                                                          at::Tensor& buffer);
at::Tensor logSigmoidBackward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& buffer);
at::Tensor& logSigmoidBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& buffer,
                                  at::Tensor& grad_input);

at::Tensor hardshrinkOf(const at::Tensor& self, const at::Scalar& lambd);
at::Tensor& hardshrinkOut(const at::Tensor& self, const at::Scalar& lambd, at::Tensor& out);

// From the input, or (is_result) from the output y, as the CPU kernel takes it.
at::Tensor eluBackward(const at::Tensor& grad, const at::Scalar& alpha, const at::Scalar& scale,
                       const at::Scalar& input_scale, bool is_result, const at::Tensor& self_or_result);
at::Tensor& eluBackwardOut(const at::Tensor& grad, const at::Scalar& alpha, const at::Scalar& scale,
                           const at::Scalar& input_scale, bool is_result, const at::Tensor& self_or_result,
                           at::Tensor& grad_input);

// grad e / (e + 1), e = exp(beta x); grad itself where beta x > threshold.
at::Tensor softplusBackward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& beta,
                            const at::Scalar& threshold);
at::Tensor& softplusBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& beta,
                                const at::Scalar& threshold, at::Tensor& grad_input);

// hardtanh's (relu6's): grad strictly inside (min, max), 0 elsewhere.
at::Tensor hardtanhBackward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& min,
                            const at::Scalar& max);
at::Tensor& hardtanhBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& min,
                                const at::Scalar& max, at::Tensor& grad_input);

// The gradients of x min(max(x + 3, 0), 6) / 6 and of leaky_relu, instructions
// (hardsigmoid's is a row of aten_instructions.def).
at::Tensor hardswishBackward(const at::Tensor& grad, const at::Tensor& self);
at::Tensor& hardswishBackwardOut(const at::Tensor& grad, const at::Tensor& self, at::Tensor& out);
at::Tensor leakyReluBackward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& slope,
                             bool self_is_result);
at::Tensor& leakyReluBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& slope,
                                 bool self_is_result, at::Tensor& grad_input);

// mish's gradient, tmishgrad (mish itself is a row of aten_instructions.def).
at::Tensor mishBackward(const at::Tensor& grad, const at::Tensor& self);

// glu: the first half of `dim` gated by the sigmoid of the second.
at::Tensor gluOf(const at::Tensor& self, int64_t dim);
at::Tensor& gluOut(const at::Tensor& self, int64_t dim, at::Tensor& out);
at::Tensor gluBackward(const at::Tensor& grad, const at::Tensor& self, int64_t dim);
at::Tensor& gluBackwardOut(const at::Tensor& grad, const at::Tensor& self, int64_t dim, at::Tensor& grad_input);

// prelu's kernel (torch broadcasts the weight first): x > 0 ? x : weight * x.
at::Tensor preluKernel(const at::Tensor& self, const at::Tensor& weight);
std::tuple<at::Tensor, at::Tensor> preluKernelBackward(const at::Tensor& grad, const at::Tensor& self,
                                                       const at::Tensor& weight);

// x <= threshold ? value : x (NaN kept), in self's dtype as the CPU's kernel. In place
// it is idempotent, so the CPU allows a tensor whose elements repeat (expand): pto
// writes each element once.
at::Tensor thresholdOf(const at::Tensor& self, const at::Scalar& threshold, const at::Scalar& value);
at::Tensor& thresholdOut(const at::Tensor& self, const at::Scalar& threshold, const at::Scalar& value,
                         at::Tensor& out);
at::Tensor& thresholdInplace(at::Tensor& self, const at::Scalar& threshold, const at::Scalar& value);

// logit: log(x / (1 - x)), x clamped to [eps, 1 - eps] when eps is given.
at::Tensor logitOf(const at::Tensor& self, std::optional<double> eps);
at::Tensor& logitOut(const at::Tensor& self, std::optional<double> eps, at::Tensor& out);
at::Tensor& logitInplace(at::Tensor& self, std::optional<double> eps);

// grad / (x (1 - x)) inside [eps, 1 - eps], 0 outside (NaN everywhere for eps < 0, as the CPU).
at::Tensor logitBackward(const at::Tensor& grad, const at::Tensor& self, std::optional<double> eps);
at::Tensor& logitBackwardOut(const at::Tensor& grad, const at::Tensor& self, std::optional<double> eps,
                             at::Tensor& grad_input);

// softshrink: x - lambd above lambd, x + lambd below -lambd, 0 between.
at::Tensor softshrinkOf(const at::Tensor& self, const at::Scalar& lambd);
at::Tensor& softshrinkOut(const at::Tensor& self, const at::Scalar& lambd, at::Tensor& out);
at::Tensor softshrinkBackward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lambd);
at::Tensor& softshrinkBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lambd,
                                  at::Tensor& grad_input);
at::Tensor hardshrinkBackward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lambd);
at::Tensor& hardshrinkBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lambd,
                                  at::Tensor& grad_input);

}  // namespace pto::torch_glue
