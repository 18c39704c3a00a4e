// Vector folds of a contiguous float32 run that compilers do not vectorise on
// their own: the maximum or minimum with a NaN flag (a NaN-aware max is a select
// per element), and the float sum of one cascade block (of float16/bfloat16 runs
// too, widened as they load). Softmax's passes and the amax/amin/sum reductions use
// them.
//
// Compiled once per Highway target: include it after <hwy/highway.h> in a kernel
// file that follows vector_target.h's pattern; the guard below lets each target's
// pass of foreach_target include it again.
#if defined(PTO_SIM_KERNELS_VECTOR_EXTREMA_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PTO_SIM_KERNELS_VECTOR_EXTREMA_H_
#undef PTO_SIM_KERNELS_VECTOR_EXTREMA_H_
#else
#define PTO_SIM_KERNELS_VECTOR_EXTREMA_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "element_types.h"
#include "vector_widen-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pto::rt::sim::kernels::HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

// Lanes where a or b is NaN: one unordered compare of the two on x86 (Highway 1.0
// has no op for it), two IsNaN elsewhere.
template <class D, class V = hn::Vec<D>>
hn::Mask<D> eitherNaN(D d, V a, V b) {
#if HWY_TARGET == HWY_AVX2
  if constexpr (sizeof(hn::TFromD<D>) == 4) return hn::Mask<D>{_mm256_cmp_ps(a.raw, b.raw, _CMP_UNORD_Q)};
#elif HWY_TARGET == HWY_AVX3
  if constexpr (sizeof(hn::TFromD<D>) == 4) return hn::Mask<D>{_mm512_cmp_ps_mask(a.raw, b.raw, _CMP_UNORD_Q)};
#endif
  (void)d;
  return hn::Or(hn::IsNaN(a), hn::IsNaN(b));
}

// The maximum (kMax) or minimum of in[0, length), and in *nan whether any is NaN.
// A run of -inf, or an empty run, gives -inf (+inf for the minimum).
// Four chains of vector max/min hide their latency; NaNs are flagged alongside, one
// compare per two vectors (a vector max returns one operand when the other is NaN, so
// it cannot carry them): rows of 256-1024 floats from L2 (softmax's rows) on one AVX2
// core of an EPYC (Zen 3) 115-122 GB/s, against 104 with two chains and a compare per
// vector; rows from memory are bound by its bandwidth either way.
// (T as for runSum.)
template <bool kMax, typename T>
inline float runExtreme(const T* HWY_RESTRICT in, int64_t length, bool* nan) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  const float start = kMax ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  const auto fold = [](auto a, auto x) { return kMax ? hn::Max(a, x) : hn::Min(a, x); };
  auto extrema0 = hn::Set(d, start), extrema1 = extrema0, extrema2 = extrema0, extrema3 = extrema0;
  auto nans = hn::FirstN(d, 0);  // no lane set
  int64_t i = 0;
  for (; i + 4 * lanes <= length; i += 4 * lanes) {
    const auto v0 = loadAsFloat(d, in + i), v1 = loadAsFloat(d, in + i + lanes);
    const auto v2 = loadAsFloat(d, in + i + 2 * lanes), v3 = loadAsFloat(d, in + i + 3 * lanes);
    nans = hn::Or(nans, hn::Or(eitherNaN(d, v0, v1), eitherNaN(d, v2, v3)));
    extrema0 = fold(extrema0, v0);
    extrema1 = fold(extrema1, v1);
    extrema2 = fold(extrema2, v2);
    extrema3 = fold(extrema3, v3);
  }
  for (; i + lanes <= length; i += lanes) {
    const auto v = loadAsFloat(d, in + i);
    nans = hn::Or(nans, hn::IsNaN(v));
    extrema0 = fold(extrema0, v);
  }
  const auto extrema = fold(fold(extrema0, extrema1), fold(extrema2, extrema3));
  float extreme = hn::GetLane(kMax ? hn::MaxOfLanes(d, extrema) : hn::MinOfLanes(d, extrema));
  bool unordered = !hn::AllFalse(d, nans);
  for (; i < length; ++i) {
    const float x = widen(in[i]);
    unordered |= x != x;
    extreme = (kMax ? x > extreme : x < extreme) ? x : extreme;
  }
  *nan = unordered;
  return extreme;
}

// acc[i] = the maximum (kMax) or minimum of acc[i] and row[r][i], r in [0, rows),
// i in [0, n), a NaN in either kept: input rows folded into the accumulators of an
// amax/amin over columns, four rows per pass over acc so that each accumulator
// vector is loaded and stored once per four rows, not once per row. (T as for runSum.)
template <bool kMax, typename T, typename RowAt>
inline void foldExtremeRows(float* HWY_RESTRICT acc, int64_t n, int64_t rows, RowAt rowAt) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  auto fold = [](auto a, auto x) {
    return hn::IfThenElse(hn::Or(kMax ? hn::Gt(x, a) : hn::Lt(x, a), hn::IsNaN(x)), x, a);
  };
  auto foldOne = [](float& a, float x) {
    if ((kMax ? x > a : x < a) || x != x) a = x;
  };
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const T *in0 = rowAt(r), *in1 = rowAt(r + 1), *in2 = rowAt(r + 2), *in3 = rowAt(r + 3);
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes) {
      auto a = hn::LoadU(d, acc + i);
      a = fold(a, loadAsFloat(d, in0 + i));
      a = fold(a, loadAsFloat(d, in1 + i));
      a = fold(a, loadAsFloat(d, in2 + i));
      hn::StoreU(fold(a, loadAsFloat(d, in3 + i)), d, acc + i);
    }
    for (; i < n; ++i) {
      for (const T* in : {in0, in1, in2, in3}) foldOne(acc[i], widen(in[i]));
    }
  }
  for (; r < rows; ++r) {
    const T* in = rowAt(r);
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes) hn::StoreU(fold(hn::LoadU(d, acc + i), loadAsFloat(d, in + i)), d, acc + i);
    for (; i < n; ++i) foldOne(acc[i], widen(in[i]));
  }
}

// The sum of a contiguous float32 run, cascaded as PyTorch's CPU sum is: each lane
// of four vector accumulators adds at most 16 values before their total moves up into
// a double, so that float partial sums stay small (a float sum's error grows with its
// partials) on every target, 4 lanes wide or 16. A million 0.1f summed with 512 adds
// per lane (4-lane targets, 8192-element blocks) was 1.6 off; this keeps it near 0.01.
// float16/bfloat16 runs are widened as they are loaded (T: float, or a type
// vector_widen-inl.h's kVectorConverts names for this target).
template <typename T>
inline double runSum(const T* HWY_RESTRICT in, int64_t length) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t step = 4 * lanes, chunk = 16 * step;
  double total = 0;
  int64_t i = 0;
  while (i + step <= length) {
    auto sum0 = hn::Zero(d), sum1 = hn::Zero(d), sum2 = hn::Zero(d), sum3 = hn::Zero(d);
    for (const int64_t end = std::min(length, i + chunk); i + step <= end; i += step) {
      sum0 = hn::Add(sum0, loadAsFloat(d, in + i));
      sum1 = hn::Add(sum1, loadAsFloat(d, in + i + lanes));
      sum2 = hn::Add(sum2, loadAsFloat(d, in + i + 2 * lanes));
      sum3 = hn::Add(sum3, loadAsFloat(d, in + i + 3 * lanes));
    }
    total += hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(sum0, sum1), hn::Add(sum2, sum3))));
  }
  for (; i < length; ++i) total += widen(in[i]);
  return total;
}

// sums[i] += in[i] for i in [0, length): one input row folded into column sums
// (T as for runSum).
template <typename T>
inline void addRow(float* HWY_RESTRICT sums, const T* HWY_RESTRICT in, int64_t length) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= length; i += lanes) hn::StoreU(hn::Add(hn::LoadU(d, sums + i), loadAsFloat(d, in + i)), d, sums + i);
  for (; i < length; ++i) sums[i] += widen(in[i]);
}

// addRow of four rows in turn, each sum loaded and stored once for the four: the
// same additions in the same order, so the same sums, with a quarter of the L1
// traffic of the sums.
template <typename T>
inline void addFourRows(float* HWY_RESTRICT sums, const T* in0, const T* in1, const T* in2, const T* in3,
                        int64_t length) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= length; i += lanes) {
    auto sum = hn::Add(hn::LoadU(d, sums + i), loadAsFloat(d, in0 + i));
    sum = hn::Add(sum, loadAsFloat(d, in1 + i));
    sum = hn::Add(sum, loadAsFloat(d, in2 + i));
    hn::StoreU(hn::Add(sum, loadAsFloat(d, in3 + i)), d, sums + i);
  }
  for (; i < length; ++i) sums[i] = sums[i] + widen(in0[i]) + widen(in1[i]) + widen(in2[i]) + widen(in3[i]);
}

}  // namespace pto::rt::sim::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // PTO_SIM_KERNELS_VECTOR_EXTREMA_H_
