// Reordering elements on pto without arithmetic: flip is one tmov reading its input
// backwards (negative strides), roll two tmovs per rolled dimension between slices.
#include <ATen/ATen.h>
#include <ATen/Operators.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <torch/library.h>

#include "fallback.h"
#include "instruction_launch.h"

namespace pto::backend {
namespace {

bool movable(const at::Tensor& self) {
  return accepts(isa::Opcode::kMove, self.scalar_type()) && self.dim() <= isa::kMaxRank;
}

at::Tensor flip(const at::Tensor& self, at::IntArrayRef dims) {
  if (!movable(self)) return Fallback<ATEN_OP(flip)>::call(self, dims);
  const auto reversed = at::dim_list_to_bitset(dims, self.dim());  // PyTorch's checks and messages
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Preserve);
  if (self.numel() > 0) launchReversedMove(out, self, std::bitset<isa::kMaxRank>(reversed.to_ullong()));
  return out;
}

// out = self rolled by `shift` along `dim`: out[(i + shift) mod n] = self[i].
void rollInto(const at::Tensor& out, const at::Tensor& self, int64_t shift, int64_t dim) {
  const int64_t n = self.size(dim);
  const int64_t s = n == 0 ? 0 : ((shift % n) + n) % n;
  if (s == 0) {
    out.copy_(self);
    return;
  }
  out.narrow(dim, s, n - s).copy_(self.narrow(dim, 0, n - s));
  out.narrow(dim, 0, s).copy_(self.narrow(dim, n - s, s));
}

at::Tensor roll(const at::Tensor& self, at::IntArrayRef shifts, at::IntArrayRef dims) {
  const bool native = movable(self) && !shifts.empty() &&
                      (dims.empty() ? shifts.size() == 1 : shifts.size() == dims.size());
  if (!native) return Fallback<ATEN_OP(roll)>::call(self, shifts, dims);
  if (dims.empty()) {  // the flattened tensor, rolled as one line
    at::Tensor flat = at::empty({self.numel()}, self.options());
    rollInto(flat, self.reshape({-1}), shifts[0], 0);
    return flat.view(self.sizes());
  }
  at::Tensor source = self;
  at::Tensor out;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t dim = at::maybe_wrap_dim(dims[i], self.dim());
    out = at::empty_like(self, at::MemoryFormat::Contiguous);
    rollInto(out, source, shifts[i], dim);
    source = out;
  }
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("flip", TORCH_FN(flip));
  m.impl("roll", TORCH_FN(roll));
}

}  // namespace pto::backend
