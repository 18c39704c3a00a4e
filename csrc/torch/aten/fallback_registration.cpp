// Registers the global CPU fallback (fallback.h) for every aten op pto has no kernel for.
#include <torch/library.h>

#include "fallback.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpuFallback>());
}

// Composite kernels that name the devices they run on ("mode only supports CPU,
// CUDA and XPU") or call a CPU/CUDA DispatchStub themselves (conj_physical_, which
// resolve_conj and svd's out= of a complex input reach: "DispatchStub: missing kernel
// for pto"): on pto they take the fallback too, which runs the CPU's.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mode.values", torch::CppFunction::makeFromBoxedFunction<&cpuFallback>());
  m.impl("conj_physical_", torch::CppFunction::makeFromBoxedFunction<&cpuFallback>());
}

}  // namespace pto::torch_glue
