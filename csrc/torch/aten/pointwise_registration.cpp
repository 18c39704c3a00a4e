// Registers pointwise.h's kernels for the aten ops they implement on pto.
#include <torch/library.h>

#include "pointwise.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("logical_and.out", TORCH_FN(logicalAndOut));
  m.impl("logical_or.out", TORCH_FN(logicalOrOut));
  m.impl("logical_xor.out", TORCH_FN(logicalXorOut));
  m.impl("logical_not.out", TORCH_FN(logicalNotOut));
  m.impl("clamp", TORCH_FN(clamp));
  m.impl("clamp.out", TORCH_FN(clampOut));
  m.impl("clamp_", TORCH_FN(clampInplace));
  m.impl("clamp_min", TORCH_FN(clampMin));
  m.impl("clamp_min.out", TORCH_FN(clampMinOut));
  m.impl("clamp_min_", TORCH_FN(clampMinInplace));
  m.impl("clamp_max", TORCH_FN(clampMax));
  m.impl("clamp_max.out", TORCH_FN(clampMaxOut));
  m.impl("clamp_max_", TORCH_FN(clampMaxInplace));
  m.impl("clamp.Tensor_out", TORCH_FN(clampTensorOut));
  m.impl("clamp_min.Tensor_out", TORCH_FN(clampMinTensorOut));
  m.impl("clamp_max.Tensor_out", TORCH_FN(clampMaxTensorOut));
  m.impl("hardtanh", TORCH_FN(hardtanh));
  m.impl("hardtanh.out", TORCH_FN(hardtanhOut));
  m.impl("hardtanh_", TORCH_FN(hardtanhInplace));
  m.impl("masked_fill_.Scalar", TORCH_FN(maskedFillScalar));
  m.impl("masked_fill_.Tensor", TORCH_FN(maskedFillTensor));
  m.impl("leaky_relu", TORCH_FN(leakyReluOf));
  m.impl("leaky_relu.out", TORCH_FN(leakyReluOut));
  m.impl("leaky_relu_", TORCH_FN(leakyReluInplace));
  m.impl("nan_to_num", TORCH_FN(nanToNum));
  m.impl("nan_to_num.out", TORCH_FN(nanToNumOut));
  m.impl("nan_to_num_", TORCH_FN(nanToNumInplace));
  m.impl("isposinf.out", TORCH_FN(isposinfOut));
  m.impl("isneginf.out", TORCH_FN(isneginfOut));
  m.impl("isnan", TORCH_FN(isnan));
  m.impl("signbit", TORCH_FN(signbit));
  m.impl("signbit.out", TORCH_FN(signbitOut));
  m.impl("addcmul", TORCH_FN(addcmul));
  m.impl("addcmul_", TORCH_FN(addcmulInplace));
  m.impl("addcmul.out", TORCH_FN(addcmulOut));
  m.impl("addcdiv", TORCH_FN(addcdiv));
  m.impl("addcdiv_", TORCH_FN(addcdivInplace));
  m.impl("addcdiv.out", TORCH_FN(addcdivOut));
  m.impl("lerp.Scalar", TORCH_FN(lerp));
  m.impl("lerp_.Scalar", TORCH_FN(lerpInplace));
  m.impl("lerp.Scalar_out", TORCH_FN(lerpOut));
  m.impl("lerp.Tensor", TORCH_FN(lerpTensor));
  m.impl("lerp_.Tensor", TORCH_FN(lerpTensorInplace));
  m.impl("lerp.Tensor_out", TORCH_FN(lerpTensorOut));
}

}  // namespace pto::torch_glue
