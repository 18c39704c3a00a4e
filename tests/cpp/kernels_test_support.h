// Helpers shared by the kernel suites (kernels_tests.cpp, kernels_structured_tests.cpp,
// kernels_search_tests.cpp): element access and the PyTorch conversions of a scalar
// reference, element comparison and printing, strided operands in a few layouts and
// the walk over their indices, random element values, and running one instruction
// over buffers of bytes. Header-only (inline and templates), as runtime_test_support.h is.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "isa/program.h"
#include "runtime/sim/kernels/element_types.h"
#include "runtime/sim/kernels/execute.h"
#include "runtime/sim/kernels/half.h"

namespace pto_test {

using pto::isa::DType;
using pto::isa::Operand;
using pto::rt::sim::kernels::BFloat16;
using pto::rt::sim::kernels::ComputeType;
using pto::rt::sim::kernels::Half;

inline bool halfIsNaN(uint16_t bits) { return (bits & 0x7fffu) > 0x7c00u; }
inline bool bf16IsNaN(uint16_t bits) { return (bits & 0x7fffu) > 0x7f80u; }

// ---------------------------------------------------------------------------
// The reference: element access, conversions and comparisons.
// ---------------------------------------------------------------------------

template <typename T>
inline constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <typename Fn>
void forEachType(Fn&& fn) {
  fn.template operator()<bool>();
  fn.template operator()<uint8_t>();
  fn.template operator()<int8_t>();
  fn.template operator()<int16_t>();
  fn.template operator()<int32_t>();
  fn.template operator()<int64_t>();
  fn.template operator()<Half>();
  fn.template operator()<BFloat16>();
  fn.template operator()<float>();
  fn.template operator()<double>();
}

template <typename T>
std::string typeName() {
  return std::string(pto::isa::dtypeName(pto::rt::sim::kernels::dtypeOf<T>()));
}

template <typename T>
ComputeType<T> refLoad(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return pto::rt::sim::kernels::toFloat(value);
  else return value;
}

// PyTorch's c10::static_cast_with_inter_type: to bool is "nonzero" (NaN too),
// to float16/bfloat16 through float, to uint8 from a floating type through int64.
template <typename To, typename From>
To refCast(From value) {
  if constexpr (std::is_same_v<To, bool>) return value != From(0);
  else if constexpr (std::is_same_v<To, Half>) return pto::rt::sim::kernels::toHalf(static_cast<float>(value));
  else if constexpr (std::is_same_v<To, BFloat16>) return pto::rt::sim::kernels::toBFloat16(static_cast<float>(value));
  else if constexpr (std::is_same_v<To, uint8_t> && std::is_floating_point_v<From>)
    return static_cast<uint8_t>(static_cast<int64_t>(value));
  else return static_cast<To>(value);
}

template <typename T, typename V>
void refStore(char* p, V value) {
  const T converted = refCast<T>(value);
  std::memcpy(p, &converted, sizeof converted);
}

template <typename T>
bool elementIsNaN(const char* p) {
  if constexpr (std::is_same_v<T, Half>) {
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    return halfIsNaN(bits);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    return bf16IsNaN(bits);
  } else if constexpr (std::is_floating_point_v<T>) {
    T value;
    std::memcpy(&value, p, sizeof value);
    return std::isnan(value);
  } else {
    return false;
  }
}

template <typename T>
std::string elementText(const char* p) {
  std::ostringstream out;
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    out << refLoad<T>(p) << " (0x" << std::hex << bits << ")";
  } else if constexpr (std::is_same_v<T, bool>) {
    out << static_cast<int>(static_cast<unsigned char>(*p));
  } else if constexpr (sizeof(T) == 1) {
    T value;
    std::memcpy(&value, p, 1);
    out << static_cast<int>(value);
  } else {
    T value;
    std::memcpy(&value, p, sizeof value);
    out.precision(17);
    out << value;
  }
  return out.str();
}

// Equal as the kernel's result must be: bit for bit, except that any NaN equals any NaN.
template <typename T>
bool elementsEqual(const char* a, const char* b) {
  if (elementIsNaN<T>(a) && elementIsNaN<T>(b)) return true;
  return std::memcmp(a, b, sizeof(T)) == 0;
}

// Close to within a few units of T's precision, relative to the larger magnitude (or
// to 1 below it), any NaN equal to any NaN: for the functions Sleef computes (1.0 to
// 3.5 ulp) and the formulas built on them, whose vector form on a contiguous row and
// scalar form elsewhere round apart, as PyTorch's vectorised and scalar CPU loops do;
// a formula that cancels (1 + tanh(u) as u falls) magnifies that difference, so the
// bound is loose in ulps and tight against the errors of a wrong kernel.
template <typename T>
bool elementsClose(const char* a, const char* b) {
  if (elementIsNaN<T>(a) || elementIsNaN<T>(b)) return elementIsNaN<T>(a) && elementIsNaN<T>(b);
  const double x = refLoad<T>(a), y = refLoad<T>(b);
  if (x == y) return true;  // equal infinities too
  double tolerance = 1e-12;
  if constexpr (std::is_same_v<T, float>) tolerance = 2e-6;
  else if constexpr (std::is_same_v<T, Half>) tolerance = 2e-3;
  else if constexpr (std::is_same_v<T, BFloat16>) tolerance = 1.6e-2;
  return std::abs(x - y) <= tolerance * std::max({1.0, std::abs(x), std::abs(y)});
}

// ---------------------------------------------------------------------------
// Operands and their memory.
// ---------------------------------------------------------------------------

enum class Layout {
  kContiguous,      // row-major
  kTransposed,      // column-major
  kBroadcastOuter,  // stride 0 on the first dimension
  kBroadcastInner,  // stride 0 on the last dimension
  kBroadcastAll,    // every stride 0: a scalar repeated
  kReversed,        // every stride negative
  kReversedInner,   // the last dimension reversed
  kPadded,          // row-major over a padded shape, with an offset: dimensions do not merge
};

inline const char* layoutName(Layout layout) {
  switch (layout) {
    case Layout::kContiguous: return "contiguous";
    case Layout::kTransposed: return "transposed";
    case Layout::kBroadcastOuter: return "broadcast-outer";
    case Layout::kBroadcastInner: return "broadcast-inner";
    case Layout::kBroadcastAll: return "broadcast-all";
    case Layout::kReversed: return "reversed";
    case Layout::kReversedInner: return "reversed-inner";
    case Layout::kPadded: return "padded";
  }
  return "?";
}

// The operand of `shape` in `layout` over buffer `buffer`, and how many elements its buffer needs.
inline Operand makeOperand(int32_t buffer, DType dtype, const std::vector<int64_t>& shape, Layout layout,
                           int64_t* buffer_elements) {
  Operand operand;
  operand.buffer = buffer;
  operand.dtype = dtype;
  operand.rank = static_cast<int32_t>(shape.size());
  std::copy(shape.begin(), shape.end(), operand.shape.begin());
  const int rank = operand.rank;
  int64_t stride = 1;
  if (layout == Layout::kTransposed) {
    for (int d = 0; d < rank; ++d) {
      operand.strides[d] = stride;
      stride *= std::max<int64_t>(shape[d], 1);
    }
  } else {
    for (int d = rank - 1; d >= 0; --d) {
      operand.strides[d] = stride;
      stride *= std::max<int64_t>(shape[d], 1) + (layout == Layout::kPadded ? 1 + d % 2 : 0);
    }
  }
  switch (layout) {
    case Layout::kBroadcastOuter:
      if (rank > 0) operand.strides[0] = 0;
      break;
    case Layout::kBroadcastInner:
      if (rank > 0) operand.strides[rank - 1] = 0;
      break;
    case Layout::kBroadcastAll:
      for (int d = 0; d < rank; ++d) operand.strides[d] = 0;
      break;
    case Layout::kReversed:
      for (int d = 0; d < rank; ++d) operand.strides[d] = -operand.strides[d];
      break;
    case Layout::kReversedInner:
      if (rank > 0) operand.strides[rank - 1] = -operand.strides[rank - 1];
      break;
    default:
      break;
  }
  int64_t low = 0, high = 0;
  for (int d = 0; d < rank; ++d) {
    const int64_t extent = std::max<int64_t>(shape[d] - 1, 0) * operand.strides[d];
    (extent < 0 ? low : high) += extent;
  }
  operand.offset = -low + (layout == Layout::kPadded ? 3 : 0);
  *buffer_elements = operand.offset + high + 1;
  return operand;
}

// Calls fn(index) for every index of `shape`, in row-major order.
template <typename Fn>
void forEachIndex(const Operand& shape_of, Fn&& fn) {
  for (int d = 0; d < shape_of.rank; ++d) {
    if (shape_of.shape[d] == 0) return;
  }
  std::array<int64_t, pto::isa::kMaxRank> index{};
  for (;;) {
    fn(index);
    int d = shape_of.rank - 1;
    for (; d >= 0; --d) {
      if (++index[d] < shape_of.shape[d]) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

inline int64_t elementOf(const Operand& operand, const std::array<int64_t, pto::isa::kMaxRank>& index) {
  int64_t element = operand.offset;
  for (int d = 0; d < operand.rank; ++d) element += index[d] * operand.strides[d];
  return element;
}

// Random values of T. For floats: mostly ordinary values, some zeros of both
// signs, infinities, NaNs, huge and tiny values; for integers: small values and
// arbitrary bit patterns (to wrap around).
template <typename T>
T randomValue(std::mt19937_64& rng) {
  if constexpr (std::is_same_v<T, bool>) {
    return (rng() & 1) != 0;
  } else if constexpr (std::is_integral_v<T>) {
    if (rng() % 2) return static_cast<T>(static_cast<int64_t>(rng() % 11) - 5);
    return static_cast<T>(rng());
  } else {
    double value = 0;
    const uint64_t r = rng() % 100;
    if (r < 3) value = std::numeric_limits<double>::quiet_NaN();
    else if (r < 5) value = std::numeric_limits<double>::infinity();
    else if (r < 7) value = -std::numeric_limits<double>::infinity();
    else if (r < 9) value = 0.0;
    else if (r < 11) value = -0.0;
    else if (r < 14) value = std::ldexp(static_cast<double>(rng() % 2000) - 1000, static_cast<int>(rng() % 40));
    else if (r < 16) value = std::ldexp(static_cast<double>(rng() % 2000) - 1000, -static_cast<int>(rng() % 40) - 10);
    else value = std::uniform_real_distribution<double>(-4.0, 4.0)(rng);
    return refCast<T>(value);
  }
}

// Values from a small pool, so that comparisons meet equal values often.
template <typename T>
T poolValue(std::mt19937_64& rng) {
  if constexpr (std::is_same_v<T, bool>) {
    return (rng() & 1) != 0;
  } else if constexpr (std::is_integral_v<T>) {
    constexpr T kPool[] = {0, 1, 2, std::numeric_limits<T>::max(), std::numeric_limits<T>::min(), static_cast<T>(-1)};
    return kPool[rng() % std::size(kPool)];
  } else {
    constexpr double kPool[] = {-1.0, 0.0, -0.0, 1.0, 2.5, std::numeric_limits<double>::quiet_NaN(),
                                std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
    return refCast<T>(kPool[rng() % std::size(kPool)]);
  }
}

template <typename T>
void writeValue(char* p, T value) {
  std::memcpy(p, &value, sizeof value);
}

// An instruction's buffers: bytes, each operand's elements somewhere inside.
using Bytes = std::vector<unsigned char>;

// Verifies `instruction` against its buffers' sizes, then runs it.
inline void verifyAndRun(const pto::isa::Instruction& instruction, std::vector<Bytes>& memory) {
  std::vector<uint64_t> bytes;
  std::vector<void*> buffers;
  for (Bytes& m : memory) {
    bytes.push_back(m.size());
    buffers.push_back(m.data());
  }
  ASSERT_EQ(pto::isa::verifyInstruction(instruction, bytes), "") << pto::isa::print(instruction);
  pto::rt::sim::kernels::execute(instruction, buffers);
}

}  // namespace pto_test
