// Autocast on pto: the cast policies CUDA's autocast applies, registered for the
// AutocastPrivateUse1 key from torch's shared op lists (ATen/autocast_mode.h), so a
// model under torch.autocast("pto") computes in the same dtypes as under
// torch.autocast("cuda"). Ops on no list fall through to the pto kernels unchanged.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace pto::torch_glue {
namespace {

using at::Tensor;
using at::ScalarType;
using at::IntArrayRef;
using c10::Scalar;

// CUDA bans binary_cross_entropy under autocast: its input is usually a sigmoid's
// output, which in float16 saturates to exactly 0 or 1 and makes the log infinite.
Tensor binaryCrossEntropyBanned(const Tensor&, const Tensor&, const std::optional<Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast on pto, "
              "as on cuda. Combine the sigmoid before it with the loss: "
              "torch.nn.functional.binary_cross_entropy_with_logits or torch.nn.BCEWithLogitsLoss are safe to "
              "autocast.");
}

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

#define PTO_AUTOCAST_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define PTO_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define PTO_AUTOCAST_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define PTO_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(PTO_AUTOCAST_LOWER_PRECISION_FP)
  AT_FORALL_FP32(PTO_AUTOCAST_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(PTO_AUTOCAST_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(PTO_AUTOCAST_PROMOTE)
  m.impl("binary_cross_entropy", TORCH_FN(binaryCrossEntropyBanned));
}

}  // namespace
}  // namespace pto::torch_glue
