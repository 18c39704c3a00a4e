#include "sim_program.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>

#include "isa/instruction_cost.h"
#include "isa/tiling.h"
#include "kernels/execute.h"
#include "sim_parallel.h"

namespace pto::rt::sim {
namespace {

using isa::Placement;

class InstructionFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Elements of a tiled stage below which its tiles run on the calling core alone:
// handing tiles to another core costs 1-3 microseconds
// (benchmarks/bench_parallel_for.cpp), a fraction of what a core takes for a
// fused row program over this many.
constexpr int64_t kSerialStageElements = 1 << 15;

// One thread's tile scratch, kept between tiles and launches.
char* scratchOfThisThread(uint64_t bytes) {
  thread_local std::unique_ptr<char[]> storage;
  thread_local uint64_t capacity = 0;
  if (capacity < bytes + 64) {
    capacity = bytes + 64;
    storage.reset(new char[capacity]);
  }
  const auto address = reinterpret_cast<uintptr_t>(storage.get());
  return reinterpret_cast<char*>((address + 63) / 64 * 64);
}

}  // namespace

SimProgram::SimProgram(std::shared_ptr<const isa::ScheduledProgram> scheduled)
    : scheduled_(std::move(scheduled)),
      name_(scheduled_->program.instructions.size() == 1
                ? isa::info(scheduled_->program.instructions[0].opcode).name.data()  // a literal of the table
                : "program") {
  const isa::ScheduledProgram& program = *scheduled_;
  scratch_of_.resize(program.stages.size());
  for (size_t s = 0; s < program.stages.size(); ++s) {
    const isa::Stage& stage = program.stages[s];
    auto& scratch = scratch_of_[s];
    for (int32_t i = stage.first; i < stage.first + stage.count; ++i) {
      for (const isa::Operand& operand : program.program.instructions[i].operands) {
        if (program.placements[operand.buffer].placement == Placement::kScratch &&
            std::find(scratch.begin(), scratch.end(), operand.buffer) == scratch.end()) {
          scratch.push_back(operand.buffer);
        }
      }
    }
  }
  if (program.constant_bytes == 0) return;
  constants_.reset(static_cast<char*>(::operator new(program.constant_bytes, std::align_val_t{64})));
  std::vector<void*> buffers(program.placements.size(), nullptr);
  for (size_t b = 0; b < buffers.size(); ++b) {
    if (program.placements[b].placement == Placement::kConstant) buffers[b] = constants_.get() + program.placements[b].offset;
  }
  for (size_t s = 0; s < program.stages.size(); ++s) {
    if (program.stages[s].at_load) runStage(s, buffers);
  }
}

void SimProgram::FreeAligned::operator()(char* memory) const { ::operator delete(memory, std::align_val_t{64}); }

std::vector<void*> SimProgram::bufferAddresses(std::span<void* const> bound, void* workspace) const {
  const isa::ScheduledProgram& program = *scheduled_;
  std::vector<void*> buffers(program.placements.size(), nullptr);
  for (size_t b = 0; b < buffers.size(); ++b) {
    const isa::BufferPlacement& place = program.placements[b];
    if (place.placement == Placement::kBound) buffers[b] = bound[b];
    if (place.placement == Placement::kWorkspace) buffers[b] = static_cast<char*>(workspace) + place.offset;
    if (place.placement == Placement::kConstant) buffers[b] = constants_.get() + place.offset;
  }
  for (size_t b = 0; b < buffers.size(); ++b) {  // after their hosts are bound
    const isa::BufferPlacement& place = program.placements[b];
    if (place.placement == Placement::kInOutput) buffers[b] = static_cast<char*>(bound[place.host]) + place.offset;
  }
  return buffers;
}

namespace {

void executeNamed(int32_t index, const isa::Instruction& instruction, std::span<void* const> buffers, bool alone) {
  try {
    kernels::execute(instruction, buffers);
  } catch (const InstructionFailure&) {
    throw;
  } catch (const std::exception& error) {
    if (alone) throw InstructionFailure(error.what());
    throw InstructionFailure("instruction " + std::to_string(index) + " (" +
                             std::string(isa::info(instruction.opcode).name) + "): " + error.what());
  }
}

}  // namespace

void SimProgram::runTiles(size_t s, std::span<void* const> bound, int64_t begin, int64_t end) const {
  const isa::ScheduledProgram& program = *scheduled_;
  const isa::Stage& stage = program.stages[s];
  std::vector<void*> buffers(bound.begin(), bound.end());
  char* base = scratchOfThisThread(stage.scratch_bytes);
  std::vector<bool> in_scratch(buffers.size());
  for (int32_t b : scratch_of_[s]) {
    buffers[b] = base + program.placements[b].offset;
    in_scratch[b] = true;
  }
  const int t = stage.tile_dim;
  const int64_t row_tiles = (stage.domain[t] + stage.tile_rows - 1) / stage.tile_rows;
  std::array<int64_t, isa::kMaxRank> outer{};
  isa::Instruction tile_instruction;
  for (int64_t tile = begin; tile < end; ++tile) {
    const int64_t row = (tile % row_tiles) * stage.tile_rows;
    const int64_t rows = std::min(stage.tile_rows, stage.domain[t] - row);
    for (int64_t rest = tile / row_tiles, d = t - 1; d >= 0; --d) {
      outer[d] = rest % stage.domain[d];
      rest /= stage.domain[d];
    }
    for (int32_t i = stage.first; i < stage.first + stage.count; ++i) {
      const isa::Instruction& instruction = program.program.instructions[i];
      tile_instruction = instruction;
      for (size_t k = 0; k < instruction.operands.size(); ++k) {
        if (!isa::slicedOperand(instruction, k)) continue;
        const isa::Operand& operand = instruction.operands[k];
        tile_instruction.operands[k] = isa::sliceOperand(operand, stage, outer.data(), row, rows, in_scratch[operand.buffer]);
      }
      executeNamed(i, tile_instruction, buffers, false);
    }
  }
}

void SimProgram::runStage(size_t s, std::span<void* const> buffers) const {
  const isa::ScheduledProgram& program = *scheduled_;
  const isa::Stage& stage = program.stages[s];
  if (!stage.tiled()) {
    const bool alone = program.program.instructions.size() == 1;
    for (int32_t i = stage.first; i < stage.first + stage.count; ++i) {
      executeNamed(i, program.program.instructions[i], buffers, alone);
    }
    return;
  }
  const auto tiles = static_cast<size_t>(stage.tileCount());
  auto body = [&](size_t begin, size_t end) {
    runTiles(s, buffers, static_cast<int64_t>(begin), static_cast<int64_t>(end));
  };
  if (stage.parallel_tiles) {
    // Chunks of whole tiles, each of at least kSerialStageElements of the stage's output.
    const int64_t elements = std::max<int64_t>(1, program.program.instructions[stage.first].operands[0].numel());
    const auto grain = static_cast<size_t>(
        std::max<int64_t>(1, (kSerialStageElements * static_cast<int64_t>(tiles) + elements - 1) / elements));
    parallelFor(tiles, grain, body);
  } else {
    body(0, tiles);
  }
}

void SimProgram::run(std::span<void* const> buffers, std::vector<ptoActivity>* inside) const {
  const isa::ScheduledProgram& program = *scheduled_;
  const bool record_stages = inside != nullptr && program.program.instructions.size() > 1;
  for (size_t s = 0; s < program.stages.size(); ++s) {
    if (program.stages[s].at_load) continue;
    const uint64_t start_ns = record_stages ? ptoProfilerNow() : 0;
    runStage(s, buffers);
    if (record_stages) inside->push_back(stageActivity(program.stages[s], start_ns));
  }
}

// A stage's activity: its instruction, or the fused stage's instructions by name;
// the bytes that reach memory (not tile scratch).
ptoActivity SimProgram::stageActivity(const isa::Stage& stage, uint64_t start_ns) const {
  const isa::ScheduledProgram& program = *scheduled_;
  ptoActivity activity{};
  activity.kind = PTO_ACTIVITY_STAGE;
  activity.start_ns = start_ns;
  activity.end_ns = ptoProfilerNow();
  std::string name = stage.count > 1 ? "fused:" : "";
  for (int32_t i = stage.first; i < stage.first + stage.count; ++i) {
    const isa::Instruction& instruction = program.program.instructions[i];
    name += (i > stage.first ? "+" : "") + std::string(isa::info(instruction.opcode).name);
    activity.flops += isa::costOf(instruction).flops;
    for (const isa::Operand& operand : instruction.operands) {
      if (program.placements[operand.buffer].placement != Placement::kScratch) activity.bytes += isa::operandBytes(operand);
    }
  }
  std::snprintf(activity.name, sizeof activity.name, "%s", name.c_str());
  const std::string detail = isa::operandSummary(program.program.instructions[stage.first]) +
                             (stage.tiled() ? ", " + std::to_string(stage.tileCount()) + " tiles" : "");
  std::snprintf(activity.detail, sizeof activity.detail, "%s", detail.c_str());
  return activity;
}

const ptoActivity& SimProgram::launchActivity() const {
  std::call_once(activity_once_, [this] {
    const isa::Program& program = scheduled_->program;
    std::snprintf(activity_.name, sizeof activity_.name, "%s", name_);
    if (program.instructions.size() == 1) {
      const isa::InstructionCost cost = isa::costOf(program.instructions[0]);
      activity_.kind = PTO_ACTIVITY_INSTRUCTION;
      activity_.bytes = cost.bytes;
      activity_.flops = cost.flops;
      std::snprintf(activity_.detail, sizeof activity_.detail, "%s", isa::operandSummary(program.instructions[0]).c_str());
      return;
    }
    activity_.kind = PTO_ACTIVITY_PROGRAM;
    const std::string detail = std::to_string(program.instructions.size()) + " instructions in " +
                               std::to_string(scheduled_->stages.size()) + " stages";
    std::snprintf(activity_.detail, sizeof activity_.detail, "%s", detail.c_str());
  });
  return activity_;
}

}  // namespace pto::rt::sim
