// Registers concat.h's kernels for the aten ops they implement on pto.
#include <torch/library.h>

#include "concat.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cat", TORCH_FN(cat));
  m.impl("cat.out", TORCH_FN(catOut));
}

}  // namespace pto::torch_glue
