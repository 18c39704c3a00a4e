// Losses pto runs as short sequences of native instructions, with the formulas of
// PyTorch's CPU kernels: mse, smooth L1, Huber and binary cross-entropy, forward
// and backward. float16/bfloat16 compute in float32 and round once at the end.
#pragma once

#include <ATen/ATen.h>

namespace pto::torch_glue {

at::Tensor mseLoss(const at::Tensor& self, const at::Tensor& target, int64_t reduction);
at::Tensor& mseLossOut(const at::Tensor& self, const at::Tensor& target, int64_t reduction, at::Tensor& out);
at::Tensor mseLossBackward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                           int64_t reduction);
at::Tensor& mseLossBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                               int64_t reduction, at::Tensor& grad_input);
at::Tensor smoothL1Loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double beta);
at::Tensor& smoothL1LossOut(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double beta,
                            at::Tensor& out);
at::Tensor smoothL1LossBackward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                int64_t reduction, double beta);
at::Tensor& smoothL1LossBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                    int64_t reduction, double beta, at::Tensor& grad_input);
at::Tensor huberLoss(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double delta);
at::Tensor& huberLossOut(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double delta,
                         at::Tensor& out);
at::Tensor huberLossBackward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                             int64_t reduction, double delta);
at::Tensor& huberLossBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                 int64_t reduction, double delta, at::Tensor& grad_input);

// -w (y log x + (1 - y) log(1 - x)), each log clamped at -100 as PyTorch does. Like the
// CPU kernel it checks that inputs are probabilities, which takes a sync.
at::Tensor binaryCrossEntropy(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
                              int64_t reduction);
at::Tensor& binaryCrossEntropyOut(const at::Tensor& self, const at::Tensor& target,
                                  const std::optional<at::Tensor>& weight, int64_t reduction, at::Tensor& out);

// w (x - y) / max(x (1 - x), 1e-12), times the incoming gradient.
at::Tensor binaryCrossEntropyBackward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                      const std::optional<at::Tensor>& weight, int64_t reduction);
at::Tensor& binaryCrossEntropyBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                          const std::optional<at::Tensor>& weight, int64_t reduction,
                                          at::Tensor& grad_input);

}  // namespace pto::torch_glue
