// The maximum or minimum of a contiguous float32 run and whether it holds a NaN,
// with vector max/min instructions where the host has them (compilers do not
// vectorise a NaN-aware max), and a scalar twin. Softmax's first pass and the
// amax/amin reductions over rows use it.
#pragma once

#include <cstdint>
#include <limits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace pto::rt::sim::kernels {

template <bool kMax>
float runExtreme(const float* in, int64_t length, bool* nan) {
  int64_t i = 0;
  float extreme = kMax ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  bool unordered = false;
#if defined(__AVX512F__)
  __m512 extrema = _mm512_set1_ps(extreme);
  __mmask16 nans = 0;
  for (; i + 16 <= length; i += 16) {
    const __m512 v = _mm512_loadu_ps(in + i);
    nans |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    extrema = kMax ? _mm512_max_ps(extrema, v) : _mm512_min_ps(extrema, v);
  }
  extreme = kMax ? _mm512_reduce_max_ps(extrema) : _mm512_reduce_min_ps(extrema);
  unordered = nans != 0;
#elif defined(__AVX2__)
  __m256 extrema = _mm256_set1_ps(extreme), nans = _mm256_setzero_ps();
  for (; i + 8 <= length; i += 8) {
    const __m256 v = _mm256_loadu_ps(in + i);
    nans = _mm256_or_ps(nans, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    extrema = kMax ? _mm256_max_ps(extrema, v) : _mm256_min_ps(extrema, v);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, extrema);
  for (float lane : lanes) extreme = (kMax ? lane > extreme : lane < extreme) ? lane : extreme;
  unordered = _mm256_movemask_ps(nans) != 0;
#endif
  for (; i < length; ++i) {
    unordered |= in[i] != in[i];
    extreme = (kMax ? in[i] > extreme : in[i] < extreme) ? in[i] : extreme;
  }
  *nan = unordered;
  return extreme;
}

}  // namespace pto::rt::sim::kernels
