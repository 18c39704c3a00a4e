#include <sstream>

#include "program.h"

namespace pto::isa {
namespace {

template <typename... Parts>
std::string describe(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

std::string shapeText(const Operand& operand) {
  std::string text = "[";
  for (int d = 0; d < operand.rank; ++d) {
    if (d > 0) text += ',';
    text += std::to_string(operand.shape[d]);
  }
  text += ']';
  return text;
}

bool sameShape(const Operand& a, const Operand& b) {
  if (a.rank != b.rank) return false;
  for (int d = 0; d < a.rank; ++d) {
    if (a.shape[d] != b.shape[d]) return false;
  }
  return true;
}

// The operand's lowest and highest element index relative to its buffer start,
// in 128-bit arithmetic so that absurd shapes or strides cannot overflow.
std::string checkBounds(const Operand& operand, uint64_t buffer_bytes) {
  for (int d = 0; d < operand.rank; ++d) {
    if (operand.shape[d] == 0) return "";
  }
  __int128 low = operand.offset, high = operand.offset;
  for (int d = 0; d < operand.rank; ++d) {
    const __int128 extent = static_cast<__int128>(operand.shape[d] - 1) * operand.strides[d];
    (extent < 0 ? low : high) += extent;
  }
  const auto size = static_cast<__int128>(dtypeSize(operand.dtype));
  if (low < 0 || (high + 1) * size > static_cast<__int128>(buffer_bytes)) {
    return describe("reaches outside buffer %", operand.buffer, " (", buffer_bytes,
                    " bytes): elements ", static_cast<long long>(low), " to ",
                    static_cast<long long>(high));
  }
  return "";
}

std::string checkOperand(const Operand& operand, std::span<const uint64_t> buffer_bytes) {
  if (operand.buffer < 0 || operand.buffer >= static_cast<int32_t>(buffer_bytes.size())) {
    return describe("refers to buffer %", operand.buffer, ", but the program has ",
                    buffer_bytes.size());
  }
  if (operand.rank < 0 || operand.rank > kMaxRank) {
    return describe("has rank ", operand.rank, " (at most ", kMaxRank, ")");
  }
  for (int d = 0; d < operand.rank; ++d) {
    if (operand.shape[d] < 0) return describe("has a negative size in ", shapeText(operand));
  }
  return checkBounds(operand, buffer_bytes[operand.buffer]);
}

std::string checkDTypes(const InstructionInfo& entry, const Instruction& instruction) {
  const Operand& out = instruction.operands[0];
  for (int i = 1; i <= entry.inputs; ++i) {
    const DType input = instruction.operands[i].dtype;
    const bool is_condition = entry.group == Group::Select && i == 1;
    if (is_condition) {
      if (input != DType::kBool) return describe("condition operand must be bool, not ", dtypeName(input));
      continue;
    }
    if (!entry.dtypes.contains(input)) {
      return describe("operand ", i, " has dtype ", dtypeName(input), ", which ", entry.name,
                      " does not take");
    }
    const bool needs_same = entry.output == OutputDType::Same;
    if (needs_same && input != out.dtype) {
      return describe("operand ", i, " is ", dtypeName(input), " but the output is ",
                      dtypeName(out.dtype), "; ", entry.name, " keeps the dtype");
    }
    if (entry.output == OutputDType::Bool && input != instruction.operands[1].dtype) {
      return describe("compares ", dtypeName(instruction.operands[1].dtype), " with ",
                      dtypeName(input));
    }
  }
  if (entry.output == OutputDType::Bool && out.dtype != DType::kBool) {
    return describe("output must be bool, not ", dtypeName(out.dtype));
  }
  if (entry.group == Group::Fill && !entry.dtypes.contains(out.dtype)) {
    return describe("cannot fill dtype ", dtypeName(out.dtype));
  }
  return "";
}

}  // namespace

int64_t Operand::numel() const {
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) count *= shape[d];
  return count;
}

Operand contiguousOperand(int32_t buffer, DType dtype, std::initializer_list<int64_t> shape) {
  Operand operand;
  operand.buffer = buffer;
  operand.dtype = dtype;
  operand.rank = static_cast<int32_t>(shape.size());
  int d = 0;
  for (int64_t size : shape) operand.shape[d++] = size;
  int64_t stride = 1;
  for (int i = operand.rank - 1; i >= 0; --i) {
    operand.strides[i] = stride;
    stride *= operand.shape[i];
  }
  return operand;
}

std::string verifyInstruction(const Instruction& instruction, std::span<const uint64_t> buffer_bytes) {
  const auto raw = static_cast<size_t>(instruction.opcode);
  if (raw >= instructionTable().size()) return describe("unknown opcode ", raw);
  const InstructionInfo& entry = info(instruction.opcode);
  const auto expected = static_cast<size_t>(entry.inputs + 1);
  if (instruction.operands.size() != expected) {
    return describe(entry.name, " takes ", expected, " operands (output first), got ",
                    instruction.operands.size());
  }
  for (size_t i = 0; i < instruction.operands.size(); ++i) {
    if (std::string error = checkOperand(instruction.operands[i], buffer_bytes); !error.empty()) {
      return describe(entry.name, ": operand ", i, " ", error);
    }
    if (!sameShape(instruction.operands[i], instruction.operands[0])) {
      return describe(entry.name, ": operand ", i, " has shape ", shapeText(instruction.operands[i]),
                      " but the output has ", shapeText(instruction.operands[0]));
    }
  }
  if (std::string error = checkDTypes(entry, instruction); !error.empty()) {
    return describe(entry.name, ": ", error);
  }
  return "";
}

std::string verify(const Program& program) {
  std::vector<uint64_t> sizes;
  for (const Buffer& buffer : program.buffers) sizes.push_back(buffer.bytes);
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    if (std::string error = verifyInstruction(program.instructions[i], sizes); !error.empty()) {
      return describe("instruction ", i, " (", error, ")");
    }
  }
  return "";
}

}  // namespace pto::isa
