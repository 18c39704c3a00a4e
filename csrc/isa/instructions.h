// The PTO instruction set, expanded from instructions.def.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string_view>

#include "dtype.h"

namespace pto::isa {

// Families of instructions: what a kernel family implements and the verifier checks,
// the PTO_GROUP rows of instructions.def.
enum class Group : uint8_t {
#define PTO_GROUP(group) group,
#include "instructions.def"
};

enum class OutputDType : uint8_t { Same, Bool, Any, Index };

// What the compiler's passes and the verifier ask of an instruction: the table's
// properties column (instructions.def says what each one means).
enum class Property : uint8_t {
  Elementwise, Reduction, RowOp, Gemm, SameShape, Tileable, Copy, ReadsOutput, IndexInput, TypedImmediates
};
constexpr int kPropertyCount = static_cast<int>(Property::TypedImmediates) + 1;

// A set of properties, as the table states them.
class Properties {
 public:
  constexpr Properties(std::initializer_list<Property> properties) {
    for (Property p : properties) bits_ |= 1u << static_cast<unsigned>(p);
  }
  constexpr bool has(Property p) const { return (bits_ >> static_cast<unsigned>(p)) & 1u; }

 private:
  uint16_t bits_ = 0;
};

enum class Opcode : uint16_t {
#define PTO_INSTRUCTION(op, name, group, inputs, dtypes, output, immediates, properties) op,
#include "instructions.def"
};

constexpr size_t kOpcodeCount = 0
#define PTO_INSTRUCTION(op, name, group, inputs, dtypes, output, immediates, properties) + 1
#include "instructions.def"
    ;

constexpr int kMaxImmediates = 11;  // a convolution's groups, strides, padding, dilation and beta

struct InstructionInfo {
  Opcode opcode;
  std::string_view name;  // the PTO-AS mnemonic
  Group group;
  int inputs;
  DTypeSet dtypes;        // dtypes the inputs may have
  OutputDType output;
  std::array<std::string_view, kMaxImmediates> immediates;  // "" where unused
  Properties properties;
  int immediateCount() const;
  bool has(Property property) const { return properties.has(property); }
};

// Compile-time views of the table, for kernels that instantiate per (opcode, dtype).
constexpr Group groupOf(Opcode opcode) {
  switch (opcode) {
#define PTO_INSTRUCTION(op, name, group, inputs, dtypes, output, immediates, properties) \
    case Opcode::op: return Group::group;
#include "instructions.def"
  }
  return Group::Unary;
}

constexpr DTypeSet acceptedDTypes(Opcode opcode) {
  switch (opcode) {
#define PTO_INSTRUCTION(op, name, group, inputs, dtypes, output, immediates, properties) \
    case Opcode::op: return dtypes;
#include "instructions.def"
  }
  return {};
}

std::span<const InstructionInfo> instructionTable();
const InstructionInfo& info(Opcode opcode);
std::string_view groupName(Group group);         // "Unary", as instructions.def spells it
std::string_view outputName(OutputDType output); // "Same", as instructions.def spells it
std::string_view propertyName(Property property); // "Elementwise", as instructions.def spells it
std::optional<Opcode> opcodeByName(std::string_view name);

}  // namespace pto::isa
