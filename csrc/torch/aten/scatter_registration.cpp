// Registers scatter.h's kernels for the aten ops they implement on pto.
#include <torch/library.h>

#include "scatter.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("scatter.src_out", TORCH_FN(scatterSrcOut));
  m.impl("scatter.value_out", TORCH_FN(scatterValueOut));
  m.impl("scatter_add.out", TORCH_FN(scatterAddOut));
  m.impl("scatter.reduce_out", TORCH_FN(scatterReduceOut));
  m.impl("scatter.value_reduce_out", TORCH_FN(scatterValueReduceOut));
  m.impl("scatter_reduce.two_out", TORCH_FN(scatterReduceTwoOut));
}

}  // namespace pto::torch_glue
