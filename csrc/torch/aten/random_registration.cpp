// Registers random.h's kernels for the aten ops they implement on pto.
#include <torch/library.h>

#include "random.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("normal_", TORCH_FN(normalInplace));
  m.impl("uniform_", TORCH_FN(uniformInplace));
  m.impl("random_.from", TORCH_FN(randomFromTo));
  m.impl("random_.to", TORCH_FN(randomTo));
  m.impl("random_", TORCH_FN(randomFull));
  m.impl("bernoulli_.float", TORCH_FN(bernoulliScalar));
  m.impl("bernoulli_.Tensor", TORCH_FN(bernoulliTensor));
  m.impl("native_dropout", TORCH_FN(nativeDropout));
  m.impl("native_dropout_backward", TORCH_FN(nativeDropoutBackward));
  m.impl("normal.Tensor_float", TORCH_FN(normalTensorFloat));
  m.impl("normal.float_Tensor", TORCH_FN(normalFloatTensor));
  m.impl("normal.Tensor_Tensor", TORCH_FN(normalTensorTensor));
  m.impl("randperm.generator_out", TORCH_FN(randperm));
}

}  // namespace pto::torch_glue
