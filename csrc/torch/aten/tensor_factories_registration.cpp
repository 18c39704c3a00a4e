// Which aten ops pto implements natively, and the global CPU fallback for the
// rest. Kernel bodies live in the files named after their concern.
#include <torch/library.h>

#include "convolution.h"
#include "copy.h"
#include "fallback.h"
#include "tensor_factories.h"

namespace pto::backend {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty));
  m.impl("empty_strided", TORCH_FN(emptyStrided));
  m.impl("as_strided", TORCH_FN(asStrided));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(reshapeAlias));
  m.impl("resize_", TORCH_FN(resize));
  m.impl("set_", TORCH_FN(setEmpty));
  m.impl("set_.source_Tensor", TORCH_FN(setTensor));
  m.impl("set_.source_Storage", TORCH_FN(setStorage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(setStorageOffset));
  m.impl("record_stream", TORCH_FN(recordStream));
  m.impl("_copy_from", TORCH_FN(copyFrom));
  m.impl("_copy_from_and_resize", TORCH_FN(copyFromAndResize));
  m.impl("_local_scalar_dense", TORCH_FN(localScalarDense));
  m.impl("convolution_overrideable", TORCH_FN(convolutionOverrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolutionBackwardOverrideable));
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

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpuFallback>());
}

}  // namespace pto::backend
