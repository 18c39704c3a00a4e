// Registers sort.h's kernels for the aten ops they implement on pto.
#include <torch/library.h>

#include "sort.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sort.values_stable", TORCH_FN(sortOut));
  m.impl("topk.values", TORCH_FN(topkOut));
  m.impl("cumsum.out", TORCH_FN(cumsumOut));
  m.impl("cumprod.out", TORCH_FN(cumprodOut));
  m.impl("kthvalue.values", TORCH_FN(kthvalueOut));
  m.impl("median.dim_values", TORCH_FN(medianDimOut));
  m.impl("nanmedian.dim_values", TORCH_FN(nanmedianDimOut));
  m.impl("median", TORCH_FN(median));
  m.impl("nanmedian", TORCH_FN(nanmedian));
}

}  // namespace pto::torch_glue
