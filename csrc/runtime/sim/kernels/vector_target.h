// Which vector instruction set the sim driver's kernels run with. Each kernel file
// is compiled once per Highway target (x86: SSE4, AVX2, AVX-512; aarch64: NEON; plus
// the static baseline) and dispatches at run time to the best one the host has,
// unless PTO_SIM_VECTOR_ISA caps it (so an AVX-512 host can measure the AVX2 path).
//
// The pattern of a kernel file (elementwise_unary.cpp is the model):
//   #define HWY_TARGET_INCLUDE "runtime/sim/kernels/<file>.cpp"
//   #include <hwy/foreach_target.h>
//   #include <hwy/highway.h>
//   ... headers shared by every target (baseline code, inlined into the targets) ...
//   HWY_BEFORE_NAMESPACE();
//   namespace pto::rt::sim::kernels::HWY_NAMESPACE { every template and inline
//     function compiled with the target's flags, entry points such as
//     void unaryKernel(const isa::Instruction&, std::span<void* const>) }
//   HWY_AFTER_NAMESPACE();
//   #if HWY_ONCE  HWY_EXPORT(unaryKernel); executeUnary() calls
//     HWY_DYNAMIC_DISPATCH(unaryKernel)(...)  #endif
// Anything compiled with a target's flags must live in HWY_NAMESPACE: a function
// or template of one name built for AVX-512 in one target and SSE4 in another is an
// ODR violation, and the linker may keep the AVX-512 copy for every host
// (tests/python/test_vector_dispatch.py checks the library for it).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace pto::rt::sim::kernels {

// The caps PTO_SIM_VECTOR_ISA names, narrowest first. kScalar leaves the static
// baseline target only (x86-64's SSE2, as the compiler uses it; no run-time choice).
enum class VectorIsa { kScalar, kSse4, kAvx2, kAvx512 };

// "scalar", "sse4", "avx2", "avx512"; nullopt for anything else.
std::optional<VectorIsa> parseVectorIsa(std::string_view name);

// Restricts every kernel's dispatch to targets no wider than `cap` (the process's
// Highway dispatch, shared by all devices). Kernels not yet run pick it up on
// their next call, so set it before the first launch.
void capVectorIsa(VectorIsa cap);

// The vector ISA the kernels dispatch to now, as ptoVectorIsa (pto_runtime.h).
int64_t chosenVectorIsa();

}  // namespace pto::rt::sim::kernels
