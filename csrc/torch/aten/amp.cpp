#include "amp.h"

#include <c10/core/DeviceGuard.h>

#include <vector>

namespace pto::torch_glue {
namespace {

// GradScaler's bookkeeping tensors: one element of `dtype`, on pto.
void checkOneElement(const char* op, const char* name, const at::Tensor& t, at::ScalarType dtype) {
  TORCH_CHECK(t.device().is_privateuseone(), op, ": ", name, " must be a pto tensor, got one on ", t.device());
  TORCH_CHECK(t.numel() == 1, op, ": ", name, " must be a 1-element tensor, got shape ", t.sizes());
  TORCH_CHECK(t.scalar_type() == dtype, op, ": ", name, " must be a ", dtype, " tensor, got ", t.scalar_type());
}

}  // namespace

void ampForeachNonFiniteCheckAndUnscale(at::TensorList scaled_grads, at::Tensor& found_inf,
                                        const at::Tensor& inv_scale) {
  constexpr const char* kOp = "_amp_foreach_non_finite_check_and_unscale_";
  if (scaled_grads.empty()) return;
  checkOneElement(kOp, "found_inf", found_inf, at::kFloat);
  checkOneElement(kOp, "inv_scale", inv_scale, at::kFloat);
  c10::DeviceGuard guard(found_inf.device());
  // Per gradient, the sum of its elements times 0: 0 when all are finite, nan as soon
  // as one is inf or nan (inf * 0 is nan, and nan survives a sum). Two passes where
  // isfinite().all() takes six, and a sum of zeros cannot overflow as the sum of the
  // gradient itself could.
  std::vector<at::Tensor> zero_sums;
  zero_sums.reserve(scaled_grads.size());
  for (const at::Tensor& grad : scaled_grads) {
    TORCH_CHECK(grad.device() == found_inf.device(), kOp, ": every gradient must be on ", found_inf.device(),
                " with found_inf, got one on ", grad.device());
    TORCH_CHECK(grad.layout() == at::kStrided, kOp, ": gradients must be strided, got ", grad.layout());
    TORCH_CHECK(at::isFloatingType(grad.scalar_type()), kOp, ": gradients must be floating point, got ",
                grad.scalar_type(), " of shape ", grad.sizes());
    zero_sums.push_back(at::mul(grad, 0).sum(at::kFloat));
    // A product by 1 leaves every value as it was, inf and nan too: no need to ask
    // the device whether inv_scale is 1 as the CPU kernel does.
    grad.mul_(inv_scale);
  }
  const at::Tensor found = at::logical_not(at::isfinite(at::stack(zero_sums)).all());
  found_inf.masked_fill_(found.reshape(found_inf.sizes()), 1.0);
}

at::Tensor& ampUpdateScale(at::Tensor& scale, at::Tensor& growth_tracker, const at::Tensor& found_inf,
                           double growth_factor, double backoff_factor, int64_t growth_interval) {
  constexpr const char* kOp = "_amp_update_scale_";
  checkOneElement(kOp, "scale", scale, at::kFloat);
  checkOneElement(kOp, "growth_tracker", growth_tracker, at::kInt);
  checkOneElement(kOp, "found_inf", found_inf, at::kFloat);
  TORCH_CHECK(scale.device() == growth_tracker.device() && scale.device() == found_inf.device(), kOp,
              ": scale, growth_tracker and found_inf must be on one device, got ", scale.device(), ", ",
              growth_tracker.device(), " and ", found_inf.device());
  c10::DeviceGuard guard(scale.device());
  const at::Tensor found = at::ne(found_inf, 0);
  const at::Tensor clean_steps = at::add(growth_tracker, 1);
  const at::Tensor grow = at::logical_and(at::logical_not(found), at::eq(clean_steps, growth_interval));
  const at::Tensor grown = at::mul(scale, growth_factor);
  const at::Tensor grown_if_finite = at::where(at::isfinite(grown), grown, scale);
  const at::Tensor new_scale =
      at::where(found, at::mul(scale, backoff_factor), at::where(grow, grown_if_finite, scale));
  const at::Tensor new_tracker = at::where(at::logical_or(found, grow), at::zeros_like(growth_tracker), clean_steps);
  scale.copy_(new_scale);
  growth_tracker.copy_(new_tracker);
  return scale;
}

}  // namespace pto::torch_glue
