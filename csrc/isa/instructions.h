// The PTO instruction set, expanded from instructions.def.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "dtype.h"

namespace pto::isa {

// Families of instructions: what a kernel family implements and the verifier checks.
enum class Group : uint8_t {
  Unary, Binary, Compare, Select, Convert, Fill, Reduce, Matmul, Row, Gather, Iota, Scatter, Triangle,
  Random, Sort, Scan, ScatterElements, WrapIndex, Nonzero
};

enum class OutputDType : uint8_t { Same, Bool, Any, Index };

enum class Opcode : uint16_t {
#define PTO_INSTRUCTION(op, name, group, inputs, dtypes, output, immediates) op,
#include "instructions.def"
#undef PTO_INSTRUCTION
};

constexpr int kMaxImmediates = 5;  // the random draws' parameters, key and counter

struct InstructionInfo {
  Opcode opcode;
  std::string_view name;  // the PTO-AS mnemonic
  Group group;
  int inputs;
  DTypeSet dtypes;        // dtypes the inputs may have
  OutputDType output;
  std::array<std::string_view, kMaxImmediates> immediates;  // "" where unused
  int immediateCount() const;
};

// Compile-time views of the table, for kernels that instantiate per (opcode, dtype).
constexpr Group groupOf(Opcode opcode) {
  switch (opcode) {
#define PTO_INSTRUCTION(op, name, group, inputs, dtypes, output, immediates) \
    case Opcode::op: return Group::group;
#include "instructions.def"
#undef PTO_INSTRUCTION
  }
  return Group::Unary;
}

constexpr DTypeSet acceptedDTypes(Opcode opcode) {
  switch (opcode) {
#define PTO_INSTRUCTION(op, name, group, inputs, dtypes, output, immediates) \
    case Opcode::op: return dtypes;
#include "instructions.def"
#undef PTO_INSTRUCTION
  }
  return {};
}

std::span<const InstructionInfo> instructionTable();
const InstructionInfo& info(Opcode opcode);
std::string_view groupName(Group group);         // "Unary", as instructions.def spells it
std::string_view outputName(OutputDType output); // "Same", as instructions.def spells it
std::optional<Opcode> opcodeByName(std::string_view name);

}  // namespace pto::isa
