// Branch-free float32 exp and the normal CDF the compiler can vectorise (std::exp is an opaque
// libm call per element). Cephes' polynomial on r = x - n ln2, |r| <= ln2/2,
// scaled by 2^n in two steps so that results down to the subnormals are right;
// within 2 ulp of the correctly rounded result. NaN, +-inf and overflow follow expf.
#pragma once

#include <cstdint>
#include <cstring>

namespace pto::kernels {

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

}  // namespace pto::kernels
