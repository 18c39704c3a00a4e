// Where each row of a row instruction's operands starts (rows: every index but the
// last), shared by the row kernels (row_ops.cpp, norm_ops.cpp). Plain scalar code,
// included before a kernel file's per-target namespace.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "isa/program.h"

namespace pto::rt::sim::kernels {

// Elements below which a row op runs on the calling core alone: handing a chunk
// to another core costs 1-3 microseconds (benchmarks/bench_parallel_for.cpp), a
// fraction of the ~15 a core takes for this many softmax elements.
constexpr int64_t kRowSerialElements = 1 << 15;

// Pointers to the start of row `row` of the first N operands, indexed by the output's shape.
template <size_t N>
std::array<char*, N> rowStarts(const isa::Instruction& instruction, std::span<void* const> buffers, int64_t row) {
  std::array<char*, N> starts{};
  const isa::Operand& shape = instruction.operands[0];
  for (size_t k = 0; k < N; ++k) {
    const isa::Operand& operand = instruction.operands[k];
    int64_t offset = operand.offset;
    int64_t rest = row;
    for (int d = shape.rank - 2; d >= 0; --d) {
      offset += (rest % shape.shape[d]) * operand.strides[d];
      rest /= shape.shape[d];
    }
    starts[k] = static_cast<char*>(buffers[operand.buffer]) + offset * static_cast<int64_t>(isa::dtypeSize(operand.dtype));
  }
  return starts;
}

// The byte step between consecutive elements of a row of each of the first N operands.
template <size_t N>
std::array<int64_t, N> rowSteps(const isa::Instruction& instruction) {
  std::array<int64_t, N> steps{};
  for (size_t k = 0; k < N; ++k) {
    const isa::Operand& operand = instruction.operands[k];
    steps[k] = (operand.rank == 0 ? 0 : operand.strides[operand.rank - 1]) *
               static_cast<int64_t>(isa::dtypeSize(operand.dtype));
  }
  return steps;
}

}  // namespace pto::rt::sim::kernels
