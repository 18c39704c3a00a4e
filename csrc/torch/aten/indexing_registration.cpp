// Registers indexing.h's kernels for the aten ops they implement on pto.
#include <torch/library.h>

#include "indexing.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("gather", TORCH_FN(gather));
  m.impl("gather.out", TORCH_FN(gatherOut));
  m.impl("index_select", TORCH_FN(indexSelect));
  m.impl("index_select.out", TORCH_FN(indexSelectOut));
  m.impl("arange.start_out", TORCH_FN(arangeOut));
  m.impl("linspace.out", TORCH_FN(linspaceOut));
  m.impl("eye.out", TORCH_FN(eyeSquareOut));
  m.impl("eye.m_out", TORCH_FN(eyeOut));
  m.impl("one_hot", TORCH_FN(oneHot));
  m.impl("tril", TORCH_FN(tril));
  m.impl("tril.out", TORCH_FN(trilOut));
  m.impl("tril_", TORCH_FN(trilInplace));
  m.impl("triu", TORCH_FN(triu));
  m.impl("triu.out", TORCH_FN(triuOut));
  m.impl("triu_", TORCH_FN(triuInplace));
  m.impl("index_add", TORCH_FN(indexAdd));
  m.impl("index_add_", TORCH_FN(indexAddInplace));
  m.impl("index_add.out", TORCH_FN(indexAddOut));
  m.impl("embedding_dense_backward", TORCH_FN(embeddingDenseBackward));
  m.impl("nll_loss_forward", TORCH_FN(nllLossForward));
  m.impl("nll_loss_backward", TORCH_FN(nllLossBackward));
  m.impl("index_fill_.int_Scalar", TORCH_FN(indexFillScalar));
  m.impl("index_fill_.int_Tensor", TORCH_FN(indexFillTensor));
  m.impl("index_copy_", TORCH_FN(indexCopyInplace));
  m.impl("index_copy.out", TORCH_FN(indexCopyOut));
  m.impl("masked_scatter_", TORCH_FN(maskedScatter));
  m.impl("repeat_interleave.Tensor", TORCH_FN(repeatInterleave));
  m.impl("bincount", TORCH_FN(bincount));
  m.impl("_unique2", TORCH_FN(unique));
}

}  // namespace pto::torch_glue
