#include "dtype.h"

namespace pto::isa {
namespace {

struct DTypeEntry {
  std::string_view name;
  size_t size;
};

constexpr DTypeEntry kDTypes[] = {
#define PTO_DTYPE_ENTRY(name, text, size) {text, size},
    PTO_DTYPES(PTO_DTYPE_ENTRY)
#undef PTO_DTYPE_ENTRY
};

}  // namespace

std::string_view dtypeName(DType dtype) { return kDTypes[static_cast<int>(dtype)].name; }
size_t dtypeSize(DType dtype) { return kDTypes[static_cast<int>(dtype)].size; }

std::optional<DType> parseDType(std::string_view text) {
  for (int i = 0; i < kDTypeCount; ++i) {
    if (kDTypes[i].name == text) return static_cast<DType>(i);
  }
  return std::nullopt;
}

}  // namespace pto::isa
