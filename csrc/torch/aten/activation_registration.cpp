// Registers activation.h's kernels for the aten ops they implement on pto.
#include <torch/library.h>

#include "activation.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("threshold", TORCH_FN(thresholdOf));
  m.impl("threshold_", TORCH_FN(thresholdInplace));
  m.impl("threshold.out", TORCH_FN(thresholdOut));
  m.impl("elu", TORCH_FN(eluOf));
  m.impl("elu_", TORCH_FN(eluInplace));
  m.impl("elu.out", TORCH_FN(eluOut));
  m.impl("elu_backward", TORCH_FN(eluBackward));
  m.impl("softplus", TORCH_FN(softplusOf));
  m.impl("softplus.out", TORCH_FN(softplusOut));
  m.impl("log_sigmoid_forward", TORCH_FN(logSigmoidForward));
  m.impl("log_sigmoid_forward.output", TORCH_FN(logSigmoidForwardOut));
  m.impl("log_sigmoid_backward", TORCH_FN(logSigmoidBackward));
  m.impl("log_sigmoid_backward.grad_input", TORCH_FN(logSigmoidBackwardOut));
  m.impl("hardshrink", TORCH_FN(hardshrinkOf));
  m.impl("hardshrink.out", TORCH_FN(hardshrinkOut));
  m.impl("elu_backward.grad_input", TORCH_FN(eluBackwardOut));
  m.impl("softplus_backward", TORCH_FN(softplusBackward));
  m.impl("softplus_backward.grad_input", TORCH_FN(softplusBackwardOut));
  m.impl("hardtanh_backward", TORCH_FN(hardtanhBackward));
  m.impl("hardtanh_backward.grad_input", TORCH_FN(hardtanhBackwardOut));
  m.impl("hardswish_backward", TORCH_FN(hardswishBackward));
  m.impl("hardswish_backward.out", TORCH_FN(hardswishBackwardOut));
  m.impl("leaky_relu_backward", TORCH_FN(leakyReluBackward));
  m.impl("leaky_relu_backward.grad_input", TORCH_FN(leakyReluBackwardOut));
  m.impl("mish_backward", TORCH_FN(mishBackward));
  m.impl("glu", TORCH_FN(gluOf));
  m.impl("glu.out", TORCH_FN(gluOut));
  m.impl("glu_backward", TORCH_FN(gluBackward));
  m.impl("glu_backward.grad_input", TORCH_FN(gluBackwardOut));
  m.impl("_prelu_kernel", TORCH_FN(preluKernel));
  m.impl("_prelu_kernel_backward", TORCH_FN(preluKernelBackward));
  m.impl("logit", TORCH_FN(logitOf));
  m.impl("logit.out", TORCH_FN(logitOut));
  m.impl("logit_", TORCH_FN(logitInplace));
  m.impl("logit_backward", TORCH_FN(logitBackward));
  m.impl("logit_backward.grad_input", TORCH_FN(logitBackwardOut));
  m.impl("softshrink", TORCH_FN(softshrinkOf));
  m.impl("softshrink.out", TORCH_FN(softshrinkOut));
  m.impl("softshrink_backward", TORCH_FN(softshrinkBackward));
  m.impl("softshrink_backward.grad_input", TORCH_FN(softshrinkBackwardOut));
  m.impl("hardshrink_backward", TORCH_FN(hardshrinkBackward));
  m.impl("hardshrink_backward.grad_input", TORCH_FN(hardshrinkBackwardOut));
}

}  // namespace pto::torch_glue
