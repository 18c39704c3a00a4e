#include <algorithm>

#include "passes.h"

namespace pto::compiler {
namespace {

// Whether `copy` (a tmov) lays its output out exactly as its input: then element e of
// the output's buffer is element e + input.offset of the input's.
bool sameLayout(const isa::Operand& out, const isa::Operand& in) {
  if (out.offset != 0 || out.rank != in.rank || out.dtype != in.dtype) return false;
  for (int d = 0; d < out.rank; ++d) {
    if (out.shape[d] != in.shape[d] || out.strides[d] != in.strides[d]) return false;
    if (out.strides[d] == 0 && out.shape[d] > 1) return false;  // a broadcast is not a copy of memory
  }
  return true;
}

}  // namespace

int forwardCopies(isa::Program& program) {
  const BufferUses uses = bufferUses(program);
  std::vector<bool> removed(program.instructions.size());
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const isa::Instruction& copy = program.instructions[i];
    if (copy.opcode != isa::Opcode::kMove) continue;
    const isa::Operand& out = copy.operands[0];
    const isa::Operand& in = copy.operands[1];
    const auto index = static_cast<int32_t>(i);
    const auto& readers = uses.readers[out.buffer];
    const uint64_t element = isa::dtypeSize(out.dtype);
    const bool forwardable =
        program.buffers[out.buffer].kind == isa::BufferKind::kTemp && uses.writers[out.buffer].size() == 1 &&
        out.buffer != in.buffer && sameLayout(out, in) &&
        // What the copy read stays as it was while the copy's readers read it ...
        std::none_of(uses.writers[in.buffer].begin(), uses.writers[in.buffer].end(),
                     [&](int32_t w) { return w > index; }) &&
        // ... and holds every element they may read, in the copy's dtype.
        program.buffers[in.buffer].bytes >= program.buffers[out.buffer].bytes + static_cast<uint64_t>(in.offset) * element &&
        std::all_of(readers.begin(), readers.end(), [&](int32_t r) {
          const auto& operands = program.instructions[r].operands;
          return std::all_of(operands.begin() + 1, operands.end(), [&](const isa::Operand& operand) {
            return operand.buffer != out.buffer || operand.dtype == out.dtype;
          });
        });
    if (!forwardable) continue;
    const int32_t source = in.buffer;
    const int64_t shift = in.offset;
    for (int32_t r : readers) {
      for (size_t k = 1; k < program.instructions[r].operands.size(); ++k) {
        isa::Operand& operand = program.instructions[r].operands[k];
        if (operand.buffer != out.buffer) continue;
        operand.buffer = source;
        operand.offset += shift;
      }
    }
    removed[i] = true;
  }
  return removeInstructions(program, removed);
}

}  // namespace pto::compiler
