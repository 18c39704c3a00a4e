#include "passes.h"

namespace pto::compiler {

// From every stage at load, take back each one that touches a buffer other than a
// temporary written at load only, until none does: what remains computes the same
// values at every launch from nothing the launch binds.
void hoistConstantStages(isa::ScheduledProgram& compiled) {
  const isa::Program& program = compiled.program;
  for (isa::Stage& stage : compiled.stages) stage.at_load = true;
  for (bool changed = true; changed;) {
    changed = false;
    const std::vector<bool> constant = isa::writtenAtLoadOnly(program, compiled.stages);
    for (isa::Stage& stage : compiled.stages) {
      if (!stage.at_load) continue;
      for (int32_t i = stage.first; i < stage.first + stage.count && stage.at_load; ++i) {
        for (const isa::Operand& operand : program.instructions[i].operands) {
          if (constant[operand.buffer]) continue;
          stage.at_load = false;
          changed = true;
          break;
        }
      }
    }
  }
}

}  // namespace pto::compiler
