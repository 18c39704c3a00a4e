// Reordering elements on pto without arithmetic: flip is one tmov reading its input
// backwards (negative strides), roll two tmovs per rolled dimension between slices,
// reflection and replication padding one gather (index_select) per padded dimension
// (their gradients one index_add each).
#pragma once

#include <ATen/ATen.h>

#include "../dtype_map.h"
#include "composite.h"
#include "fallback.h"

namespace pto::torch_glue {

at::Tensor flip(const at::Tensor& self, at::IntArrayRef dims);
at::Tensor roll(const at::Tensor& self, at::IntArrayRef shifts, at::IntArrayRef dims);

// narrow_copy with the checks and messages of the CPU's kernel (CUDA's, a narrow then
// a clone, raises others): the dim, then start, then start + length; out= takes the
// copy through its own view (the CPU's kernel writes a strided out as if contiguous).
at::Tensor narrowCopy(const at::Tensor& self, int64_t dim, c10::SymInt start, c10::SymInt length);
at::Tensor& narrowCopyOut(const at::Tensor& self, int64_t dim, c10::SymInt start, c10::SymInt length,
                          at::Tensor& out);

// channel_shuffle as the CPU's: the channels, as groups x (C / groups), transposed;
// the result in the input's suggested memory format.
at::Tensor channelShuffle(const at::Tensor& self, c10::SymInt groups);

enum class PadMode { kReflect, kReplicate };

// The input position each output position of a padded dimension reads.
at::Tensor padSources(PadMode mode, int64_t size, int64_t before, int64_t after, const at::Device& device);

// PyTorch's padding list names the last dimension first: (left, right, top, bottom, ...).
// Results take the input's suggested memory format (channels_last in, channels_last
// out), as the CPU's kernels do; torch's meta kernels for padding do not.
template <PadMode mode, int spatial>
struct Pad {
  static at::Tensor forward(const at::Tensor& self, at::IntArrayRef padding) {
    at::Tensor result = self;
    for (int i = 0; i < spatial; ++i) {
      const int64_t dim = self.dim() - 1 - i;
      result = at::index_select(result, dim, padSources(mode, self.size(dim), padding[2 * i], padding[2 * i + 1],
                                                        self.device()));
    }
    return result.contiguous(self.suggest_memory_format());
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
    return result.contiguous(self.suggest_memory_format());
  }

  template <class Op>
  static at::Tensor& backwardOut(const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef padding,
                                 at::Tensor& grad_input) {
    at::Tensor value = backward(grad, self, padding);
    at::native::resize_output(grad_input, value.sizes());
    return grad_input.copy_(value);
  }
};

}  // namespace pto::torch_glue
