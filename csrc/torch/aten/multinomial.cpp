// torch.multinomial with replacement on pto: the device-specific part of PyTorch's own
// multinomial (at::native::multinomial_out, which random_registration.cpp registers
// for pto: its argument checks, and the draws without replacement, are exponential_,
// div and argmax/topk, native here). The CPU kernel's inverse-CDF draw: each row's
// cumulative sums divided by the row's total with the last one set to 1, and for each
// sample the first category whose cumulative value is >= a uniform double in [0, 1).
#include <ATen/ATen.h>

#include "random.h"

namespace pto::torch_glue {
namespace {

// The CPU kernel's checks, in its order: rows one after the other, each element of a
// row checked (NaN fails the first check, as its `val >= 0` does), then the row's sum.
// One host sync where every row is good, as the CPU's loop is on the host.
void checkDistributions(const at::Tensor& rows) {
  const at::Tensor negative = at::logical_not(at::ge(rows, 0));  // NaN too
  const at::Tensor bad = at::logical_or(negative, at::logical_not(at::isfinite(rows)));
  const at::Tensor row_bad = at::logical_or(bad.any(-1), at::le(rows.sum(-1, /*keepdim=*/false, at::kDouble), 0));
  if (!row_bad.any().item<bool>()) return;
  const int64_t row = row_bad.to(at::kInt).argmax().item<int64_t>();
  if (bad[row].any().item<bool>()) {
    const int64_t column = bad[row].to(at::kInt).argmax().item<int64_t>();
    TORCH_CHECK(!negative[row][column].item<bool>(),
                "invalid multinomial distribution (encountering probability entry < 0)");
    TORCH_CHECK(false, "invalid multinomial distribution (encountering probability entry = infinity or NaN)");
  }
  TORCH_CHECK(false, "invalid multinomial distribution (sum of probabilities <= 0)");
}

}  // namespace

void multinomialWithReplacement(at::Tensor& result, const at::Tensor& self, int64_t n_sample,
                                std::optional<at::Generator> generator) {
  const at::Tensor rows = self.dim() == 1 ? self.unsqueeze(0) : self;
  checkDistributions(rows);
  // The CPU kernel sums float16/bfloat16 in float, compares in double.
  const bool reduced = self.scalar_type() == at::kHalf || self.scalar_type() == at::kBFloat16;
  const at::Tensor sums = rows.to(reduced ? at::kFloat : self.scalar_type()).cumsum(-1);
  const int64_t last = sums.size(-1) - 1;
  at::Tensor cumulative = at::div(sums, sums.narrow(-1, last, 1));
  cumulative.narrow(-1, last, 1).fill_(1);
  at::Tensor uniform = at::empty({rows.size(0), n_sample}, rows.options().dtype(at::kDouble));
  uniformInplace(uniform, 0.0, 1.0, generator);
  result.copy_(at::searchsorted(cumulative, uniform).view(result.sizes()));
}

}  // namespace pto::torch_glue
