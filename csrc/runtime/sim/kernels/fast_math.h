// Branch-free float32 exp, log, sin/cos and the normal CDF the compiler can vectorise
// (std::exp is an opaque libm call per element). Cephes' polynomial on r = x - n ln2, |r| <= ln2/2,
// scaled by 2^n in two steps so that results down to the subnormals are right;
// within 2 ulp of the correctly rounded result. NaN, +-inf and overflow follow expf.
#pragma once

#include <cstdint>
#include <cstring>

namespace pto::rt::sim::kernels {

inline float exp2Int(int32_t n) {  // 2^n for n in [-126, 127]
  const uint32_t bits = static_cast<uint32_t>(n + 127) << 23;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline float fastExp(float x) {
  constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  const float clamped = x > 88.8f ? 88.8f : (x < -104.0f ? -104.0f : x);
  const float n = __builtin_floorf(clamped * kLog2e + 0.5f);
  const float r = (clamped - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float poly = p * r * r + r + 1.0f;
  const int32_t k = static_cast<int32_t>(n);
  const int32_t half = k / 2;  // two factors, each a normal power of two
  const float result = poly * exp2Int(half) * exp2Int(k - half);
  return x != x ? x : (x > 88.72283905206835f ? __builtin_inff() : (x < -103.972077f ? 0.0f : result));
}

// tanh(x), Cephes' tanhf: an odd polynomial below |x| = 0.625, where 1 - 2/(e^2x + 1)
// would cancel, and that form (with fastExp) above it. Within 2 ulp of the correctly
// rounded result; saturates to +-1 and keeps NaN.
inline float fastTanh(float x) {
  const float a = x < 0 ? -x : x;
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float large = 1.0f - 2.0f / (fastExp(a + a) + 1.0f);
  return a < 0.625f ? small : (x < 0 ? -large : large);
}

// erfc(a) for a >= 0, Numerical Recipes' Chebyshev fit: relative error below
// 1.2e-7 everywhere, so 1 - erfc is fine wherever an absolute error is (the CDF).
inline float fastErfcNonNegative(float a) {
  const float t = 1.0f / (1.0f + 0.5f * a);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  return t * fastExp(-a * a + p);
}

// The standard normal CDF, 0.5 * (1 + erf(x / sqrt(2))), with its relative error
// bounded on both tails (erfc for x < 0, 1 - erfc/2 for x >= 0): what gelu needs.
inline float fastNormalCdf(float x) {
  const float z = x * 0.70710678118654752440f;
  const float tail = 0.5f * fastErfcNonNegative(z < 0 ? -z : z);
  return x < 0 ? tail : 1.0f - tail;
}

// log(x) for positive, normal, finite x (what Box-Muller takes: uniforms in (0, 1]):
// Cephes' logf, x = m * 2^e with m in [sqrt(1/2), sqrt(2)), a polynomial in m - 1.
// Within 2 ulp of the correctly rounded result.
inline float fastLog(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  int32_t e = static_cast<int32_t>(bits >> 23) - 126;
  bits = (bits & 0x007fffffu) | 0x3f000000u;  // m in [0.5, 1)
  float m;
  std::memcpy(&m, &bits, sizeof m);
  const bool small = m < 0.707106781186547524f;
  e -= small ? 1 : 0;
  const float f = small ? m + m - 1.0f : m - 1.0f;
  const float z = f * f;
  float p = 7.0376836292e-2f;
  p = p * f - 1.1514610310e-1f;
  p = p * f + 1.1676998740e-1f;
  p = p * f - 1.2420140846e-1f;
  p = p * f + 1.4249322787e-1f;
  p = p * f - 1.6668057665e-1f;
  p = p * f + 2.0000714765e-1f;
  p = p * f - 2.4999993993e-1f;
  p = p * f + 3.3333331174e-1f;
  const auto n = static_cast<float>(e);
  float y = p * f * z + n * -2.12194440e-4f - 0.5f * z;
  return f + y + n * 0.693359375f;
}

// sin and cos of 2 pi * turns for turns in [0, 1): reduced exactly to r in
// [-1/8, 1/8] turn around the nearest quarter, Cephes' sinf/cosf polynomials on
// 2 pi r, then the quarter's rotation. Absolute error below 1e-7.
inline void fastSinCosTurns(float turns, float* sine, float* cosine) {
  const float quarter = __builtin_floorf(turns * 4.0f + 0.5f);  // 0 .. 4
  const float x = (turns - quarter * 0.25f) * 6.28318530717958648f;
  const float z = x * x;
  const float s = ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * x + x;
  const float c = ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) * z * z -
                  0.5f * z + 1.0f;
  const int q = static_cast<int>(quarter) & 3;
  *sine = q == 0 ? s : q == 1 ? c : q == 2 ? -s : -c;
  *cosine = q == 0 ? c : q == 1 ? -s : q == 2 ? -c : s;
}

}  // namespace pto::rt::sim::kernels
