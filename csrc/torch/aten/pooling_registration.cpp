// Registers pooling.h's kernels for the aten ops they implement on pto.
#include <torch/library.h>

#include "pooling.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max_pool2d_with_indices", TORCH_FN(maxPool));
  m.impl("max_pool2d_with_indices.out", TORCH_FN(maxPoolOut));
  m.impl("max_pool2d_with_indices_backward", TORCH_FN(maxPoolBackward));
  m.impl("max_pool2d_with_indices_backward.grad_input", TORCH_FN(maxPoolBackwardOut));
  m.impl("avg_pool2d", TORCH_FN(avgPool));
  m.impl("avg_pool2d.out", TORCH_FN(avgPoolOut));
  m.impl("avg_pool2d_backward", TORCH_FN(avgPoolBackward));
  m.impl("avg_pool2d_backward.grad_input", TORCH_FN(avgPoolBackwardOut));
  m.impl("_adaptive_avg_pool2d", TORCH_FN(adaptiveAvgPool));
  m.impl("_adaptive_avg_pool2d_backward", TORCH_FN(adaptiveAvgPoolBackward));
  m.impl("upsample_nearest2d", TORCH_FN(upsampleNearest));
  m.impl("upsample_nearest2d.out", TORCH_FN(upsampleNearestOut));
  m.impl("upsample_nearest2d_backward", TORCH_FN(upsampleNearestBackward));
  m.impl("upsample_bilinear2d", TORCH_FN(upsampleBilinear));
  m.impl("upsample_bilinear2d.out", TORCH_FN(upsampleBilinearOut));
  m.impl("upsample_bilinear2d_backward", TORCH_FN(upsampleBilinearBackward));
  m.impl("grid_sampler_2d", TORCH_FN(gridSampler2d));
  m.impl("grid_sampler_3d", TORCH_FN(gridSampler3d));
  m.impl("grid_sampler_2d_backward", TORCH_FN(gridSampler2dBackward));
  m.impl("grid_sampler_3d_backward", TORCH_FN(gridSampler3dBackward));
}

}  // namespace pto::torch_glue
