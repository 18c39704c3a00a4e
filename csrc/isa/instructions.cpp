#include "instructions.h"

namespace pto::isa {
namespace {

using enum Property;  // the table names properties as instructions.def spells them

constexpr InstructionInfo kTable[] = {
#define PTO_IMMEDIATES(...) {__VA_ARGS__}
#define PTO_PROPERTIES(...) Properties{__VA_ARGS__}
#define PTO_INSTRUCTION(op, name, group, inputs, dtypes, output, immediates, properties) \
  {Opcode::op, name, Group::group, inputs, dtypes, OutputDType::output, PTO_IMMEDIATES immediates, \
   PTO_PROPERTIES properties},
#include "instructions.def"
#undef PTO_PROPERTIES
#undef PTO_IMMEDIATES
};

}  // namespace

int InstructionInfo::immediateCount() const {
  int count = 0;
  for (std::string_view immediate : immediates) count += immediate.empty() ? 0 : 1;
  return count;
}

std::span<const InstructionInfo> instructionTable() { return kTable; }

const InstructionInfo& info(Opcode opcode) { return kTable[static_cast<size_t>(opcode)]; }

std::string_view groupName(Group group) {
  static constexpr std::string_view kNames[] = {
#define PTO_GROUP(group) #group,
#include "instructions.def"
  };
  return kNames[static_cast<size_t>(group)];
}

std::string_view outputName(OutputDType output) {
  switch (output) {
    case OutputDType::Same: return "Same";
    case OutputDType::Bool: return "Bool";
    case OutputDType::Any: return "Any";
    case OutputDType::Index: return "Index";
  }
  return "?";
}

std::string_view propertyName(Property property) {
  switch (property) {
    case Property::Elementwise: return "Elementwise";
    case Property::Reduction: return "Reduction";
    case Property::RowOp: return "RowOp";
    case Property::Gemm: return "Gemm";
    case Property::SameShape: return "SameShape";
    case Property::Tileable: return "Tileable";
    case Property::Copy: return "Copy";
    case Property::ReadsOutput: return "ReadsOutput";
    case Property::IndexInput: return "IndexInput";
    case Property::TypedImmediates: return "TypedImmediates";
  }
  return "?";
}

std::optional<Opcode> opcodeByName(std::string_view name) {
  for (const InstructionInfo& entry : kTable) {
    if (entry.name == name) return entry.opcode;
  }
  return std::nullopt;
}

}  // namespace pto::isa
