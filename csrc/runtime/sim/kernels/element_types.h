// The C++ type behind each PTO dtype, the type kernels compute it in, and the
// conversions between them (PyTorch's static_cast semantics).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "half.h"
#include "isa/dtype.h"

namespace pto::rt::sim::kernels {

// float16 and bfloat16: stored in 16 bits, computed in float.
template <typename T>
constexpr bool kIsHalfFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <typename T>
using ComputeType = std::conditional_t<kIsHalfFloat<T>, float, T>;

// float16/bfloat16 runs are widened to float this many elements at a time (in L1)
// where a float kernel then does the work.
constexpr int64_t kBlockElements = 512;

template <typename T>
constexpr isa::DType dtypeOf() {
  if constexpr (std::is_same_v<T, bool>) return isa::DType::kBool;
  else if constexpr (std::is_same_v<T, uint8_t>) return isa::DType::kUInt8;
  else if constexpr (std::is_same_v<T, int8_t>) return isa::DType::kInt8;
  else if constexpr (std::is_same_v<T, int16_t>) return isa::DType::kInt16;
  else if constexpr (std::is_same_v<T, int32_t>) return isa::DType::kInt32;
  else if constexpr (std::is_same_v<T, int64_t>) return isa::DType::kInt64;
  else if constexpr (std::is_same_v<T, Half>) return isa::DType::kFloat16;
  else if constexpr (std::is_same_v<T, BFloat16>) return isa::DType::kBFloat16;
  else if constexpr (std::is_same_v<T, float>) return isa::DType::kFloat32;
  else return isa::DType::kFloat64;
}

// Calls fn.template operator()<T>() with the storage type of `dtype`.
template <typename Fn>
decltype(auto) dispatchDType(isa::DType dtype, Fn&& fn) {
  switch (dtype) {
    case isa::DType::kBool: return fn.template operator()<bool>();
    case isa::DType::kUInt8: return fn.template operator()<uint8_t>();
    case isa::DType::kInt8: return fn.template operator()<int8_t>();
    case isa::DType::kInt16: return fn.template operator()<int16_t>();
    case isa::DType::kInt32: return fn.template operator()<int32_t>();
    case isa::DType::kInt64: return fn.template operator()<int64_t>();
    case isa::DType::kFloat16: return fn.template operator()<Half>();
    case isa::DType::kBFloat16: return fn.template operator()<BFloat16>();
    case isa::DType::kFloat32: return fn.template operator()<float>();
    case isa::DType::kFloat64: return fn.template operator()<double>();
  }
  return fn.template operator()<float>();
}

template <typename T>
inline ComputeType<T> widen(T value) {
  if constexpr (kIsHalfFloat<T>) return toFloat(value);
  else return value;
}

// out[i] = in[i] widened to float, for i in [0, count).
template <typename T>
inline void widenRun(float* out, const T* in, int64_t count) {
  for (int64_t i = 0; i < count; ++i) out[i] = widen(in[i]);
}

template <typename T>
inline ComputeType<T> load(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  return widen(value);
}

// Converts a computed value to storage type To, as static_cast<To> does in PyTorch.
template <typename To, typename From>
inline To castTo(From value) {
  if constexpr (std::is_same_v<To, bool>) {
    return value != From(0);
  } else if constexpr (std::is_same_v<To, Half>) {
    return toHalf(static_cast<float>(value));
  } else if constexpr (std::is_same_v<To, BFloat16>) {
    return toBFloat16(static_cast<float>(value));
  } else if constexpr (std::is_unsigned_v<To> && std::is_floating_point_v<From>) {
    // Through int64, as PyTorch does for uint8 (c10::static_cast_with_inter_type):
    // a negative float converted straight to an unsigned type is undefined behaviour.
    return static_cast<To>(static_cast<int64_t>(value));
  } else {
    return static_cast<To>(value);
  }
}

// out[i] = in[i] rounded to T, for i in [0, count).
template <typename T>
inline void narrowRun(T* out, const float* in, int64_t count) {
  for (int64_t i = 0; i < count; ++i) out[i] = castTo<T>(in[i]);
}

template <typename T, typename C>
inline void store(char* p, C value) {
  const T converted = castTo<T>(value);
  std::memcpy(p, &converted, sizeof converted);
}

}  // namespace pto::rt::sim::kernels
