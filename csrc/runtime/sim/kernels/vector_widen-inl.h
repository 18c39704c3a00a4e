// float16/bfloat16 runs widened to float32, and float32 runs rounded back, a
// vector at a time, bit-exact with element_types.h's widenRun/narrowRun (which do
// the tails, and the targets without exact vector conversions):
//  - bfloat16 widens by a shift on every target; it is rounded to nearest even
//    here (Highway 1.0's DemoteTo truncates);
//  - float16 converts with F16C's instructions (round to nearest even) on AVX2
//    and AVX-512; elsewhere with the scalar conversions (Highway 1.0's emulated
//    float16 promotion turns infinities into finite values).
//
// Compiled once per Highway target: include it after <hwy/highway.h> in a kernel
// file that follows vector_target.h's pattern; the guard below lets each target's
// pass of foreach_target include it again.
#if defined(PTO_SIM_KERNELS_VECTOR_WIDEN_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PTO_SIM_KERNELS_VECTOR_WIDEN_INL_H_
#undef PTO_SIM_KERNELS_VECTOR_WIDEN_INL_H_
#else
#define PTO_SIM_KERNELS_VECTOR_WIDEN_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "element_types.h"

HWY_BEFORE_NAMESPACE();
namespace pto::rt::sim::kernels::HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

// Whether this target converts T to and from float32 exactly a vector at a time.
template <typename T>
constexpr bool kVectorConverts =
    std::is_same_v<T, BFloat16> || (std::is_same_v<T, Half> && (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3));

// Highway's lane type for T.
template <typename T>
using HwyHalf = std::conditional_t<std::is_same_v<T, Half>, hwy::float16_t, hwy::bfloat16_t>;

// The vector of floats at p: a load, widened where T is a 16-bit float (a type
// kVectorConverts names).
template <typename T, class D>
HWY_INLINE hn::Vec<D> loadAsFloat(D df, const T* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<T, float>) {
    return hn::LoadU(df, p);
  } else {
    static_assert(kVectorConverts<T>, "no exact vector widening of T on this target");
    return hn::PromoteTo(df, hn::LoadU(hn::Rebind<HwyHalf<T>, D>(), reinterpret_cast<const HwyHalf<T>*>(p)));
  }
}

// out[i] = in[i] widened to float, for i in [0, count).
template <typename T>
inline void widenToFloat(float* HWY_RESTRICT out, const T* HWY_RESTRICT in, int64_t count) {
  int64_t i = 0;
  if constexpr (kVectorConverts<T>) {
    const hn::ScalableTag<float> df;
    const auto lanes = static_cast<int64_t>(hn::Lanes(df));
    for (; i + lanes <= count; i += lanes) hn::StoreU(loadAsFloat(df, in + i), df, out + i);
  }
  widenRun(out + i, in + i, count - i);
}

// out[i] = in[i] rounded to T (to nearest even), for i in [0, count).
template <typename T>
inline void roundFromFloat(T* HWY_RESTRICT out, const float* HWY_RESTRICT in, int64_t count) {
  int64_t i = 0;
  if constexpr (kVectorConverts<T>) {
    const hn::ScalableTag<float> df;
    const hn::Rebind<HwyHalf<T>, decltype(df)> dh;
    const auto lanes = static_cast<int64_t>(hn::Lanes(df));
    auto* halves = reinterpret_cast<HwyHalf<T>*>(out);
    for (; i + lanes <= count; i += lanes) {
      const auto v = hn::LoadU(df, in + i);
      if constexpr (std::is_same_v<T, Half>) {
        hn::StoreU(hn::DemoteTo(dh, v), dh, halves + i);
      } else {  // half.h's toBFloat16: add 0x7fff and the kept part's lowest bit; a NaN keeps its sign, made quiet
        const hn::RebindToUnsigned<decltype(df)> du;
        const hn::RebindToSigned<decltype(df)> di;
        const hn::Rebind<uint16_t, decltype(df)> du16;
        const auto bits = hn::BitCast(du, v);
        const auto high = hn::ShiftRight<16>(bits);
        const auto rounded = hn::ShiftRight<16>(hn::Add(bits, hn::Add(hn::Set(du, 0x7fff), hn::And(high, hn::Set(du, 1)))));
        const auto result = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), hn::Or(high, hn::Set(du, 0x40)), rounded);
        hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di, result)), du16, reinterpret_cast<uint16_t*>(halves + i));
      }
    }
  }
  narrowRun(out + i, in + i, count - i);
}

// A float16/bfloat16 row of n computed in float32 a block at a time: fill(block,
// start, count) leaves the float results of elements [start, start + count) in block,
// which are rounded to out.
template <typename T, class Fill>
inline void roundedByBlocks(T* HWY_RESTRICT out, int64_t n, Fill&& fill) {
  HWY_ALIGN float block[kBlockElements];
  for (int64_t start = 0; start < n; start += kBlockElements) {
    const int64_t count = std::min<int64_t>(kBlockElements, n - start);
    fill(block, start, count);
    roundFromFloat(out + start, block, count);
  }
}

}  // namespace pto::rt::sim::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // PTO_SIM_KERNELS_VECTOR_WIDEN_INL_H_
