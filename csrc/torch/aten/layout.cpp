// Reordering elements on pto without arithmetic: flip is one tmov reading its input
// backwards (negative strides), roll two tmovs per rolled dimension between slices,
// reflection and replication padding one gather (index_select) per padded dimension
// (their gradients one index_add each).
#include <ATen/ATen.h>
#include <ATen/Operators.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "../dtype_map.h"
#include "composite.h"
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

enum class PadMode { kReflect, kReplicate };

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

// PyTorch's padding list names the last dimension first: (left, right, top, bottom, ...).
template <PadMode mode, int spatial>
struct Pad {
  static at::Tensor forward(const at::Tensor& self, at::IntArrayRef padding) {
    at::Tensor result = self;
    for (int i = 0; i < spatial; ++i) {
      const int64_t dim = self.dim() - 1 - i;
      result = at::index_select(result, dim, padSources(mode, self.size(dim), padding[2 * i], padding[2 * i + 1],
                                                        self.device()));
    }
    return result;
  }

  template <class Op>
  static at::Tensor functional(const at::Tensor& self, at::IntArrayRef padding) {
    const at::Tensor meta = Op::call(metaTwin(self), c10::fromIntArrayRefSlow(padding));  // PyTorch's checks
    if (!accepts(isa::Opcode::kGather, self.scalar_type()) || self.numel() == 0) {
      return Fallback<Op>::call(self, padding);
    }
    return forward(self, padding);
  }

  template <class Op>
  static at::Tensor& out(const at::Tensor& self, at::IntArrayRef padding, at::Tensor& result) {
    at::Tensor value = functional<Op>(self, padding);
    at::native::resize_output(result, value.sizes());
    return result.copy_(value);
  }

  // Each padded dimension's gradient summed back onto the positions it read.
  static at::Tensor backward(const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef padding) {
    at::Tensor result = grad;
    for (int i = spatial - 1; i >= 0; --i) {
      const int64_t dim = self.dim() - 1 - i;
      std::vector<int64_t> shape = result.sizes().vec();
      shape[dim] = self.size(dim);
      result = at::zeros(shape, grad.options()).index_add_(dim, padSources(mode, self.size(dim), padding[2 * i],
                                                                           padding[2 * i + 1], grad.device()), result);
    }
    return result;
  }

  template <class Op>
  static at::Tensor& backwardOut(const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef padding,
                                 at::Tensor& grad_input) {
    at::Tensor value = backward(grad, self, padding);
    at::native::resize_output(grad_input, value.sizes());
    return grad_input.copy_(value);
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("flip", TORCH_FN(flip));
  m.impl("roll", TORCH_FN(roll));
#define PTO_PAD(name, mode, spatial)                                                                  \
  {                                                                                                   \
    using F = Pad<mode, spatial>;                                                                     \
    m.impl(#name, TORCH_FN(F::template functional<ATEN_OP(name)>));                                   \
    m.impl(#name ".out", TORCH_FN(F::template out<ATEN_OP(name)>));                                   \
    m.impl(#name "_backward", TORCH_FN(F::backward));                                                 \
    m.impl(#name "_backward.grad_input", TORCH_FN(F::template backwardOut<ATEN_OP(name)>));           \
  }
  PTO_PAD(reflection_pad1d, PadMode::kReflect, 1)
  PTO_PAD(reflection_pad2d, PadMode::kReflect, 2)
  PTO_PAD(reflection_pad3d, PadMode::kReflect, 3)
  PTO_PAD(replication_pad1d, PadMode::kReplicate, 1)
  PTO_PAD(replication_pad2d, PadMode::kReplicate, 2)
  PTO_PAD(replication_pad3d, PadMode::kReplicate, 3)
#undef PTO_PAD
}

}  // namespace pto::backend
