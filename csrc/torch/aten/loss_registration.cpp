// Registers loss.h's kernels for the aten ops they implement on pto.
#include <torch/library.h>

#include "loss.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mse_loss", TORCH_FN(mseLoss));
  m.impl("mse_loss.out", TORCH_FN(mseLossOut));
  m.impl("mse_loss_backward", TORCH_FN(mseLossBackward));
  m.impl("mse_loss_backward.grad_input", TORCH_FN(mseLossBackwardOut));
  m.impl("smooth_l1_loss", TORCH_FN(smoothL1Loss));
  m.impl("smooth_l1_loss.out", TORCH_FN(smoothL1LossOut));
  m.impl("smooth_l1_loss_backward", TORCH_FN(smoothL1LossBackward));
  m.impl("smooth_l1_loss_backward.grad_input", TORCH_FN(smoothL1LossBackwardOut));
  m.impl("huber_loss", TORCH_FN(huberLoss));
  m.impl("huber_loss.out", TORCH_FN(huberLossOut));
  m.impl("huber_loss_backward", TORCH_FN(huberLossBackward));
  m.impl("huber_loss_backward.out", TORCH_FN(huberLossBackwardOut));
  m.impl("binary_cross_entropy", TORCH_FN(binaryCrossEntropy));
  m.impl("binary_cross_entropy.out", TORCH_FN(binaryCrossEntropyOut));
  m.impl("binary_cross_entropy_backward", TORCH_FN(binaryCrossEntropyBackward));
  m.impl("binary_cross_entropy_backward.grad_input", TORCH_FN(binaryCrossEntropyBackwardOut));
}

}  // namespace pto::torch_glue
