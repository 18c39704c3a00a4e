#include <algorithm>
#include <cstdint>

#include "passes.h"
#include "isa/tiling.h"

namespace pto::compiler {
namespace {

constexpr uint64_t kAlignment = 64;

uint64_t aligned(uint64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

struct Lifetime {
  int32_t buffer;
  int32_t first_stage, last_stage;
  uint64_t bytes;
};

}  // namespace

// A tile's scratch takes at most tile_memory_bytes (the Unified Buffer); GEMM
// stages' tiles are sized for BLAS instead and may exceed it.
void planMemory(isa::ScheduledProgram& compiled, uint64_t tile_memory_bytes) {
  const isa::Program& program = compiled.program;
  const size_t buffer_count = program.buffers.size();
  const std::vector<isa::StageSpan> spans = isa::stageLifetimes(program, compiled.stages);
  std::vector<const isa::Operand*> some_operand(buffer_count, nullptr);
  for (const isa::Instruction& instruction : program.instructions) {
    for (const isa::Operand& operand : instruction.operands) some_operand[operand.buffer] = &operand;
  }

  compiled.placements.assign(buffer_count, isa::BufferPlacement{});
  const std::vector<bool> constant = isa::writtenAtLoadOnly(program, compiled.stages);
  compiled.constant_bytes = 0;
  std::vector<Lifetime> workspace;
  std::vector<uint64_t> row_bytes(compiled.stages.size(), 0);
  for (size_t b = 0; b < buffer_count; ++b) {
    isa::BufferPlacement& place = compiled.placements[b];
    if (program.buffers[b].kind != isa::BufferKind::kTemp) continue;
    if (constant[b]) {
      place = isa::BufferPlacement{.placement = isa::Placement::kConstant, .offset = compiled.constant_bytes};
      compiled.constant_bytes += aligned(program.buffers[b].bytes);
      continue;
    }
    if (spans[b].first < 0) {
      place.placement = isa::Placement::kUnused;
      continue;
    }
    const isa::Stage& stage = compiled.stages[spans[b].first];
    // Every use of a temporary inside one tiled stage is row aligned (the stage
    // writes it), so each tile needs only its own rows of it.
    if (spans[b].first == spans[b].last && stage.tiled()) {
      place.placement = isa::Placement::kScratch;
      place.row_pitch = isa::rowPitch(*some_operand[b], stage.tile_dim);
      row_bytes[spans[b].first] += aligned(place.row_pitch * isa::dtypeSize(some_operand[b]->dtype));
      continue;
    }
    place.placement = isa::Placement::kWorkspace;
    workspace.push_back({static_cast<int32_t>(b), spans[b].first, spans[b].last, aligned(program.buffers[b].bytes)});
  }

  // Tiles small enough for the Unified Buffer, then each scratch buffer's place in it.
  for (size_t k = 0; k < compiled.stages.size(); ++k) {
    isa::Stage& stage = compiled.stages[k];
    if (!stage.tiled() || row_bytes[k] == 0) continue;
    if (stage.parallel_tiles) {
      stage.tile_rows = std::clamp<int64_t>(static_cast<int64_t>(tile_memory_bytes / row_bytes[k]), 1, stage.tile_rows);
    }
  }
  std::vector<uint64_t> scratch_used(compiled.stages.size(), 0);
  for (size_t b = 0; b < buffer_count; ++b) {
    isa::BufferPlacement& place = compiled.placements[b];
    if (place.placement != isa::Placement::kScratch) continue;
    isa::Stage& stage = compiled.stages[spans[b].first];
    place.offset = scratch_used[spans[b].first];
    scratch_used[spans[b].first] +=
        aligned(static_cast<uint64_t>(stage.tile_rows * place.row_pitch) * isa::dtypeSize(some_operand[b]->dtype));
    stage.scratch_bytes = scratch_used[spans[b].first];
  }

  // Largest first, each temporary goes where it is clear of every placed one whose
  // lifetime meets its own: inside an output that is not written until after it dies
  // (that memory is the caller's already), or at the end of the output whose writing
  // stage reads it ahead of the rows it writes, else at the lowest such offset of the workspace.
  std::stable_sort(workspace.begin(), workspace.end(), [](const Lifetime& a, const Lifetime& b) { return a.bytes > b.bytes; });
  std::vector<int32_t> outputs;
  for (size_t b = 0; b < buffer_count; ++b) {
    if (program.buffers[b].kind == isa::BufferKind::kOutput && spans[b].first > 0) outputs.push_back(static_cast<int32_t>(b));
  }
  std::stable_sort(outputs.begin(), outputs.end(),
                   [&](int32_t a, int32_t b) { return program.buffers[a].bytes > program.buffers[b].bytes; });
  std::vector<const Lifetime*> placed;
  // The lowest offset below `limit` in region `host` (-1: the workspace) clear of the placed
  // temporaries live with `temp`, or UINT64_MAX.
  auto lowestFree = [&](const Lifetime& temp, int32_t host, uint64_t limit) {
    std::vector<std::pair<uint64_t, uint64_t>> taken;
    for (const Lifetime* other : placed) {
      const isa::BufferPlacement& where = compiled.placements[other->buffer];
      const int32_t other_host = where.placement == isa::Placement::kInOutput ? where.host : -1;
      if (other_host != host || other->last_stage < temp.first_stage || temp.last_stage < other->first_stage) continue;
      taken.emplace_back(where.offset, where.offset + other->bytes);
    }
    std::sort(taken.begin(), taken.end());
    uint64_t offset = 0;
    for (const auto& [start, end] : taken) {
      if (offset + temp.bytes <= start) break;
      offset = std::max(offset, end);
    }
    return offset + temp.bytes <= limit ? offset : UINT64_MAX;
  };
  // Whether [offset, offset + temp.bytes) of `host` is clear of the placed temporaries live with `temp`.
  auto clearAt = [&](const Lifetime& temp, int32_t host, uint64_t offset) {
    return std::none_of(placed.begin(), placed.end(), [&](const Lifetime* other) {
      const isa::BufferPlacement& where = compiled.placements[other->buffer];
      return where.placement == isa::Placement::kInOutput && where.host == host &&
             !(other->last_stage < temp.first_stage || temp.last_stage < other->first_stage) &&
             where.offset < offset + temp.bytes && offset < where.offset + other->bytes;
    });
  };
  compiled.workspace_bytes = 0;
  for (const Lifetime& temp : workspace) {
    isa::BufferPlacement& place = compiled.placements[temp.buffer];
    for (int32_t host : outputs) {
      if (temp.last_stage > spans[host].first) continue;
      if (temp.last_stage == spans[host].first) {
        // Read by the stage that writes the host, each tile's rows before the tile writes
        // (a GEMM's prologue input): at the host's end, which the tiles write last.
        const uint64_t host_bytes = program.buffers[host].bytes;
        if (host_bytes < temp.bytes) continue;
        const uint64_t end = (host_bytes - temp.bytes) / kAlignment * kAlignment;
        if (!clearAt(temp, host, end) ||
            !isa::readAheadOfRowWrites(program, compiled.stages[temp.last_stage], temp.buffer, host, end)) {
          continue;
        }
        place = isa::BufferPlacement{.placement = isa::Placement::kInOutput, .offset = end, .host = host};
        break;
      }
      const uint64_t offset = lowestFree(temp, host, program.buffers[host].bytes / kAlignment * kAlignment);
      if (offset == UINT64_MAX) continue;
      place = isa::BufferPlacement{.placement = isa::Placement::kInOutput, .offset = offset, .host = host};
      break;
    }
    if (place.placement != isa::Placement::kInOutput) {
      place.offset = lowestFree(temp, -1, UINT64_MAX);
      compiled.workspace_bytes = std::max(compiled.workspace_bytes, place.offset + temp.bytes);
    }
    placed.push_back(&temp);
  }
}

}  // namespace pto::compiler
