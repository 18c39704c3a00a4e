// Registers normalization.h's kernels for the aten ops they implement on pto.
#include <torch/library.h>

#include "normalization.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", TORCH_FN(batchNorm));
  m.impl("native_group_norm", TORCH_FN(groupNorm));
  m.impl("native_batch_norm_backward", TORCH_FN(batchNormBackward));
  m.impl("var.correction", TORCH_FN(var));
  m.impl("var.correction_out", TORCH_FN(varOut));
  m.impl("std.correction", TORCH_FN(stddev));
  m.impl("std.correction_out", TORCH_FN(stddevOut));
  m.impl("native_layer_norm", TORCH_FN(layerNorm));
  m.impl("native_layer_norm_backward", TORCH_FN(layerNormBackward));
  m.impl("_fused_rms_norm", TORCH_FN(fusedRmsNorm));
  m.impl("_fused_rms_norm_backward", TORCH_FN(fusedRmsNormBackward));
}

}  // namespace pto::torch_glue
