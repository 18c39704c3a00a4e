// The compiler's passes over a Program, in the order compile() runs them. Each
// leaves a program that verifies; compile() checks that after every one.
#pragma once

#include <vector>

#include "compiled_program.h"

namespace pto::compiler {

// Removes instructions whose results nothing reads: those writing only
// temporaries that no later live instruction reads. Returns how many it removed.
int eliminateDeadCode(isa::Program& program);

// Removes an instruction that computes again what an earlier one computed (same
// opcode, immediates and input views, none of those buffers written in between)
// into a temporary that nothing else writes; its readers read the earlier result.
// Returns how many it removed.
int eliminateCommonSubexpressions(isa::Program& program);

// Merges leading dimensions of elementwise, reduction and row instructions where
// every operand's strides allow (a [8, 128, 1024] activation becomes [1024, 1024]),
// so that instructions which view the same memory at different ranks share a tile
// domain and can fuse (a GEMM's output and the activation after it). Returns how
// many merges it made.
int collapseLeadingDims(isa::Program& program);

// Groups consecutive instructions into kernels: runs of instructions that may
// interleave by tile (tiling.h) become one tiled kernel; every other instruction
// is a kernel of its own.
std::vector<Kernel> fuse(const isa::Program& program);

// Places every buffer (compiled_program.h): temporaries that one tiled kernel
// keeps to itself go to its tile scratch, sized to the Unified Buffer; the rest go,
// by liveness over kernels, inside outputs not yet written, else in one arena.
void planMemory(CompiledProgram& compiled);

// The kernels, first and last, that use each buffer ({-1, -1}: none).
struct KernelSpan {
  int32_t first = -1, last = -1;
};
std::vector<KernelSpan> kernelLifetimes(const isa::Program& program, const std::vector<Kernel>& kernels);

// The instructions that write and read each buffer.
struct BufferUses {
  std::vector<std::vector<int32_t>> writers, readers;  // per buffer, instruction indices
};
BufferUses bufferUses(const isa::Program& program);

// Whether the instruction reads its own output too: a ReadsOutput one (instructions.def:
// accumulating GEMMs, scatters), unless its beta immediate is 0.
bool readsOutput(const isa::Instruction& instruction);

}  // namespace pto::compiler
