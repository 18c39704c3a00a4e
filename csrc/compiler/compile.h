// The compiler's entry point: a Program in, a ScheduledProgram (isa/schedule.h)
// out, for a driver to load and run. The compiler depends on the isa alone.
#pragma once

#include <cstdint>

#include "isa/schedule.h"

namespace pto::compiler {

struct CompileOptions {
  bool debug = false;  // print the program (PTO-AS) before and after each pass, to stderr
  bool fuse = true;    // false: every instruction is a stage of its own
  // What one tile's scratch may take: the target core's Unified Buffer
  // (PTO_DEVICE_ATTR_UNIFIED_BUFFER_BYTES); 192 KiB is the PTO ISA's.
  uint64_t tile_memory_bytes = 192 * 1024;
};

// Runs the passes (dead code, common subexpressions, dimension collapsing,
// fusion, memory planning), verifying after each. Throws std::invalid_argument
// naming the pass and the instruction when the program (or a pass's result)
// does not verify.
isa::ScheduledProgram compile(isa::Program program, const CompileOptions& options = {});

}  // namespace pto::compiler
