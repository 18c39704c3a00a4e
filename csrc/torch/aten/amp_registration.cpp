// Registers amp.h's kernels for GradScaler's aten ops on pto.
#include <torch/library.h>

#include "amp.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_", TORCH_FN(ampForeachNonFiniteCheckAndUnscale));
  m.impl("_amp_update_scale_", TORCH_FN(ampUpdateScale));
}

}  // namespace pto::torch_glue
