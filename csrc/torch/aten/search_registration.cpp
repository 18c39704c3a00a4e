// Registers search.h's kernels for the aten ops they implement on pto.
#include <torch/library.h>

#include "search.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("searchsorted.Tensor", TORCH_FN(searchsorted));
  m.impl("searchsorted.Tensor_out", TORCH_FN(searchsortedOut));
  m.impl("searchsorted.Scalar", TORCH_FN(searchsortedScalar));
  m.impl("searchsorted.Scalar_out", TORCH_FN(searchsortedScalarOut));
  m.impl("bucketize.Tensor", TORCH_FN(bucketize));
  m.impl("bucketize.Tensor_out", TORCH_FN(bucketizeOut));
  m.impl("bucketize.Scalar", TORCH_FN(bucketizeScalar));
}

}  // namespace pto::torch_glue
