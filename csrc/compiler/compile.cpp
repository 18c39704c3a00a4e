// The pass pipeline, the plan's verifier and the annotated PTO-AS printer.
#include <cstdio>
#include <stdexcept>
#include <string>

#include "compiled_program.h"
#include "passes.h"
#include "tiling.h"

namespace pto::compiler {
namespace {

void check(const CompiledProgram& compiled, const char* pass, bool planned, const CompileOptions& options) {
  std::string error = isa::verify(compiled.program);
  if (error.empty() && planned) error = verifyPlan(compiled);
  if (!error.empty()) throw std::invalid_argument(std::string("after ") + pass + ": " + error);
  if (options.debug) {
    std::fprintf(stderr, "# ---- PTO program after %s ----\n%s", pass,
                 planned ? print(compiled).c_str() : isa::print(compiled.program).c_str());
  }
}

}  // namespace

int CompiledProgram::fusedKernelCount() const {
  int fused = 0;
  for (const Kernel& kernel : kernels) fused += kernel.tiled() && kernel.count > 1;
  return fused;
}

CompiledProgram compile(isa::Program program, const CompileOptions& options) {
  CompiledProgram compiled;
  compiled.program = std::move(program);
  check(compiled, "parsing", false, options);
  eliminateDeadCode(compiled.program);
  check(compiled, "dead code elimination", false, options);
  eliminateCommonSubexpressions(compiled.program);
  eliminateDeadCode(compiled.program);  // what only the removed copies read
  check(compiled, "common subexpression elimination", false, options);
  collapseLeadingDims(compiled.program);
  check(compiled, "dimension collapsing", false, options);
  if (options.fuse) {
    compiled.kernels = fuse(compiled.program);
  } else {
    for (int32_t i = 0; i < static_cast<int32_t>(compiled.program.instructions.size()); ++i) {
      compiled.kernels.push_back(Kernel{.first = i, .count = 1});
    }
  }
  planMemory(compiled);
  check(compiled, "fusion and memory planning", true, options);
  return compiled;
}

std::string verifyPlan(const CompiledProgram& compiled) {
  const isa::Program& program = compiled.program;
  if (compiled.placements.size() != program.buffers.size()) return "a placement per buffer is missing";
  int32_t next = 0;
  for (size_t k = 0; k < compiled.kernels.size(); ++k) {
    const Kernel& kernel = compiled.kernels[k];
    if (kernel.first != next || kernel.count < 1) return "kernel " + std::to_string(k) + " does not start where the last ended";
    next += kernel.count;
    if (next > static_cast<int32_t>(program.instructions.size())) return "kernel " + std::to_string(k) + " runs past the program";
    if (!kernel.tiled()) continue;
    if (std::string why = checkTiling(program, kernel.first, kernel.count, kernel.tile_dim); !why.empty()) {
      return "kernel " + std::to_string(k) + ": " + why;
    }
    if (kernel.tile_rows < 1) return "kernel " + std::to_string(k) + " has empty tiles";
  }
  if (next != static_cast<int32_t>(program.instructions.size())) return "instructions after the last kernel";
  const std::vector<KernelSpan> lifetime = kernelLifetimes(program, compiled.kernels);
  for (size_t b = 0; b < program.buffers.size(); ++b) {
    if (lifetime[b].first < 0) continue;
    const Placement placement = compiled.placements[b].placement;
    if (placement == Placement::kUnused) return "buffer %" + std::to_string(b) + " is used but placed nowhere";
    if (placement == Placement::kScratch && lifetime[b].first != lifetime[b].last) {
      return "scratch buffer %" + std::to_string(b) + " is used by two kernels";
    }
  }
  auto regionOf = [&](const BufferPlacement& place) { return place.placement == Placement::kInOutput ? place.host : -1; };
  for (size_t a = 0; a < program.buffers.size(); ++a) {
    const BufferPlacement& pa = compiled.placements[a];
    if (pa.placement != Placement::kArena && pa.placement != Placement::kInOutput) continue;
    if (pa.placement == Placement::kArena && pa.offset + program.buffers[a].bytes > compiled.arena_bytes) {
      return "buffer %" + std::to_string(a) + " overruns the arena";
    }
    if (pa.placement == Placement::kInOutput) {
      const bool host_ok = pa.host >= 0 && pa.host < static_cast<int32_t>(program.buffers.size()) &&
                           program.buffers[pa.host].kind == isa::BufferKind::kOutput;
      if (!host_ok || pa.offset + program.buffers[a].bytes > program.buffers[pa.host].bytes) {
        return "buffer %" + std::to_string(a) + " does not fit in the output it is placed in";
      }
      if (lifetime[a].last >= lifetime[pa.host].first) {
        return "buffer %" + std::to_string(a) + " is still live when its host output %" + std::to_string(pa.host) + " is written";
      }
    }
    for (size_t b = a + 1; b < program.buffers.size(); ++b) {
      const BufferPlacement& pb = compiled.placements[b];
      if ((pb.placement != Placement::kArena && pb.placement != Placement::kInOutput) || regionOf(pa) != regionOf(pb)) continue;
      const bool live_together = !(lifetime[a].last < lifetime[b].first || lifetime[b].last < lifetime[a].first);
      const bool overlap = pa.offset < pb.offset + program.buffers[b].bytes && pb.offset < pa.offset + program.buffers[a].bytes;
      if (live_together && overlap) {
        return "buffers %" + std::to_string(a) + " and %" + std::to_string(b) + " are live at once and overlap";
      }
    }
  }
  return "";
}

std::string print(const CompiledProgram& compiled) {
  const isa::Program& program = compiled.program;
  std::string text = "# " + std::to_string(compiled.kernels.size()) + " kernels (" +
                     std::to_string(compiled.fusedKernelCount()) + " fused), arena " +
                     std::to_string(compiled.arena_bytes) + " bytes\n";
  for (size_t b = 0; b < program.buffers.size(); ++b) {
    std::string line = isa::print(b, program.buffers[b]);
    const BufferPlacement& place = compiled.placements[b];
    switch (place.placement) {
      case Placement::kBound: break;
      case Placement::kArena: line += "  # arena @" + std::to_string(place.offset); break;
      case Placement::kScratch: line += "  # tile scratch @" + std::to_string(place.offset); break;
      case Placement::kInOutput:
        line += "  # in output %" + std::to_string(place.host) + " @" + std::to_string(place.offset);
        break;
      case Placement::kUnused: line += "  # unused"; break;
    }
    text += line + "\n";
  }
  for (size_t k = 0; k < compiled.kernels.size(); ++k) {
    const Kernel& kernel = compiled.kernels[k];
    text += "# kernel " + std::to_string(k);
    if (kernel.tiled()) {
      text += ": " + std::to_string(kernel.count) + " instructions fused, tiles of " +
              std::to_string(kernel.tile_rows) + " along dim " + std::to_string(kernel.tile_dim) + " of " +
              "[" + isa::dimsText(kernel.domain, kernel.tile_dim + 1) + "]" + ", " + std::to_string(kernel.tileCount()) + " tiles" +
              (kernel.parallel_tiles ? "" : " in order");
    }
    text += "\n";
    for (int32_t i = kernel.first; i < kernel.first + kernel.count; ++i) {
      text += isa::print(program.instructions[i]) + "\n";
    }
  }
  return text;
}

}  // namespace pto::compiler
