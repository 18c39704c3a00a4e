// Registers softmax.h's kernels for the aten ops they implement on pto.
#include <ATen/Operators.h>
#include <torch/library.h>

#include "softmax.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_safe_softmax", TORCH_FN(safeSoftmax));
  {
    using F = Forward<ATEN_OP(_softmax), ATEN_OP2(_softmax, out)>;
    m.impl("_softmax", TORCH_FN(F::functional));
    m.impl("_softmax.out", TORCH_FN(F::out));
  }
  {
    using F = Forward<ATEN_OP(_log_softmax), ATEN_OP2(_log_softmax, out)>;
    m.impl("_log_softmax", TORCH_FN(F::functional));
    m.impl("_log_softmax.out", TORCH_FN(F::out));
  }
  {
    using F = Backward<ATEN_OP(_softmax_backward_data),
                       ATEN_OP2(_softmax_backward_data, out)>;
    m.impl("_softmax_backward_data", TORCH_FN(F::functional));
    m.impl("_softmax_backward_data.out", TORCH_FN(F::out));
  }
  {
    using F = Backward<ATEN_OP(_log_softmax_backward_data),
                       ATEN_OP2(_log_softmax_backward_data, out)>;
    m.impl("_log_softmax_backward_data", TORCH_FN(F::functional));
    m.impl("_log_softmax_backward_data.out", TORCH_FN(F::out));
  }
}

}  // namespace pto::torch_glue
