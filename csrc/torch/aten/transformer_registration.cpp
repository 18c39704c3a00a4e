// Registers transformer.h's kernels for the aten ops they implement on pto.
#include <torch/library.h>

#include "transformer.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_native_multi_head_attention", TORCH_FN(nativeMultiHeadAttention));
  m.impl("_transformer_encoder_layer_fwd", TORCH_FN(transformerEncoderLayer));
  m.impl("_fused_sdp_choice", TORCH_FN(fusedSdpChoice));
}

}  // namespace pto::torch_glue
