// The compiler's passes over a Program, in the order compile() runs them. Each
// leaves a program that verifies; compile() checks that after every one.
#pragma once

#include <vector>

#include "compile.h"

namespace pto::compiler {

// Removes instructions whose results nothing reads: those writing only
// temporaries that no later live instruction reads. Returns how many it removed.
int eliminateDeadCode(isa::Program& program);

// Removes an instruction that computes again what an earlier one computed (same
// opcode, immediates and input views, none of those buffers written in between)
// into a temporary that nothing else writes; its readers read the earlier result.
// Returns how many it removed.
int eliminateCommonSubexpressions(isa::Program& program);

// Removes a tmov into a temporary that nothing else writes, laid out as its input
// (a clone, eval-mode dropout), where the input is not written after it: its readers
// read the input instead. Returns how many it removed.
int forwardCopies(isa::Program& program);

// Merges leading dimensions of elementwise, reduction and row instructions where
// every operand's strides allow (a [8, 128, 1024] activation becomes [1024, 1024]),
// so that instructions which view the same memory at different ranks share a tile
// domain and can fuse (a GEMM's output and the activation after it). Returns how
// many merges it made.
int collapseLeadingDims(isa::Program& program);

// Groups consecutive instructions into stages: runs of instructions that may
// interleave by tile (isa/tiling.h) become one tiled stage, its tiles sized and
// run as the options' target wants; every other instruction is a stage of its own.
std::vector<isa::Stage> fuse(const isa::Program& program, const CompileOptions& options);

// Marks the stages that read and write only temporaries nothing but such stages write
// (the fills of a graph's scalars, and what is computed from them alone) to run once,
// when the program is loaded (isa::Stage::at_load).
void hoistConstantStages(isa::ScheduledProgram& compiled);

// Places every buffer (isa/schedule.h): what at-load stages alone write among the
// program's constants; temporaries that one tiled stage
// keeps to itself go to its tile scratch, which takes at most tile_memory_bytes; the rest go,
// by liveness over stages, inside outputs not yet written, else in the workspace.
void planMemory(isa::ScheduledProgram& compiled, uint64_t tile_memory_bytes);

// Removes the instructions flagged in `removed` (one flag per instruction), keeping
// the others' order. Returns how many it removed.
int removeInstructions(isa::Program& program, const std::vector<bool>& removed);

// The instructions that write and read each buffer.
struct BufferUses {
  std::vector<std::vector<int32_t>> writers, readers;  // per buffer, instruction indices
};
BufferUses bufferUses(const isa::Program& program);

// Whether the instruction reads its own output too: a ReadsOutput one (instructions.def:
// accumulating GEMMs, scatters), unless its beta immediate is 0.
bool readsOutput(const isa::Instruction& instruction);

}  // namespace pto::compiler
