// The pass pipeline.
#include <cstdio>
#include <stdexcept>
#include <string>

#include "compile.h"
#include "passes.h"

namespace pto::compiler {
namespace {

void check(const isa::ScheduledProgram& compiled, const char* pass, bool planned, const CompileOptions& options) {
  std::string error = isa::verify(compiled.program);
  if (error.empty() && planned) error = isa::verifySchedule(compiled);
  if (!error.empty()) throw std::invalid_argument(std::string("after ") + pass + ": " + error);
  if (options.debug) {
    std::fprintf(stderr, "# ---- PTO program after %s ----\n%s", pass,
                 planned ? isa::print(compiled).c_str() : isa::print(compiled.program).c_str());
  }
}

}  // namespace

isa::ScheduledProgram compile(isa::Program program, const CompileOptions& options) {
  isa::ScheduledProgram compiled;
  compiled.program = std::move(program);
  check(compiled, "parsing", false, options);
  eliminateDeadCode(compiled.program);
  check(compiled, "dead code elimination", false, options);
  eliminateCommonSubexpressions(compiled.program);
  eliminateDeadCode(compiled.program);  // what only the removed copies read
  check(compiled, "common subexpression elimination", false, options);
  forwardCopies(compiled.program);
  check(compiled, "copy forwarding", false, options);
  collapseLeadingDims(compiled.program);
  check(compiled, "dimension collapsing", false, options);
  if (options.fuse) {
    compiled.stages = fuse(compiled.program, options);
  } else {
    for (int32_t i = 0; i < static_cast<int32_t>(compiled.program.instructions.size()); ++i) {
      compiled.stages.push_back(isa::Stage{.first = i, .count = 1});
    }
  }
  hoistConstantStages(compiled);
  planMemory(compiled, options.tile_memory_bytes);
  check(compiled, "fusion and memory planning", true, options);
  return compiled;
}

}  // namespace pto::compiler
