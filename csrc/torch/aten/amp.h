// GradScaler's two kernels on pto, as short sequences of native ops that stay on the
// device: the check for non-finite gradients and their unscaling, and the update of
// the scale. found_inf, the scale and the growth tracker never go through the host,
// so an optimizer step costs no host sync per parameter (nor any at all here).
#pragma once

#include <ATen/ATen.h>

namespace pto::torch_glue {

// Multiplies every tensor of `scaled_grads` by inv_scale and sets found_inf to 1.0 if
// any of their elements is inf or nan (found_inf is never reset here), as CUDA's
// and CPU's kernels do. found_inf and inv_scale: one-element float32 pto tensors.
void ampForeachNonFiniteCheckAndUnscale(at::TensorList scaled_grads, at::Tensor& found_inf,
                                        const at::Tensor& inv_scale);

// After a step: found_inf set → scale *= backoff_factor, growth_tracker = 0; else the
// tracker counts the step, and at growth_interval clean steps the scale grows by
// growth_factor (kept only if finite) and the tracker restarts. Returns `scale`.
at::Tensor& ampUpdateScale(at::Tensor& scale, at::Tensor& growth_tracker, const at::Tensor& found_inf,
                           double growth_factor, double backoff_factor, int64_t growth_interval);

}  // namespace pto::torch_glue
