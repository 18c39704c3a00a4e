#include "program_launch.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "kernels/execute.h"
#include "kernels/instruction_cost.h"
#include "runtime/sim/sim_parallel.h"
#include "tiling.h"

namespace pto::compiler {
namespace {

// What the launch carries to the worker (the kernel frees it).
struct ProgramRecord {
  std::shared_ptr<const CompiledProgram> compiled;
  std::vector<void*> buffers;  // every buffer's address; scratch ones are set per tile
  std::vector<std::vector<int32_t>> scratch_of;  // per kernel, the buffers in its tile scratch
};

class InstructionFailure : public std::exception {
 public:
  InstructionFailure(int32_t index, const isa::Instruction& instruction, const char* why)
      : message_("instruction " + std::to_string(index) + " (" + std::string(isa::info(instruction.opcode).name) +
                 "): " + why) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

void executeNamed(int32_t index, const isa::Instruction& instruction, std::span<void* const> buffers) {
  try {
    kernels::execute(instruction, buffers);
  } catch (const InstructionFailure&) {
    throw;
  } catch (const std::exception& error) {
    throw InstructionFailure(index, instruction, error.what());
  }
}

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

void runTiles(const ProgramRecord& record, const Kernel& kernel, const std::vector<int32_t>& scratch, int64_t begin,
              int64_t end) {
  const CompiledProgram& compiled = *record.compiled;
  std::vector<void*> buffers = record.buffers;
  char* base = scratchOfThisThread(kernel.scratch_bytes);
  std::vector<bool> in_scratch(buffers.size());
  for (int32_t b : scratch) {
    buffers[b] = base + compiled.placements[b].offset;
    in_scratch[b] = true;
  }
  const int t = kernel.tile_dim;
  const int64_t row_tiles = (kernel.domain[t] + kernel.tile_rows - 1) / kernel.tile_rows;
  std::array<int64_t, isa::kMaxRank> outer{};
  isa::Instruction tile_instruction;
  for (int64_t tile = begin; tile < end; ++tile) {
    const int64_t row = (tile % row_tiles) * kernel.tile_rows;
    const int64_t rows = std::min(kernel.tile_rows, kernel.domain[t] - row);
    for (int64_t rest = tile / row_tiles, d = t - 1; d >= 0; --d) {
      outer[d] = rest % kernel.domain[d];
      rest /= kernel.domain[d];
    }
    for (int32_t i = kernel.first; i < kernel.first + kernel.count; ++i) {
      const isa::Instruction& instruction = compiled.program.instructions[i];
      tile_instruction = instruction;
      for (size_t k = 0; k < instruction.operands.size(); ++k) {
        if (!slicedOperand(instruction, k)) continue;
        const isa::Operand& operand = instruction.operands[k];
        tile_instruction.operands[k] = sliceOperand(operand, kernel, outer.data(), row, rows, in_scratch[operand.buffer]);
      }
      executeNamed(i, tile_instruction, buffers);
    }
  }
}

// Kernel k of the program: untiled, each instruction whole; tiled, tile by tile.
void runKernel(const ProgramRecord& record, size_t k) {
  const CompiledProgram& compiled = *record.compiled;
  const Kernel& kernel = compiled.kernels[k];
  if (!kernel.tiled()) {
    for (int32_t i = kernel.first; i < kernel.first + kernel.count; ++i) {
      executeNamed(i, compiled.program.instructions[i], record.buffers);
    }
    return;
  }
  const auto tiles = static_cast<size_t>(kernel.tileCount());
  auto body = [&](size_t begin, size_t end) {
    runTiles(record, kernel, record.scratch_of[k], static_cast<int64_t>(begin), static_cast<int64_t>(end));
  };
  if (kernel.parallel_tiles) {
    rt::sim::parallelFor(tiles, 1, body);
  } else {
    body(0, tiles);
  }
}

// The profiler's activity of one kernel of a program: its instruction, or the
// fused kernel's instructions by name; bytes that reach memory (not tile scratch).
void recordKernelActivity(const CompiledProgram& compiled, const Kernel& kernel, uint64_t start_ns) {
  ptoActivity activity{};
  activity.kind = PTO_ACTIVITY_INSTRUCTION;
  activity.start_ns = start_ns;
  activity.end_ns = ptoProfilerNow();
  std::string name = kernel.count > 1 ? "fused:" : "";
  for (int32_t i = kernel.first; i < kernel.first + kernel.count; ++i) {
    const isa::Instruction& instruction = compiled.program.instructions[i];
    name += (i > kernel.first ? "+" : "") + std::string(isa::info(instruction.opcode).name);
    activity.flops += kernels::costOf(instruction).flops;
    for (const isa::Operand& operand : instruction.operands) {
      if (compiled.placements[operand.buffer].placement != Placement::kScratch) {
        activity.bytes += kernels::operandBytes(operand);
      }
    }
  }
  std::snprintf(activity.name, sizeof activity.name, "%s", name.c_str());
  const std::string detail = kernels::operandSummary(compiled.program.instructions[kernel.first]) +
                             (kernel.tiled() ? ", " + std::to_string(kernel.tileCount()) + " tiles" : "");
  std::snprintf(activity.detail, sizeof activity.detail, "%s", detail.c_str());
  ptoProfilerRecordInside(&activity);
}

void runProgram(const ProgramRecord& record) {
  const CompiledProgram& compiled = *record.compiled;
  const bool profiling = ptoProfilerEnabled() != 0;
  for (size_t k = 0; k < compiled.kernels.size(); ++k) {
    const Kernel& kernel = compiled.kernels[k];
    const uint64_t start_ns = profiling ? ptoProfilerNow() : 0;
    runKernel(record, k);
    if (profiling) recordKernelActivity(compiled, kernel, start_ns);
  }
  if (profiling) {
    const std::string detail = std::to_string(compiled.program.instructions.size()) + " instructions in " +
                               std::to_string(compiled.kernels.size()) + " kernels";
    ptoProfilerAnnotate(detail.c_str(), 0, 0);
  }
}

ptoError runRecord(const void* args) {
  std::unique_ptr<ProgramRecord> record(*static_cast<ProgramRecord* const*>(args));
  try {
    runProgram(*record);
  } catch (const std::exception& error) {
    return ptoSetKernelError(PTO_ERROR_LAUNCH_FAILED, error.what());
  }
  return PTO_SUCCESS;
}

}  // namespace

ptoError launchProgram(ptoStream stream, std::shared_ptr<const CompiledProgram> compiled,
                       std::span<void* const> bound, std::span<const uint64_t> bound_bytes, void* arena) {
  const isa::Program& program = compiled->program;
  if (bound.size() != program.buffers.size() || bound_bytes.size() != program.buffers.size()) {
    return ptoSetKernelError(PTO_ERROR_INVALID_VALUE, "launchProgram: one address and size per buffer");
  }
  auto record = std::make_unique<ProgramRecord>();
  record->buffers.assign(program.buffers.size(), nullptr);
  record->scratch_of.resize(compiled->kernels.size());
  for (size_t b = 0; b < program.buffers.size(); ++b) {
    const BufferPlacement& place = compiled->placements[b];
    if (place.placement == Placement::kBound) {
      if (bound[b] == nullptr && program.buffers[b].bytes > 0) {
        const std::string why = "launchProgram: buffer %" + std::to_string(b) + " is not bound";
        return ptoSetKernelError(PTO_ERROR_INVALID_VALUE, why.c_str());
      }
      if (bound_bytes[b] < program.buffers[b].bytes) {
        const std::string why = "launchProgram: buffer %" + std::to_string(b) + " needs " +
                                std::to_string(program.buffers[b].bytes) + " bytes, got " + std::to_string(bound_bytes[b]);
        return ptoSetKernelError(PTO_ERROR_INVALID_VALUE, why.c_str());
      }
      record->buffers[b] = bound[b];
    } else if (place.placement == Placement::kArena) {
      if (arena == nullptr) return ptoSetKernelError(PTO_ERROR_INVALID_VALUE, "launchProgram: the program needs an arena");
      record->buffers[b] = static_cast<char*>(arena) + place.offset;
    }
  }
  for (size_t b = 0; b < program.buffers.size(); ++b) {  // after their hosts are bound
    const BufferPlacement& place = compiled->placements[b];
    if (place.placement == Placement::kInOutput) record->buffers[b] = static_cast<char*>(bound[place.host]) + place.offset;
  }
  for (size_t k = 0; k < compiled->kernels.size(); ++k) {
    const Kernel& kernel = compiled->kernels[k];
    auto& scratch = record->scratch_of[k];
    for (int32_t i = kernel.first; i < kernel.first + kernel.count; ++i) {
      for (const isa::Operand& operand : program.instructions[i].operands) {
        if (compiled->placements[operand.buffer].placement == Placement::kScratch &&
            std::find(scratch.begin(), scratch.end(), operand.buffer) == scratch.end()) {
          scratch.push_back(operand.buffer);
        }
      }
    }
  }
  record->compiled = std::move(compiled);
  ProgramRecord* raw = record.get();
  const ptoError status = ptoLaunchKernel(stream, "program", &runRecord, &raw, sizeof raw);
  if (status == PTO_SUCCESS) record.release();  // the kernel owns it now
  return status;
}

}  // namespace pto::compiler
