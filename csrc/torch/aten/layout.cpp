#include "layout.h"

#include <ATen/ATen.h>
#include <ATen/Operators.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/Resize.h>

#include <algorithm>
#include <vector>

#include "instruction_launch.h"

namespace pto::torch_glue {
namespace {

bool movable(const at::Tensor& self) {
  return accepts(isa::Opcode::kMove, self.scalar_type()) && self.dim() <= isa::kMaxRank;
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

}  // namespace

at::Tensor flip(const at::Tensor& self, at::IntArrayRef dims) {
  if (!movable(self)) return Fallback<ATEN_OP(flip)>::call(self, dims);
  const auto reversed = at::dim_list_to_bitset(dims, self.dim());  // PyTorch's checks and messages
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Preserve);
  if (self.numel() > 0) launchReversedMove(out, self, std::bitset<isa::kMaxRank>(reversed.to_ullong()));
  return out;
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

// The input position each output position of a padded dimension reads.
at::Tensor padSources(PadMode mode, int64_t size, int64_t before, int64_t after, const at::Device& device) {
  std::vector<int64_t> sources;
  for (int64_t i = -before; i < size + after; ++i) {
    int64_t j = i;
    if (mode == PadMode::kReplicate) j = std::clamp<int64_t>(i, 0, size - 1);
    else if (i < 0) j = -i;
    else if (i >= size) j = 2 * (size - 1) - i;
    sources.push_back(j);
  }
  return at::tensor(sources, at::kLong).to(device);
}

at::Tensor channelShuffle(const at::Tensor& self, c10::SymInt groups_symbolic) {
  const int64_t groups = groups_symbolic.expect_int();
  TORCH_CHECK(self.dim() > 2, "channel_shuffle expects input with > 2 dims, but got input with sizes ", self.sizes());
  TORCH_CHECK(groups > 0, "Number of groups to divide channels in must be positive. Value of groups:", groups);
  const int64_t channels = self.size(1);
  TORCH_CHECK(channels % groups == 0, "Number of channels must be divisible by groups. Got ", channels,
              " channels and ", groups, " groups.");
  if (self.numel() == 0) return self.clone();
  std::vector<int64_t> grouped{self.size(0), groups, channels / groups};
  grouped.insert(grouped.end(), self.sizes().begin() + 2, self.sizes().end());
  return self.reshape(grouped).transpose(1, 2).reshape(self.sizes()).contiguous(self.suggest_memory_format());
}

at::Tensor narrowCopy(const at::Tensor& self, int64_t dim, c10::SymInt start_symbolic, c10::SymInt length) {
  TORCH_CHECK(self.dim() > 0, "narrow() cannot be applied to a 0-dim tensor.");
  const auto self_sizes = self.sizes();  // the name the CPU's message shows
  if (dim < 0) {
    dim = at::maybe_wrap_dim(dim, static_cast<int64_t>(self_sizes.size()));
  } else {
    TORCH_CHECK(dim < static_cast<int64_t>(self_sizes.size()));
  }
  const int64_t size = self_sizes[dim], count = length.expect_int();
  int64_t start = start_symbolic.expect_int();
  TORCH_CHECK_INDEX(-size <= start && start <= size, "start out of range (expected to be in range of [", -size, ", ",
                    size, "], but got ", start, ")");
  if (start < 0) start += size;
  TORCH_CHECK(count >= 0 && start <= size - count, "start (", start, ") + length (", count,
              ") exceeds dimension size (", size, ").");
  return self.narrow(dim, start, count).clone(at::MemoryFormat::Contiguous);
}

at::Tensor& narrowCopyOut(const at::Tensor& self, int64_t dim, c10::SymInt start, c10::SymInt length,
                          at::Tensor& out) {
  TORCH_CHECK(self.dim() > 0, "narrow() cannot be applied to a 0-dim tensor.");
  const at::Tensor& output = out;  // the name the CPU's message shows
  TORCH_CHECK(self.dtype() == output.dtype());
  const at::Tensor value = narrowCopy(self, dim, std::move(start), std::move(length));
  out.resize_(value.sizes());  // silently, as the CPU's kernel
  return out.copy_(value);
}

}  // namespace pto::torch_glue
