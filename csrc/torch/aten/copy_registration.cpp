// Registers copy.h's kernels for the aten ops they implement on pto.
#include <torch/library.h>

#include "copy.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copyFrom));
  m.impl("_copy_from_and_resize", TORCH_FN(copyFromAndResize));
  m.impl("_local_scalar_dense", TORCH_FN(localScalarDense));
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
