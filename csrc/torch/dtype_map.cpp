#include "dtype_map.h"

#include <iterator>

namespace pto::torch_glue {
namespace {

constexpr DTypePair kDTypeMap[] = {
    {at::kBool, isa::DType::kBool},
    {at::kByte, isa::DType::kUInt8},
    {at::kChar, isa::DType::kInt8},
    {at::kShort, isa::DType::kInt16},
    {at::kInt, isa::DType::kInt32},
    {at::kLong, isa::DType::kInt64},
    {at::kHalf, isa::DType::kFloat16},
    {at::kBFloat16, isa::DType::kBFloat16},
    {at::kFloat, isa::DType::kFloat32},
    {at::kDouble, isa::DType::kFloat64},
};
static_assert(std::size(kDTypeMap) == isa::kDTypeCount, "every PTO dtype has its torch dtype");

}  // namespace

std::span<const DTypePair> dtypeMap() { return kDTypeMap; }

std::optional<isa::DType> ptoDType(at::ScalarType type) {
  for (const DTypePair& pair : kDTypeMap) {
    if (pair.torch == type) return pair.pto;
  }
  return std::nullopt;
}

at::ScalarType torchDType(isa::DType dtype) {
  for (const DTypePair& pair : kDTypeMap) {
    if (pair.pto == dtype) return pair.torch;
  }
  return at::kFloat;  // unreachable: the static_assert above covers every PTO dtype
}

bool accepts(isa::Opcode opcode, at::ScalarType type) {
  const auto dtype = ptoDType(type);
  return dtype && isa::info(opcode).dtypes.contains(*dtype);
}

}  // namespace pto::torch_glue
