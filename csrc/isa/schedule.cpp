// The schedule's definition in code: its verifier, the plain schedule, PTO-AS.
#include "schedule.h"

#include <algorithm>
#include <string>

#include "tiling.h"

namespace pto::isa {

int ScheduledProgram::fusedStageCount() const {
  int fused = 0;
  for (const Stage& stage : stages) fused += stage.tiled() && stage.count > 1;
  return fused;
}

std::vector<StageSpan> stageLifetimes(const Program& program, const std::vector<Stage>& stages) {
  std::vector<StageSpan> spans(program.buffers.size());
  for (size_t k = 0; k < stages.size(); ++k) {
    for (int32_t i = stages[k].first; i < stages[k].first + stages[k].count; ++i) {
      for (const Operand& operand : program.instructions[i].operands) {
        StageSpan& span = spans[operand.buffer];
        if (span.first < 0) span.first = static_cast<int32_t>(k);
        span.last = static_cast<int32_t>(k);
      }
    }
  }
  return spans;
}

std::vector<bool> writtenAtLoadOnly(const Program& program, const std::vector<Stage>& stages) {
  std::vector<bool> only(program.buffers.size(), false), elsewhere(program.buffers.size(), false);
  for (const Stage& stage : stages) {
    for (int32_t i = stage.first; i < stage.first + stage.count; ++i) {
      const int32_t out = program.instructions[i].operands[0].buffer;
      (stage.at_load ? only : elsewhere)[out] = true;
    }
  }
  for (size_t b = 0; b < only.size(); ++b) {
    only[b] = only[b] && !elsewhere[b] && program.buffers[b].kind == BufferKind::kTemp;
  }
  return only;
}

int64_t Stage::tileCount() const {
  if (!tiled()) return 1;
  int64_t tiles = (domain[tile_dim] + tile_rows - 1) / tile_rows;
  for (int d = 0; d < tile_dim; ++d) tiles *= domain[d];
  return tiles;
}

namespace {

// Whether buffers a and b, placed in one region, share a byte.
bool overlap(const Program& program, const std::vector<BufferPlacement>& placements, size_t a, size_t b) {
  return placements[a].offset < placements[b].offset + program.buffers[b].bytes &&
         placements[b].offset < placements[a].offset + program.buffers[a].bytes;
}

// A tile's scratch buffers: used inside tiled stages only, every use row aligned
// within the pitch planned for it, and all of them inside the stage's scratch.
std::string checkScratch(const ScheduledProgram& scheduled) {
  const Program& program = scheduled.program;
  for (size_t k = 0; k < scheduled.stages.size(); ++k) {
    const Stage& stage = scheduled.stages[k];
    for (int32_t i = stage.first; i < stage.first + stage.count; ++i) {
      for (const Operand& operand : program.instructions[i].operands) {
        const BufferPlacement& place = scheduled.placements[operand.buffer];
        if (place.placement != Placement::kScratch) continue;
        const std::string where = "scratch buffer %" + std::to_string(operand.buffer) + " in stage " + std::to_string(k);
        if (!stage.tiled()) return where + ", which is not tiled";
        const int64_t pitch = rowPitch(operand, stage.tile_dim);
        if (pitch == 0 || pitch > place.row_pitch) return where + " is not row aligned within its pitch";
        const __int128 end = static_cast<__int128>(place.offset) +
                             static_cast<__int128>(stage.tile_rows) * place.row_pitch * dtypeSize(operand.dtype);
        if (place.row_pitch <= 0 || end > static_cast<__int128>(stage.scratch_bytes)) {
          return where + " overruns the tile's " + std::to_string(stage.scratch_bytes) + "-byte scratch";
        }
      }
    }
  }
  return "";
}

// Constants: exactly the temporaries that at-load stages alone write, inside the
// program's constants and apart from each other; an at-load stage touches nothing else.
std::string checkConstants(const ScheduledProgram& scheduled) {
  const Program& program = scheduled.program;
  const std::vector<bool> constant = writtenAtLoadOnly(program, scheduled.stages);
  std::vector<size_t> placed;
  for (size_t b = 0; b < program.buffers.size(); ++b) {
    const BufferPlacement& place = scheduled.placements[b];
    if (constant[b] != (place.placement == Placement::kConstant)) {
      return "buffer %" + std::to_string(b) + (constant[b] ? " is written at load only but is not a constant"
                                                           : " is a constant that is not written at load only");
    }
    if (!constant[b]) continue;
    if (place.offset + program.buffers[b].bytes > scheduled.constant_bytes) {
      return "constant %" + std::to_string(b) + " overruns the program's constants";
    }
    for (size_t other : placed) {
      if (overlap(program, scheduled.placements, other, b)) {
        return "constants %" + std::to_string(other) + " and %" + std::to_string(b) + " overlap";
      }
    }
    placed.push_back(b);
  }
  for (size_t k = 0; k < scheduled.stages.size(); ++k) {
    const Stage& stage = scheduled.stages[k];
    if (!stage.at_load) continue;
    for (int32_t i = stage.first; i < stage.first + stage.count; ++i) {
      for (const Operand& operand : program.instructions[i].operands) {
        if (!constant[operand.buffer]) {
          return "at-load stage " + std::to_string(k) + " touches buffer %" + std::to_string(operand.buffer) +
                 ", which is not a constant";
        }
      }
    }
  }
  return "";
}

}  // namespace

bool readAheadOfRowWrites(const Program& program, const Stage& stage, int32_t temp, int32_t host, uint64_t offset) {
  if (!stage.tiled() || stage.parallel_tiles || stage.tile_dim != 0) return false;
  const int64_t rows = stage.domain[0];
  int64_t temp_pitch = -1, host_pitch = -1;  // bytes between rows
  int32_t last_read = -1, first_write = -1;
  for (int32_t i = stage.first; i < stage.first + stage.count; ++i) {
    const Instruction& instruction = program.instructions[i];
    for (size_t k = 0; k < instruction.operands.size(); ++k) {
      const Operand& operand = instruction.operands[k];
      const bool reads_temp = operand.buffer == temp, writes_host = operand.buffer == host && k == 0;
      if (operand.buffer == temp && k == 0) return false;
      if (!reads_temp && !writes_host) continue;
      if (!slicedOperand(instruction, k) || operand.offset != 0 || operand.shape[0] != rows ||
          rowPitch(operand, 0) == 0) {
        return false;
      }
      int64_t& pitch = reads_temp ? temp_pitch : host_pitch;
      const auto bytes = static_cast<int64_t>(operand.strides[0] * dtypeSize(operand.dtype));
      if (pitch >= 0 && pitch != bytes) return false;
      pitch = bytes;
      if (reads_temp) last_read = i;
      if (writes_host && first_write < 0) first_write = i;
    }
  }
  if (last_read < 0 || first_write < 0 || last_read >= first_write || host_pitch < temp_pitch) return false;
  // Tile j - 1 writes the host below byte j * R * host_pitch; tile j's rows of the
  // temporary start at offset + j * R * temp_pitch.
  for (int64_t row = stage.tile_rows; row < rows; row += stage.tile_rows) {
    if (static_cast<int64_t>(offset) + row * temp_pitch < row * host_pitch) return false;
  }
  return true;
}

std::string verifySchedule(const ScheduledProgram& scheduled) {
  const Program& program = scheduled.program;
  if (scheduled.placements.size() != program.buffers.size()) return "a placement per buffer is missing";
  int32_t next = 0;
  for (size_t k = 0; k < scheduled.stages.size(); ++k) {
    const Stage& stage = scheduled.stages[k];
    if (stage.first != next || stage.count < 1) return "stage " + std::to_string(k) + " does not start where the last ended";
    next += stage.count;
    if (next > static_cast<int32_t>(program.instructions.size())) return "stage " + std::to_string(k) + " runs past the program";
    if (!stage.tiled()) continue;
    if (std::string why = checkTiling(program, stage.first, stage.count, stage.tile_dim); !why.empty()) {
      return "stage " + std::to_string(k) + ": " + why;
    }
    if (stage.tile_rows < 1) return "stage " + std::to_string(k) + " has empty tiles";
  }
  if (next != static_cast<int32_t>(program.instructions.size())) return "instructions after the last stage";
  for (size_t b = 0; b < program.buffers.size(); ++b) {
    const bool bound_kind = program.buffers[b].kind != BufferKind::kTemp;
    if (bound_kind != (scheduled.placements[b].placement == Placement::kBound)) {
      return "buffer %" + std::to_string(b) + (bound_kind ? " is an input or output not bound to the launch's memory"
                                                          : " is a temporary bound to the launch's memory");
    }
  }
  if (std::string why = checkScratch(scheduled); !why.empty()) return why;
  if (std::string why = checkConstants(scheduled); !why.empty()) return why;
  const std::vector<StageSpan> lifetime = stageLifetimes(program, scheduled.stages);
  for (size_t b = 0; b < program.buffers.size(); ++b) {
    if (lifetime[b].first < 0) continue;
    const Placement placement = scheduled.placements[b].placement;
    if (placement == Placement::kUnused) return "buffer %" + std::to_string(b) + " is used but placed nowhere";
    if (placement == Placement::kScratch && lifetime[b].first != lifetime[b].last) {
      return "scratch buffer %" + std::to_string(b) + " is used by two stages";
    }
  }
  auto regionOf = [&](const BufferPlacement& place) { return place.placement == Placement::kInOutput ? place.host : -1; };
  for (size_t a = 0; a < program.buffers.size(); ++a) {
    const BufferPlacement& pa = scheduled.placements[a];
    if (pa.placement != Placement::kWorkspace && pa.placement != Placement::kInOutput) continue;
    if (pa.placement == Placement::kWorkspace && pa.offset + program.buffers[a].bytes > scheduled.workspace_bytes) {
      return "buffer %" + std::to_string(a) + " overruns the workspace";
    }
    if (pa.placement == Placement::kInOutput) {
      const bool host_ok = pa.host >= 0 && pa.host < static_cast<int32_t>(program.buffers.size()) &&
                           program.buffers[pa.host].kind == BufferKind::kOutput;
      if (!host_ok || pa.offset + program.buffers[a].bytes > program.buffers[pa.host].bytes) {
        return "buffer %" + std::to_string(a) + " does not fit in the output it is placed in";
      }
      const bool read_ahead = lifetime[a].last == lifetime[pa.host].first &&
                              readAheadOfRowWrites(program, scheduled.stages[lifetime[a].last], static_cast<int32_t>(a),
                                                   pa.host, pa.offset);
      if (lifetime[a].last >= lifetime[pa.host].first && !read_ahead) {
        return "buffer %" + std::to_string(a) + " is still live when its host output %" + std::to_string(pa.host) + " is written";
      }
    }
    for (size_t b = a + 1; b < program.buffers.size(); ++b) {
      const BufferPlacement& pb = scheduled.placements[b];
      if ((pb.placement != Placement::kWorkspace && pb.placement != Placement::kInOutput) || regionOf(pa) != regionOf(pb)) continue;
      const bool live_together = !(lifetime[a].last < lifetime[b].first || lifetime[b].last < lifetime[a].first);
      if (live_together && overlap(program, scheduled.placements, a, b)) {
        return "buffers %" + std::to_string(a) + " and %" + std::to_string(b) + " are live at once and overlap";
      }
    }
  }
  return "";
}

std::string print(const ScheduledProgram& scheduled) {
  const Program& program = scheduled.program;
  const auto at_load = std::count_if(scheduled.stages.begin(), scheduled.stages.end(), [](const Stage& s) { return s.at_load; });
  std::string text = "# " + std::to_string(scheduled.stages.size()) + " stages (" +
                     std::to_string(scheduled.fusedStageCount()) + " fused" +
                     (at_load > 0 ? ", " + std::to_string(at_load) + " at load" : "") + "), workspace " +
                     std::to_string(scheduled.workspace_bytes) + " bytes" +
                     (scheduled.constant_bytes > 0 ? ", constants " + std::to_string(scheduled.constant_bytes) + " bytes" : "") +
                     "\n";
  for (size_t b = 0; b < program.buffers.size(); ++b) {
    std::string line = print(b, program.buffers[b]);
    const BufferPlacement& place = scheduled.placements[b];
    switch (place.placement) {
      case Placement::kBound: break;
      case Placement::kWorkspace: line += "  # workspace @" + std::to_string(place.offset); break;
      case Placement::kScratch: line += "  # tile scratch @" + std::to_string(place.offset); break;
      case Placement::kInOutput:
        line += "  # in output %" + std::to_string(place.host) + " @" + std::to_string(place.offset);
        break;
      case Placement::kConstant: line += "  # constant @" + std::to_string(place.offset); break;
      case Placement::kUnused: line += "  # unused"; break;
    }
    text += line + "\n";
  }
  for (size_t k = 0; k < scheduled.stages.size(); ++k) {
    const Stage& stage = scheduled.stages[k];
    text += "# stage " + std::to_string(k) + (stage.at_load ? " (at load)" : "");
    if (stage.tiled()) {
      text += ": " + std::to_string(stage.count) + " instructions fused, tiles of " +
              std::to_string(stage.tile_rows) + " along dim " + std::to_string(stage.tile_dim) + " of " +
              "[" + dimsText(stage.domain, stage.tile_dim + 1) + "]" + ", " + std::to_string(stage.tileCount()) + " tiles" +
              (stage.parallel_tiles ? "" : " in order");
    }
    text += "\n";
    for (int32_t i = stage.first; i < stage.first + stage.count; ++i) {
      text += print(program.instructions[i]) + "\n";
    }
  }
  return text;
}

ScheduledProgram scheduleInOrder(Program program) {
  ScheduledProgram scheduled;
  scheduled.placements.resize(program.buffers.size());
  for (size_t b = 0; b < program.buffers.size(); ++b) {
    if (program.buffers[b].kind != BufferKind::kTemp) continue;
    scheduled.placements[b] = {.placement = Placement::kWorkspace, .offset = scheduled.workspace_bytes};
    scheduled.workspace_bytes += (program.buffers[b].bytes + 63) / 64 * 64;
  }
  for (int32_t i = 0; i < static_cast<int32_t>(program.instructions.size()); ++i) {
    scheduled.stages.push_back(Stage{.first = i, .count = 1});
  }
  scheduled.program = std::move(program);
  return scheduled;
}

}  // namespace pto::isa
