#include <algorithm>
#include <cstdint>

#include "passes.h"
#include "tiling.h"

namespace pto::compiler {
namespace {

// The simulated Unified Buffer: what one tile's scratch may take (the ISA doc's
// tile budget). GEMM kernels' tiles are sized for BLAS instead and may exceed it.
constexpr uint64_t kUnifiedBufferBytes = 192 * 1024;
constexpr uint64_t kAlignment = 64;

uint64_t aligned(uint64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

struct Lifetime {
  int32_t buffer;
  int32_t first_kernel, last_kernel;
  uint64_t bytes;
};

}  // namespace

std::vector<KernelSpan> kernelLifetimes(const isa::Program& program, const std::vector<Kernel>& kernels) {
  std::vector<KernelSpan> spans(program.buffers.size());
  for (size_t k = 0; k < kernels.size(); ++k) {
    for (int32_t i = kernels[k].first; i < kernels[k].first + kernels[k].count; ++i) {
      for (const isa::Operand& operand : program.instructions[i].operands) {
        KernelSpan& span = spans[operand.buffer];
        if (span.first < 0) span.first = static_cast<int32_t>(k);
        span.last = static_cast<int32_t>(k);
      }
    }
  }
  return spans;
}

void planMemory(CompiledProgram& compiled) {
  const isa::Program& program = compiled.program;
  const size_t buffer_count = program.buffers.size();
  const std::vector<KernelSpan> spans = kernelLifetimes(program, compiled.kernels);
  std::vector<const isa::Operand*> some_operand(buffer_count, nullptr);
  for (const isa::Instruction& instruction : program.instructions) {
    for (const isa::Operand& operand : instruction.operands) some_operand[operand.buffer] = &operand;
  }

  compiled.placements.assign(buffer_count, BufferPlacement{});
  std::vector<Lifetime> arena;
  std::vector<uint64_t> row_bytes(compiled.kernels.size(), 0);
  for (size_t b = 0; b < buffer_count; ++b) {
    BufferPlacement& place = compiled.placements[b];
    if (program.buffers[b].kind != isa::BufferKind::kTemp) continue;
    if (spans[b].first < 0) {
      place.placement = Placement::kUnused;
      continue;
    }
    const Kernel& kernel = compiled.kernels[spans[b].first];
    // Every use of a temporary inside one tiled kernel is row aligned (the kernel
    // writes it), so each tile needs only its own rows of it.
    if (spans[b].first == spans[b].last && kernel.tiled()) {
      place.placement = Placement::kScratch;
      place.row_pitch = rowPitch(*some_operand[b], kernel.tile_dim);
      row_bytes[spans[b].first] += aligned(place.row_pitch * isa::dtypeSize(some_operand[b]->dtype));
      continue;
    }
    place.placement = Placement::kArena;
    arena.push_back({static_cast<int32_t>(b), spans[b].first, spans[b].last, aligned(program.buffers[b].bytes)});
  }

  // Tiles small enough for the Unified Buffer, then each scratch buffer's place in it.
  for (size_t k = 0; k < compiled.kernels.size(); ++k) {
    Kernel& kernel = compiled.kernels[k];
    if (!kernel.tiled() || row_bytes[k] == 0) continue;
    if (kernel.parallel_tiles) {
      kernel.tile_rows = std::clamp<int64_t>(static_cast<int64_t>(kUnifiedBufferBytes / row_bytes[k]), 1, kernel.tile_rows);
    }
  }
  std::vector<uint64_t> scratch_used(compiled.kernels.size(), 0);
  for (size_t b = 0; b < buffer_count; ++b) {
    BufferPlacement& place = compiled.placements[b];
    if (place.placement != Placement::kScratch) continue;
    Kernel& kernel = compiled.kernels[spans[b].first];
    place.offset = scratch_used[spans[b].first];
    scratch_used[spans[b].first] +=
        aligned(static_cast<uint64_t>(kernel.tile_rows * place.row_pitch) * isa::dtypeSize(some_operand[b]->dtype));
    kernel.scratch_bytes = scratch_used[spans[b].first];
  }

  // Largest first, each temporary goes where it is clear of every placed one whose
  // lifetime meets its own: inside an output that is not written until after it dies
  // (that memory is the caller's already), else at the lowest such offset of the arena.
  std::stable_sort(arena.begin(), arena.end(), [](const Lifetime& a, const Lifetime& b) { return a.bytes > b.bytes; });
  std::vector<int32_t> outputs;
  for (size_t b = 0; b < buffer_count; ++b) {
    if (program.buffers[b].kind == isa::BufferKind::kOutput && spans[b].first > 0) outputs.push_back(static_cast<int32_t>(b));
  }
  std::stable_sort(outputs.begin(), outputs.end(),
                   [&](int32_t a, int32_t b) { return program.buffers[a].bytes > program.buffers[b].bytes; });
  std::vector<const Lifetime*> placed;
  // The lowest offset below `limit` in region `host` (-1: the arena) clear of the placed
  // temporaries live with `temp`, or UINT64_MAX.
  auto lowestFree = [&](const Lifetime& temp, int32_t host, uint64_t limit) {
    std::vector<std::pair<uint64_t, uint64_t>> taken;
    for (const Lifetime* other : placed) {
      const BufferPlacement& where = compiled.placements[other->buffer];
      const int32_t other_host = where.placement == Placement::kInOutput ? where.host : -1;
      if (other_host != host || other->last_kernel < temp.first_kernel || temp.last_kernel < other->first_kernel) continue;
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
  compiled.arena_bytes = 0;
  for (const Lifetime& temp : arena) {
    BufferPlacement& place = compiled.placements[temp.buffer];
    for (int32_t host : outputs) {
      if (temp.last_kernel >= spans[host].first) continue;
      const uint64_t offset = lowestFree(temp, host, program.buffers[host].bytes / kAlignment * kAlignment);
      if (offset == UINT64_MAX) continue;
      place = BufferPlacement{.placement = Placement::kInOutput, .offset = offset, .host = host};
      break;
    }
    if (place.placement != Placement::kInOutput) {
      place.offset = lowestFree(temp, -1, UINT64_MAX);
      compiled.arena_bytes = std::max(compiled.arena_bytes, place.offset + temp.bytes);
    }
    placed.push_back(&temp);
  }
}

}  // namespace pto::compiler
