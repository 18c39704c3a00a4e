#include "instruction_cost.h"

#include "convolution.h"

namespace pto::isa {
namespace {

// Elements the operand touches: its extent along every dimension it does not repeat.
int64_t distinctElements(const Operand& operand) {
  int64_t count = 1;
  for (int d = 0; d < operand.rank; ++d) {
    if (operand.strides[d] != 0) count *= operand.shape[d];
  }
  return count;
}

std::string shapeOf(const Operand& operand) {
  return std::string(dtypeName(operand.dtype)) + "[" + dimsText(operand.shape, operand.rank) + "]";
}

}  // namespace

uint64_t operandBytes(const Operand& operand) {
  return static_cast<uint64_t>(distinctElements(operand)) * dtypeSize(operand.dtype);
}

InstructionCost costOf(const Instruction& instruction) {
  InstructionCost cost;
  for (const Operand& operand : instruction.operands) cost.bytes += operandBytes(operand);
  const Operand& out = instruction.operands[0];
  const InstructionInfo& entry = info(instruction.opcode);
  if (entry.has(Property::Gemm)) {
    const Operand& a = instruction.operands[1];
    cost.flops = 2.0 * static_cast<double>(out.numel()) * static_cast<double>(a.shape[a.rank - 1]);
  } else if (entry.group == Group::Conv) {
    cost.flops = 2.0 * convMultiplyAdds(convGeometry(instruction));
  } else if (entry.has(Property::Reduction) || entry.has(Property::RowOp)) {
    cost.flops = static_cast<double>(instruction.operands[1].numel()) * (entry.has(Property::RowOp) ? 4.0 : 1.0);
  } else {
    cost.flops = static_cast<double>(out.numel());
  }
  return cost;
}

std::string operandSummary(const Instruction& instruction) {
  std::string text = shapeOf(instruction.operands[0]);
  for (size_t i = 1; i < instruction.operands.size(); ++i) {
    text += (i == 1 ? " <- " : ", ") + shapeOf(instruction.operands[i]);
  }
  return text;
}

}  // namespace pto::isa
