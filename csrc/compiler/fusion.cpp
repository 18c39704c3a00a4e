#include <algorithm>

#include "passes.h"
#include "isa/tiling.h"

namespace pto::compiler {
namespace {

int64_t innerElements(const isa::Program& program, int32_t first, int32_t count, int t) {
  int64_t widest = 1;
  for (int32_t i = first; i < first + count; ++i) {
    for (const isa::Operand& operand : program.instructions[i].operands) {
      int64_t inner = 1;
      for (int d = t + 1; d < operand.rank; ++d) inner *= operand.shape[d];
      widest = std::max(widest, inner);
    }
  }
  return widest;
}

bool has(const isa::Instruction& instruction, isa::Property property) {
  return isa::info(instruction.opcode).has(property);
}

bool holdsGemm(const isa::Program& program, int32_t first, int32_t count) {
  for (int32_t i = first; i < first + count; ++i) {
    if (has(program.instructions[i], isa::Property::Gemm)) return true;
  }
  return false;
}

// The dimension to tile over, at most `deepest`: the deepest one whose rows are
// not too short for a tile of `tile_elements`, else an outer one so that a tile
// holds several short rows' worth.
int chooseTileDim(const isa::Program& program, int32_t first, int32_t count, int deepest, int64_t tile_elements) {
  const isa::Operand& lead = program.instructions[first].operands[0];
  int t = deepest;
  while (t > 0 && innerElements(program, first, count, t) * lead.shape[t] < tile_elements) --t;
  return t;
}

// The deepest tile dimension the stage [first, first + count) allows, or -1.
int deepestShared(const isa::Program& program, int32_t first, int32_t count) {
  const isa::Operand& lead = program.instructions[first].operands[0];
  int deepest = isa::kMaxRank;
  for (int32_t i = first; i < first + count; ++i) {
    const isa::Instruction& instruction = program.instructions[i];
    if (!isa::fusable(instruction)) return -1;
    const isa::Operand& out = instruction.operands[0];
    int shared = -1;
    while (shared + 1 < std::min(out.rank, lead.rank) && out.shape[shared + 1] == lead.shape[shared + 1]) ++shared;
    deepest = std::min({deepest, isa::deepestTileDim(instruction), shared});
  }
  return deepest;
}

isa::Stage tiledStage(const isa::Program& program, int32_t first, int32_t count, int t,
                      const CompileOptions& options) {
  isa::Stage stage;
  stage.first = first;
  stage.count = count;
  stage.tile_dim = t;
  const isa::Operand& lead = program.instructions[first].operands[0];
  std::copy_n(lead.shape.begin(), t + 1, stage.domain.begin());
  const bool gemm = holdsGemm(program, first, count);
  stage.parallel_tiles = !gemm || options.parallel_gemm_tiles;
  const int64_t rows = gemm ? options.gemm_tile_rows : options.tile_elements / innerElements(program, first, count, t);
  stage.tile_rows = std::clamp<int64_t>(rows, 1, std::max<int64_t>(1, lead.shape[t]));
  return stage;
}

// Whether nothing after instruction `after` reads `buffer`, and the caller does not see it.
bool onlyReadUpTo(const isa::Program& program, int32_t buffer, int32_t after) {
  if (program.buffers[buffer].kind != isa::BufferKind::kTemp) return false;
  for (size_t i = after + 1; i < program.instructions.size(); ++i) {
    for (const isa::Operand& operand : program.instructions[i].operands) {
      if (operand.buffer == buffer) return false;
    }
  }
  return true;
}

// Whether `next` may join the stage [first, first + count) as far as its GEMM goes:
// a GEMM stage is a GEMM with what sets up its operands before it (the copies that set
// up its output: the bias; where it writes an output, a prologue computing the rows of
// its left operand that only it reads: a layer norm, whose rows then live in tile
// scratch, not in memory) and
// elementwise instructions after it (its epilogue). Reductions and row ops after it, and
// other GEMMs, keep to stages of their own, where their tiles can be sized for them.
bool gemmAllows(const isa::Program& program, int32_t first, int32_t count, const isa::Instruction& next) {
  if (has(next, isa::Property::Gemm)) {
    if (holdsGemm(program, first, count)) return false;
    bool bias_only = true, writes_left = false;
    for (int32_t i = first; i < first + count; ++i) {
      const isa::Instruction& before = program.instructions[i];
      bias_only = bias_only && has(before, isa::Property::Copy) && before.operands[0].buffer == next.operands[0].buffer;
      writes_left = writes_left || before.operands[0].buffer == next.operands[1].buffer;
    }
    // The prologue's rows run in the GEMM's tiles (one after another, where the target
    // runs GEMM tiles in order), where they had tiles over the cores of their own: worth
    // it where the GEMM writes an output (the logits), whose memory can then hold what
    // the prologue reads (memory_plan.cpp).
    const bool writes_output = program.buffers[next.operands[0].buffer].kind == isa::BufferKind::kOutput;
    return bias_only ||
           (writes_left && writes_output && onlyReadUpTo(program, next.operands[1].buffer, first + count));
  }
  if (!holdsGemm(program, first, count)) return true;
  if (!has(next, isa::Property::Elementwise)) return false;
  // An epilogue reads what the stage computed; anything else (the next GEMM's bias)
  // goes with what reads it.
  for (size_t k = 1; k < next.operands.size(); ++k) {
    for (int32_t i = first; i < first + count; ++i) {
      if (program.instructions[i].operands[0].buffer == next.operands[k].buffer) return true;
    }
  }
  return false;
}

}  // namespace

std::vector<isa::Stage> fuse(const isa::Program& program, const CompileOptions& options) {
  std::vector<isa::Stage> stages;
  const auto total = static_cast<int32_t>(program.instructions.size());
  for (int32_t first = 0; first < total;) {
    int32_t count = 1;
    int tile_dim = -1;
    if (deepestShared(program, first, 1) >= 0) {
      while (first + count < total && gemmAllows(program, first, count, program.instructions[first + count])) {
        const int deepest = deepestShared(program, first, count + 1);
        if (deepest < 0) break;
        const int t = chooseTileDim(program, first, count + 1, deepest, options.tile_elements);
        if (!isa::checkTiling(program, first, count + 1, t).empty()) break;
        tile_dim = t;
        ++count;
      }
    }
    if (count > 1) {
      stages.push_back(tiledStage(program, first, count, tile_dim, options));
    } else {
      stages.push_back(isa::Stage{.first = first, .count = 1});
    }
    first += count;
  }
  return stages;
}

}  // namespace pto::compiler
