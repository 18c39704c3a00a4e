// A program with its schedule: the program's instructions grouped into stages
// (one instruction run whole, or several fused into one tile loop) and a place
// for every buffer: bound to the launch's memory, in the launch's workspace, in
// a tile's scratch (the Unified Buffer) when no other stage ever sees it, or in
// the loaded program's constants when it holds the same values at every launch.
// The compiler makes schedules; a driver runs them; both read this definition.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "program.h"

namespace pto::isa {

// Consecutive instructions [first, first + count) run as one unit. Untiled
// (tile_dim < 0), each runs whole, spread over the cores. Tiled (a fused stage),
// the stage's instructions share the extents `domain` of dimensions 0..tile_dim;
// a tile is one index of the dimensions before tile_dim and `tile_rows` indices
// along it, and every instruction of the stage runs on a tile before the next
// tile starts, so a tile's intermediates stay in its scratch.
struct Stage {
  int32_t first = 0;
  int32_t count = 1;
  int32_t tile_dim = -1;
  int64_t tile_rows = 0;
  std::array<int64_t, kMaxRank> domain{};
  // Tiles run in parallel over the cores, or one after another when a GEMM is
  // inside (BLAS spreads each GEMM over the cores itself).
  bool parallel_tiles = true;
  uint64_t scratch_bytes = 0;  // per tile
  // Reads and writes constants only (kConstant buffers): the driver runs it once,
  // when it loads the program, and never at a launch (a scalar's fill would
  // otherwise be a stage and a workspace allocation of every call).
  bool at_load = false;

  bool tiled() const { return tile_dim >= 0; }
  int64_t tileCount() const;
};

enum class Placement : uint8_t {
  kBound,      // an input or output: memory the launch binds
  kWorkspace,  // a temporary that crosses stages: at `offset` in the launch's workspace
  kScratch,    // a temporary inside one tiled stage: at `offset` in each tile's scratch
  kInOutput,   // a temporary whose life ends before output buffer `host` is first
               // written (or in that stage, read ahead of the rows it writes:
               // readAheadOfRowWrites): at `offset` in that output's memory (no
               // workspace needed for it)
  kConstant,   // a temporary that only at-load stages write: at `offset` in the
               // constants the driver keeps with the loaded program
  kUnused,     // no instruction refers to it any more
};

struct BufferPlacement {
  Placement placement = Placement::kBound;
  uint64_t offset = 0;
  int64_t row_pitch = 0;  // kScratch: elements between consecutive tile rows
  int32_t host = -1;      // kInOutput: the output buffer it lives in
};

struct ScheduledProgram {
  Program program;
  std::vector<Stage> stages;
  std::vector<BufferPlacement> placements;  // one per buffer
  uint64_t workspace_bytes = 0;
  uint64_t constant_bytes = 0;  // the loaded program's constants

  int fusedStageCount() const;  // tiled stages of more than one instruction
};

// The plain schedule: each instruction a stage of its own, run whole; every
// temporary in the workspace, one after another.
ScheduledProgram scheduleInOrder(Program program);

// Checks the stages and placements against the program: every instruction in
// exactly one stage, in order; a tiled stage's instructions legal to interleave by
// tile (tiling.h); scratch buffers used by one stage only; workspace temporaries
// that are live at once never overlap; at-load stages touching constants alone,
// which nothing else writes. Returns "" when sound, else what is wrong.
std::string verifySchedule(const ScheduledProgram& scheduled);

// Per buffer, whether it is a temporary that at-load stages write and no other stage
// does: what kConstant placements hold.
std::vector<bool> writtenAtLoadOnly(const Program& program, const std::vector<Stage>& stages);

// The stages, first and last, that use each buffer ({-1, -1}: none).
struct StageSpan {
  int32_t first = -1, last = -1;
};
std::vector<StageSpan> stageLifetimes(const Program& program, const std::vector<Stage>& stages);

// Whether temporary `temp`, placed at byte `offset` inside output `host`, may stay live
// into `stage`, the stage that first writes the host: the stage runs its tiles in order
// along dimension 0; each tile reads only its own rows of the temporary, all of them
// before it writes the host; and no tile writes where a later tile's rows of the
// temporary lie (rows of the host no narrower than the temporary's, which ends near the
// host's end: a GEMM's output over its prologue's input).
bool readAheadOfRowWrites(const Program& program, const Stage& stage, int32_t temp, int32_t host, uint64_t offset);

// PTO-AS with the schedule as comments: it still parses as the program.
std::string print(const ScheduledProgram& scheduled);

}  // namespace pto::isa
