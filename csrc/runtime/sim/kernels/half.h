// float16 and bfloat16 as storage: conversions to and from float32 with
// round-to-nearest-even, bit-exact with PyTorch's c10::Half and c10::BFloat16.
#pragma once

#include <cstdint>
#include <cstring>

namespace pto::rt::sim::kernels {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

inline uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

inline float bitsFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline float toFloat(BFloat16 value) { return bitsFloat(uint32_t{value.bits} << 16); }

inline BFloat16 toBFloat16(float value) {
  const uint32_t bits = floatBits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return {static_cast<uint16_t>((bits >> 16) | 0x40)};  // NaN stays NaN
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return {static_cast<uint16_t>((bits + rounding) >> 16)};
}

inline float toFloat(Half value) {
  const uint32_t sign = uint32_t{value.bits & 0x8000u} << 16;
  const uint32_t exponent = (value.bits >> 10) & 0x1fu;
  const uint32_t mantissa = value.bits & 0x3ffu;
  if (exponent == 0x1f) return bitsFloat(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent != 0) return bitsFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return bitsFloat(sign);                                       // +-0
  const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;                 // subnormal
  return sign ? -magnitude : magnitude;
}

inline Half toHalf(float value) {
  const uint32_t bits = floatBits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return {static_cast<uint16_t>(sign | 0x7e00u)};      // NaN
  if (magnitude >= 0x47800000u) return {static_cast<uint16_t>(sign | 0x7c00u)};     // overflow: inf
  if (magnitude < 0x38800000u) {
    // Subnormal or zero: add 0.5 so the float adder rounds to nearest even at the half's ulp.
    const float shifted = bitsFloat(magnitude) + 0.5f;
    return {static_cast<uint16_t>(sign | (floatBits(shifted) - floatBits(0.5f)))};
  }
  const uint32_t odd = (magnitude >> 13) & 1u;
  const uint32_t rounded = magnitude + 0xc8000fffu + odd;  // rebias exponent (-112 << 23) and round
  return {static_cast<uint16_t>(sign | (rounded >> 13))};
}

}  // namespace pto::rt::sim::kernels
