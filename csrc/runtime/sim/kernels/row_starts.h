// Where each row of a row instruction's operands starts (rows: every index but the
// last), shared by the row kernels (row_ops.cpp, norm_ops.cpp). Plain scalar code,
// included before a kernel file's per-target namespace.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "isa/program.h"
#include "multi_index.h"

namespace pto::rt::sim::kernels {

// Elements below which a row op runs on the calling core alone: handing a chunk
// to another core costs 1-3 microseconds (benchmarks/bench_parallel_for.cpp), a
// fraction of the ~15 a core takes for this many softmax elements.
constexpr int64_t kRowSerialElements = 1 << 15;

// Where rows begin, row after row, for the first N operands, indexed by the output's
// shape: the row's index stepped (multi_index.h), each start formed from it.
template <size_t N>
class RowStarts {
 public:
  RowStarts(const isa::Instruction& instruction, std::span<void* const> buffers, int64_t row)
      : shape_(instruction.operands[0]), outer_(shape_.rank - 1), index_(unravel(row, shape_.shape, outer_)) {
    for (size_t k = 0; k < N; ++k) {
      const isa::Operand& operand = instruction.operands[k];
      const auto size = static_cast<int64_t>(isa::dtypeSize(operand.dtype));
      base_[k] = static_cast<char*>(buffers[operand.buffer]) + operand.offset * size;
      for (int d = 0; d < outer_; ++d) byte_strides_[k][d] = operand.strides[d] * size;
    }
  }

  // The current row's start in each operand.
  std::array<char*, N> operator*() const {
    std::array<char*, N> starts = base_;
    for (int d = 0; d < outer_; ++d) {
      for (size_t k = 0; k < N; ++k) starts[k] += index_[d] * byte_strides_[k][d];
    }
    return starts;
  }

  void next() { stepIndex(index_, shape_.shape, outer_); }

 private:
  const isa::Operand& shape_;
  int outer_;  // the dimensions before the row's
  MultiIndex index_;
  std::array<char*, N> base_{};
  std::array<std::array<int64_t, isa::kMaxRank>, N> byte_strides_{};
};

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
