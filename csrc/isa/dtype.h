// Element types of PTO operands. Float16 and bfloat16 are storage types: the
// kernels compute them in float32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace pto::isa {

#define PTO_DTYPES(X)          \
  X(kBool, "bool", 1)          \
  X(kUInt8, "u8", 1)           \
  X(kInt8, "i8", 1)            \
  X(kInt16, "i16", 2)          \
  X(kInt32, "i32", 4)          \
  X(kInt64, "i64", 8)          \
  X(kFloat16, "f16", 2)        \
  X(kBFloat16, "bf16", 2)      \
  X(kFloat32, "f32", 4)        \
  X(kFloat64, "f64", 8)

enum class DType : uint8_t {
#define PTO_DTYPE_ENUM(name, text, size) name,
  PTO_DTYPES(PTO_DTYPE_ENUM)
#undef PTO_DTYPE_ENUM
};

constexpr int kDTypeCount = 10;

std::string_view dtypeName(DType dtype);
size_t dtypeSize(DType dtype);
std::optional<DType> parseDType(std::string_view text);

constexpr bool isFloating(DType d) {
  return d == DType::kFloat16 || d == DType::kBFloat16 || d == DType::kFloat32 ||
         d == DType::kFloat64;
}
constexpr bool isIntegral(DType d) { return !isFloating(d) && d != DType::kBool; }

// A set of dtypes, as the instruction table states what each instruction accepts.
class DTypeSet {
 public:
  constexpr DTypeSet() = default;
  constexpr DTypeSet(std::initializer_list<DType> dtypes) {
    for (DType d : dtypes) bits_ |= 1u << static_cast<unsigned>(d);
  }
  constexpr bool contains(DType d) const { return (bits_ >> static_cast<unsigned>(d)) & 1u; }
  constexpr DTypeSet operator|(DTypeSet other) const { return DTypeSet(bits_ | other.bits_); }

 private:
  constexpr explicit DTypeSet(uint32_t bits) : bits_(bits) {}
  uint32_t bits_ = 0;
};

inline constexpr DTypeSet kFloatTypes{DType::kFloat16, DType::kBFloat16, DType::kFloat32,
                                      DType::kFloat64};
inline constexpr DTypeSet kIntTypes{DType::kUInt8, DType::kInt8, DType::kInt16, DType::kInt32,
                                    DType::kInt64};
inline constexpr DTypeSet kNumericTypes = kFloatTypes | kIntTypes;
inline constexpr DTypeSet kAllTypes = kNumericTypes | DTypeSet{DType::kBool};
inline constexpr DTypeSet kIntegerOrBoolTypes = kIntTypes | DTypeSet{DType::kBool};
inline constexpr DTypeSet kBoolTypes{DType::kBool};

}  // namespace pto::isa
