// What the compiler makes of a Program: its instructions grouped into kernels
// (one tile loop each) and a place for every buffer: bound to caller memory,
// in the arena of temporaries, or in a tile's scratch (the simulated Unified
// Buffer) when no other kernel ever sees it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "isa/program.h"

namespace pto::compiler {

// Consecutive instructions [first, first + count) run as one unit. Untiled
// (tile_dim < 0), each runs whole, spread over the cores. Tiled, the kernel's
// instructions share the extents `domain` of dimensions 0..tile_dim; a tile is one
// index of the dimensions before tile_dim and `tile_rows` indices along it, and
// every instruction of the kernel runs on a tile before the next tile starts, so a
// tile's intermediates stay in its scratch.
struct Kernel {
  int32_t first = 0;
  int32_t count = 1;
  int32_t tile_dim = -1;
  int64_t tile_rows = 0;
  std::array<int64_t, isa::kMaxRank> domain{};
  // Tiles run in parallel over the cores, or one after another when a GEMM is
  // inside (BLAS spreads each GEMM over the cores itself).
  bool parallel_tiles = true;
  uint64_t scratch_bytes = 0;  // per tile

  bool tiled() const { return tile_dim >= 0; }
  int64_t tileCount() const;
};

enum class Placement : uint8_t {
  kBound,   // an input or output: the caller's memory
  kArena,   // a temporary that crosses kernels: at `offset` in the arena
  kScratch, // a temporary inside one tiled kernel: at `offset` in each tile's scratch
  kInOutput,  // a temporary whose life ends before output buffer `host` is first
              // written: at `offset` in that output's memory (no arena needed for it)
  kUnused,  // no instruction refers to it any more
};

struct BufferPlacement {
  Placement placement = Placement::kBound;
  uint64_t offset = 0;
  int64_t row_pitch = 0;  // kScratch: elements between consecutive tile rows
  int32_t host = -1;      // kInOutput: the output buffer it lives in
};

struct CompiledProgram {
  isa::Program program;
  std::vector<Kernel> kernels;
  std::vector<BufferPlacement> placements;  // one per buffer
  uint64_t arena_bytes = 0;

  int fusedKernelCount() const;  // tiled kernels of more than one instruction
};

struct CompileOptions {
  bool debug = false;  // print the program (PTO-AS) before and after each pass, to stderr
  bool fuse = true;    // false: every instruction is a kernel of its own
};

// Runs the passes (dead code, common subexpressions, fusion, memory planning),
// verifying after each. Throws std::invalid_argument naming the pass and the
// instruction when the program (or a pass's result) does not verify.
CompiledProgram compile(isa::Program program, const CompileOptions& options = {});

// PTO-AS with the compiler's decisions as comments: it still parses as the program.
std::string print(const CompiledProgram& compiled);

// Checks the kernels and placements against the program: every instruction in
// exactly one kernel, in order; a tiled kernel's instructions legal to interleave
// by tile; scratch buffers used by one kernel only; arena temporaries that are live
// at once never overlap. Returns "" when sound, else what is wrong.
std::string verifyPlan(const CompiledProgram& compiled);

}  // namespace pto::compiler
