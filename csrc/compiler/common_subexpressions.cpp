#include <algorithm>
#include <map>
#include <string>

#include "passes.h"

namespace pto::compiler {
namespace {

// What an instruction computes, whatever buffer it writes to: its PTO-AS with the
// output's buffer number left out.
std::string computation(const isa::Instruction& instruction) {
  isa::Instruction anonymous = instruction;
  anonymous.operands[0].buffer = 0;
  return isa::print(anonymous);
}

bool writtenBetween(const std::vector<int32_t>& writers, int32_t after, int32_t before) {
  return std::any_of(writers.begin(), writers.end(), [&](int32_t w) { return w > after && w < before; });
}

}  // namespace

int eliminateCommonSubexpressions(isa::Program& program) {
  const BufferUses uses = bufferUses(program);
  std::map<std::string, int32_t> first_of;  // computation -> the first instruction computing it
  std::vector<int32_t> replaced_by(program.buffers.size(), -1);
  std::vector<bool> removed(program.instructions.size());
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    isa::Instruction& instruction = program.instructions[i];
    const auto index = static_cast<int32_t>(i);
    for (size_t k = 1; k < instruction.operands.size(); ++k) {
      const int32_t buffer = instruction.operands[k].buffer;
      if (replaced_by[buffer] >= 0) instruction.operands[k].buffer = replaced_by[buffer];
    }
    const int32_t out = instruction.operands[0].buffer;
    // Only a temporary written by this instruction alone, whole, can be replaced.
    if (readsOutput(instruction) || uses.writers[out].size() != 1) continue;
    const auto [earlier, inserted] = first_of.try_emplace(computation(instruction), index);
    if (inserted) continue;
    const isa::Instruction& original = program.instructions[earlier->second];
    const int32_t original_out = original.operands[0].buffer;
    bool same = program.buffers[out].kind == isa::BufferKind::kTemp && uses.writers[original_out].size() == 1 &&
                program.buffers[original_out].bytes == program.buffers[out].bytes;
    for (size_t k = 1; same && k < instruction.operands.size(); ++k) {
      same = !writtenBetween(uses.writers[instruction.operands[k].buffer], earlier->second, index);
    }
    if (!same) {
      earlier->second = index;  // later ones may still repeat this one
      continue;
    }
    replaced_by[out] = original_out;
    removed[i] = true;
  }
  return removeInstructions(program, removed);
}

}  // namespace pto::compiler
