// What an instruction reads, writes and computes: the profiler's bytes and FLOPs
// for each activity (a roofline's two axes).
#pragma once

#include <cstdint>
#include <string>

#include "program.h"

namespace pto::isa {

struct InstructionCost {
  uint64_t bytes = 0;  // distinct elements of every operand (a broadcast one counts once)
  double flops = 0;    // 2*M*N*K per GEMM, two per multiply-add of a convolution; about one per element for the rest
};

InstructionCost costOf(const Instruction& instruction);

// Bytes of the distinct elements of one operand.
uint64_t operandBytes(const Operand& operand);

// The operands as "f32[4,16] <- f32[4,16], f32[1,16]" (output first).
std::string operandSummary(const Instruction& instruction);

}  // namespace pto::isa
