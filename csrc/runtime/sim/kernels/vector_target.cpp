#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/sim/kernels/vector_target.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "runtime/pto_runtime.h"
#include "vector_target.h"

HWY_BEFORE_NAMESPACE();
namespace pto::rt::sim::kernels::HWY_NAMESPACE {

// The target this copy was compiled for: what dispatch picked when it runs.
int64_t compiledTarget() { return HWY_TARGET; }

}  // namespace pto::rt::sim::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pto::rt::sim::kernels {

HWY_EXPORT(compiledTarget);

std::optional<VectorIsa> parseVectorIsa(std::string_view name) {
  if (name == "scalar") return VectorIsa::kScalar;
  if (name == "sse4") return VectorIsa::kSse4;
  if (name == "avx2") return VectorIsa::kAvx2;
  if (name == "avx512") return VectorIsa::kAvx512;
  return std::nullopt;
}

void capVectorIsa(VectorIsa cap) {
  // Highway's targets are bits, the better the lower: a cap disables every bit
  // below its own. avx512 caps nothing (it is the widest target compiled).
  int64_t widest_allowed = 0;
  switch (cap) {
    case VectorIsa::kScalar: widest_allowed = HWY_STATIC_TARGET; break;
    case VectorIsa::kSse4: widest_allowed = HWY_SSE4; break;
    case VectorIsa::kAvx2: widest_allowed = HWY_AVX2; break;
    case VectorIsa::kAvx512: return;
  }
  hwy::DisableTargets(widest_allowed - 1);
}

int64_t chosenVectorIsa() {
  switch (HWY_DYNAMIC_DISPATCH(compiledTarget)()) {
    case HWY_AVX3: return PTO_VECTOR_ISA_AVX512;
    case HWY_AVX2: return PTO_VECTOR_ISA_AVX2;
    case HWY_SSE4: return PTO_VECTOR_ISA_SSE4;
    case HWY_NEON: return PTO_VECTOR_ISA_NEON;
    default: return PTO_VECTOR_ISA_SCALAR;
  }
}

}  // namespace pto::rt::sim::kernels
#endif  // HWY_ONCE
