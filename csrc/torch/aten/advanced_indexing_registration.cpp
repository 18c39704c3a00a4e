// Registers advanced_indexing.h's kernels for the aten ops they implement on pto.
#include <torch/library.h>

#include "advanced_indexing.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index.Tensor", TORCH_FN(indexGather));
  m.impl("index.Tensor_out", TORCH_FN(indexOut));
  m.impl("_index_put_impl_", TORCH_FN(indexPut));
  m.impl("take", TORCH_FN(takeFlat));
  m.impl("take.out", TORCH_FN(takeOut));
  m.impl("put_", TORCH_FN(putFlat));
  m.impl("nonzero", TORCH_FN(nonzero));
  m.impl("nonzero.out", TORCH_FN(nonzeroOut));
  m.impl("masked_select", TORCH_FN(maskedSelect));
  m.impl("masked_select.out", TORCH_FN(maskedSelectOut));
}

}  // namespace pto::torch_glue
