#include <algorithm>
#include <set>

#include "passes.h"

namespace pto::compiler {

bool readsOutput(const isa::Instruction& instruction) {
  const isa::InstructionInfo& entry = isa::info(instruction.opcode);
  if (!entry.has(isa::Property::ReadsOutput)) return false;
  const auto beta = std::ranges::find(entry.immediates, "beta");  // beta == 0 ignores the output
  return beta == entry.immediates.end() || instruction.immediates[beta - entry.immediates.begin()] != 0.0;
}

BufferUses bufferUses(const isa::Program& program) {
  BufferUses uses;
  uses.writers.resize(program.buffers.size());
  uses.readers.resize(program.buffers.size());
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const isa::Instruction& instruction = program.instructions[i];
    const auto index = static_cast<int32_t>(i);
    uses.writers[instruction.operands[0].buffer].push_back(index);
    if (readsOutput(instruction)) uses.readers[instruction.operands[0].buffer].push_back(index);
    for (size_t k = 1; k < instruction.operands.size(); ++k) {
      uses.readers[instruction.operands[k].buffer].push_back(index);
    }
  }
  return uses;
}

int eliminateDeadCode(isa::Program& program) {
  // Backwards: an instruction lives if the caller sees what it writes, or a live
  // instruction after it reads it; then what it reads is needed.
  std::set<int32_t> read_later;
  std::vector<bool> live(program.instructions.size());
  for (size_t i = program.instructions.size(); i-- > 0;) {
    const isa::Instruction& instruction = program.instructions[i];
    const int32_t out = instruction.operands[0].buffer;
    live[i] = program.buffers[out].kind != isa::BufferKind::kTemp || read_later.contains(out);
    if (!live[i]) continue;
    if (readsOutput(instruction)) read_later.insert(out);
    for (size_t k = 1; k < instruction.operands.size(); ++k) read_later.insert(instruction.operands[k].buffer);
  }
  std::vector<bool> dead(live.size());
  for (size_t i = 0; i < live.size(); ++i) dead[i] = !live[i];
  return removeInstructions(program, dead);
}

int removeInstructions(isa::Program& program, const std::vector<bool>& removed) {
  std::vector<isa::Instruction> kept;
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    if (!removed[i]) kept.push_back(std::move(program.instructions[i]));
  }
  const int count = static_cast<int>(program.instructions.size() - kept.size());
  program.instructions = std::move(kept);
  return count;
}

}  // namespace pto::compiler
