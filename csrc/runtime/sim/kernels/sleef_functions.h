// The Sleef functions the kernels call (Debian's libsleef, as PyTorch's CPU kernels
// use). sleef.h declares a vector variant only where the including file is itself
// compiled for its ISA (__AVX2__, __AVX512F__); the kernels are compiled for the
// baseline and choose a target at run time (vector_target.h), so the x86 AVX2 and
// AVX-512 variants they call are declared here. Declarations only: no code is
// compiled for those ISAs in this header.
#pragma once

#include <sleef.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define PTO_SLEEF_DECLARE_ULP(name, ulp)                          \
  __m256 Sleef_##name##f8_##ulp##avx2(__m256);                     \
  __m256d Sleef_##name##d4_##ulp##avx2(__m256d);                   \
  __m512 Sleef_##name##f16_##ulp##avx512f(__m512);                 \
  __m512d Sleef_##name##d8_##ulp##avx512f(__m512d);
#define PTO_SLEEF_DECLARE(name) PTO_SLEEF_DECLARE_ULP(name, u10)
#define PTO_SLEEF_DECLARE_BINARY(name, ulp)                       \
  __m256 Sleef_##name##f8_##ulp##avx2(__m256, __m256);             \
  __m256d Sleef_##name##d4_##ulp##avx2(__m256d, __m256d);          \
  __m512 Sleef_##name##f16_##ulp##avx512f(__m512, __m512);         \
  __m512d Sleef_##name##d8_##ulp##avx512f(__m512d, __m512d);

extern "C" {
PTO_SLEEF_DECLARE(exp)
PTO_SLEEF_DECLARE(exp2)
PTO_SLEEF_DECLARE(expm1)
PTO_SLEEF_DECLARE(log)
PTO_SLEEF_DECLARE(log2)
PTO_SLEEF_DECLARE(log1p)
PTO_SLEEF_DECLARE(sin)
PTO_SLEEF_DECLARE(cos)
PTO_SLEEF_DECLARE(tan)
PTO_SLEEF_DECLARE_ULP(tanh, u35)
PTO_SLEEF_DECLARE(log10)
PTO_SLEEF_DECLARE(asin)
PTO_SLEEF_DECLARE(acos)
PTO_SLEEF_DECLARE(atan)
PTO_SLEEF_DECLARE(sinh)
PTO_SLEEF_DECLARE(cosh)
PTO_SLEEF_DECLARE(asinh)
PTO_SLEEF_DECLARE(acosh)
PTO_SLEEF_DECLARE(atanh)
PTO_SLEEF_DECLARE(lgamma)
PTO_SLEEF_DECLARE_ULP(erfc, u15)
PTO_SLEEF_DECLARE_ULP(sinpi, u05)
PTO_SLEEF_DECLARE_ULP(cospi, u05)
PTO_SLEEF_DECLARE_BINARY(pow, u10)
PTO_SLEEF_DECLARE_BINARY(hypot, u05)
PTO_SLEEF_DECLARE_BINARY(fmod, )  // exact: Sleef names it with no accuracy class
}

#undef PTO_SLEEF_DECLARE
#undef PTO_SLEEF_DECLARE_ULP
#undef PTO_SLEEF_DECLARE_BINARY
#endif  // __x86_64__
