// The compiler's entry point: a Program in, a ScheduledProgram (isa/schedule.h)
// out, for a driver to load and run. The compiler depends on the isa alone.
#pragma once

#include <cstdint>

#include "isa/schedule.h"
#include "isa/tuning.h"

namespace pto::compiler {

// How to compile, and for what target. The target's numbers are the device's
// tuning: a caller fills them from the device's attributes (the torch glue's
// compileOptionsFor); left alone they are the PTO ISA's reference core's.
struct CompileOptions {
  bool debug = false;  // print the program (PTO-AS) before and after each pass, to stderr
  bool fuse = true;    // false: every instruction is a stage of its own
  // What one tile's scratch may take: the target core's Unified Buffer
  // (PTO_DEVICE_ATTR_UNIFIED_BUFFER_BYTES).
  uint64_t tile_memory_bytes = isa::reference_core::kUnifiedBufferBytes;
  // Elements of one instruction's tile a fused stage aims at (PTO_DEVICE_ATTR_TILE_ELEMENTS).
  int64_t tile_elements = isa::reference_core::kTileElements;
  // Output rows of a tile of a stage that holds a GEMM (PTO_DEVICE_ATTR_GEMM_TILE_ROWS).
  int64_t gemm_tile_rows = isa::reference_core::kGemmTileRows;
  // Whether such a stage's tiles run in parallel (PTO_DEVICE_ATTR_PARALLEL_GEMM_TILES).
  bool parallel_gemm_tiles = isa::reference_core::kParallelGemmTiles;
};

// Runs the passes (dead code, common subexpressions, dimension collapsing,
// fusion, memory planning), verifying after each. Throws std::invalid_argument
// naming the pass and the instruction when the program (or a pass's result)
// does not verify.
isa::ScheduledProgram compile(isa::Program program, const CompileOptions& options = {});

}  // namespace pto::compiler
