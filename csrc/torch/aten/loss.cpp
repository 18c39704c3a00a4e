#include "loss.h"

#include <ATen/core/Reduction.h>

#include "composite.h"

namespace pto::torch_glue {
namespace {

at::Tensor reduced(const at::Tensor& losses, int64_t reduction) {
  if (reduction == at::Reduction::Mean) return losses.mean();
  if (reduction == at::Reduction::Sum) return losses.sum();
  return losses;
}

// The gradient's scale: 1/n for a mean reduction.
double meanScale(const at::Tensor& self, int64_t reduction) {
  return reduction == at::Reduction::Mean ? 1.0 / static_cast<double>(self.numel()) : 1.0;
}

// Huber's loss, quadratic within `delta` of the target and linear beyond; smooth L1
// is it divided by beta (beta == 0: plain L1).
at::Tensor huberLosses(const at::Tensor& self, const at::Tensor& target, double delta, bool smooth_l1) {
  const at::Tensor z = at::sub(widened(self), widened(target)).abs_();
  if (smooth_l1 && delta == 0) return z;
  const at::Tensor quadratic = smooth_l1 ? at::mul(z, z).mul_(0.5 / delta) : at::mul(z, z).mul_(0.5);
  const at::Tensor linear = smooth_l1 ? at::sub(z, 0.5 * delta) : at::sub(z, 0.5 * delta).mul_(delta);
  return at::where(at::lt(z, delta), quadratic, linear);
}

// d loss / d self: (self - target) inside, +-1 (Huber: +-delta) outside, per element.
at::Tensor huberGradient(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                         double delta, bool smooth_l1) {
  const at::Tensor x = at::sub(widened(self), widened(target));
  const double outside = smooth_l1 ? 1.0 : delta;
  const at::Tensor slope = smooth_l1 && delta == 0  // plain L1
                               ? at::sign(x)
                               : at::where(at::lt(x, -delta), -outside,
                                           at::where(at::gt(x, delta), outside, smooth_l1 ? at::div(x, delta) : x));
  return at::mul(slope, widened(grad)).mul_(meanScale(self, reduction)).to(self.scalar_type());
}

}  // namespace

at::Tensor mseLoss(const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
  const at::Tensor difference = at::sub(self, target);
  return reduced(at::mul(difference, difference), reduction);
}

at::Tensor& mseLossOut(const at::Tensor& self, const at::Tensor& target, int64_t reduction, at::Tensor& out) {
  return assign(out, mseLoss(self, target, reduction));
}

at::Tensor mseLossBackward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                           int64_t reduction) {
  return at::mul(at::sub(self, target), grad).mul_(2.0 * meanScale(self, reduction));
}

at::Tensor& mseLossBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                               int64_t reduction, at::Tensor& grad_input) {
  return assign(grad_input, mseLossBackward(grad, self, target, reduction));
}

at::Tensor smoothL1Loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double beta) {
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  return reduced(huberLosses(self, target, beta, true), reduction).to(self.scalar_type());
}

at::Tensor& smoothL1LossOut(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double beta,
                            at::Tensor& out) {
  return assign(out, smoothL1Loss(self, target, reduction, beta));
}

at::Tensor smoothL1LossBackward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                int64_t reduction, double beta) {
  return huberGradient(grad, self, target, reduction, beta, true);
}

at::Tensor& smoothL1LossBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                    int64_t reduction, double beta, at::Tensor& grad_input) {
  return assign(grad_input, smoothL1LossBackward(grad, self, target, reduction, beta));
}

at::Tensor huberLoss(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double delta) {
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  return reduced(huberLosses(self, target, delta, false), reduction).to(self.scalar_type());
}

at::Tensor& huberLossOut(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double delta,
                         at::Tensor& out) {
  return assign(out, huberLoss(self, target, reduction, delta));
}

at::Tensor huberLossBackward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                             int64_t reduction, double delta) {
  return huberGradient(grad, self, target, reduction, delta, false);
}

at::Tensor& huberLossBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                 int64_t reduction, double delta, at::Tensor& grad_input) {
  return assign(grad_input, huberLossBackward(grad, self, target, reduction, delta));
}

// -w (y log x + (1 - y) log(1 - x)), each log clamped at -100 as PyTorch does. Like the
// CPU kernel it checks that inputs are probabilities, which takes a sync.
at::Tensor binaryCrossEntropy(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
                              int64_t reduction) {
  const at::Tensor x = widened(self), y = widened(target);
  TORCH_CHECK(self.numel() == 0 || at::logical_and(at::ge(x, 0), at::le(x, 1)).all().item<bool>(),
              "all elements of input should be between 0 and 1");
  const at::Tensor log_x = at::log(x).clamp_min_(-100), log_1mx = at::log1p(at::neg(x)).clamp_min_(-100);
  at::Tensor losses = at::add(at::mul(y, log_x), at::mul(at::rsub(y, 1), log_1mx)).neg_();
  if (weight.has_value() && weight->defined()) losses = at::mul(losses, widened(*weight));
  return reduced(losses, reduction).to(self.scalar_type());
}

at::Tensor& binaryCrossEntropyOut(const at::Tensor& self, const at::Tensor& target,
                                  const std::optional<at::Tensor>& weight, int64_t reduction, at::Tensor& out) {
  return assign(out, binaryCrossEntropy(self, target, weight, reduction));
}

// w (x - y) / max(x (1 - x), 1e-12), times the incoming gradient.
at::Tensor binaryCrossEntropyBackward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                      const std::optional<at::Tensor>& weight, int64_t reduction) {
  const at::Tensor x = widened(self);
  const at::Tensor denominator = at::mul(x, at::rsub(x, 1)).clamp_min_(1e-12);
  at::Tensor gradient = at::div(at::sub(x, widened(target)), denominator).mul_(widened(grad));
  if (weight.has_value() && weight->defined()) gradient = at::mul(gradient, widened(*weight));
  return gradient.mul_(meanScale(self, reduction)).to(self.scalar_type());
}

at::Tensor& binaryCrossEntropyBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                          const std::optional<at::Tensor>& weight, int64_t reduction,
                                          at::Tensor& grad_input) {
  return assign(grad_input, binaryCrossEntropyBackward(grad, self, target, weight, reduction));
}

}  // namespace pto::torch_glue
