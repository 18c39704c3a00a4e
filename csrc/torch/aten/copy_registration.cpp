// Registers copy.h's kernels for the aten ops they implement on pto, and the
// assertions that read one element on the host.
#include <ATen/ops/_assert_async_native.h>
#include <torch/library.h>

#include "copy.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copyFrom));
  m.impl("_copy_from_and_resize", TORCH_FN(copyFromAndResize));
  m.impl("_local_scalar_dense", TORCH_FN(localScalarDense));
  // torch._assert_async (multinomial's and torch.compile's checks): PyTorch's CPU
  // kernels are device-generic, reading the element through _local_scalar_dense (a
  // sync: the check raises at the call, with the CPU's messages, where CUDA's device
  // assert fails later).
  m.impl("_assert_async", TORCH_FN(at::native::_assert_async_cpu));
  m.impl("_assert_async.msg", TORCH_FN(at::native::_assert_async_msg_cpu));
}

// _copy_from resolves the conjugate and negative bits itself (copy.cpp), as CPU's
// and CUDA's copy_ do. The math-bit fallbacks would resolve them with a clone, and a
// clone is a copy_ that comes back to _copy_from, for ever. Only backends outside
// aten's own copy_ (pto here) call _copy_from.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace pto::torch_glue
