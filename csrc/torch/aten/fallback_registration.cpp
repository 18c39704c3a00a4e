// Registers the global CPU fallback (fallback.h) for every aten op pto has no kernel for.
#include <torch/library.h>

#include "fallback.h"

namespace pto::backend {

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpuFallback>());
}

}  // namespace pto::backend
