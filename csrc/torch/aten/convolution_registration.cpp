// Registers convolution.h's kernels for the aten ops they implement on pto.
#include <torch/library.h>

#include "convolution.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(convolutionOverrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolutionBackwardOverrideable));
  m.impl("im2col", TORCH_FN(im2col));
  m.impl("col2im", TORCH_FN(col2im));
}

}  // namespace pto::torch_glue
