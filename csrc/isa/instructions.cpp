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
#undef PTO_INSTRUCTION
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
  switch (group) {
    case Group::Unary: return "Unary";
    case Group::Binary: return "Binary";
    case Group::Ternary: return "Ternary";
    case Group::Compare: return "Compare";
    case Group::Select: return "Select";
    case Group::Convert: return "Convert";
    case Group::Fill: return "Fill";
    case Group::Reduce: return "Reduce";
    case Group::Matmul: return "Matmul";
    case Group::Row: return "Row";
    case Group::Gather: return "Gather";
    case Group::Iota: return "Iota";
    case Group::Scatter: return "Scatter";
    case Group::Triangle: return "Triangle";
    case Group::Random: return "Random";
    case Group::Sort: return "Sort";
    case Group::Scan: return "Scan";
    case Group::ScatterElements: return "ScatterElements";
    case Group::WrapIndex: return "WrapIndex";
    case Group::Nonzero: return "Nonzero";
  }
  return "?";
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
