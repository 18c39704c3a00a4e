// Registers random.h's kernels for the aten ops they implement on pto, and PyTorch's own
// multinomial, whose draws with replacement pto's stub makes.
#include <ATen/native/UnaryOps.h>
#include <ATen/ops/multinomial_native.h>
#include <torch/library.h>

#include "random.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("normal_", TORCH_FN(normalInplace));
  m.impl("uniform_", TORCH_FN(uniformInplace));
  m.impl("exponential_", TORCH_FN(exponentialInplace));
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
  m.impl("multinomial", TORCH_FN(at::native::multinomial));
  m.impl("multinomial.out", TORCH_FN(at::native::multinomial_out));
}

}  // namespace pto::torch_glue

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(multinomial_with_replacement_stub, &pto::torch_glue::multinomialWithReplacement)
}  // namespace at::native
