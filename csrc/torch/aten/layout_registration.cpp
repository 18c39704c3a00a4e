// Registers layout.h's kernels for the aten ops they implement on pto.
#include <ATen/Operators.h>
#include <torch/library.h>

#include "layout.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("flip", TORCH_FN(flip));
  m.impl("roll", TORCH_FN(roll));
  m.impl("channel_shuffle", TORCH_FN(channelShuffle));
  m.impl("narrow_copy", TORCH_FN(narrowCopy));
  m.impl("narrow_copy.out", TORCH_FN(narrowCopyOut));
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

}  // namespace pto::torch_glue
