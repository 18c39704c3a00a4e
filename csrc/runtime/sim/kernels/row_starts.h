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

// Where rows begin, row after row, for the first N operands, indexed by the output's
// shape: the first row's offsets by division, each next one stepped like an odometer.
// Dividing for every row cost as much as softmax's work on a row of 128 (four 64-bit
// divisions a row at rank 3: (64, 128, 128) float32 took 294 us against 202 for the same
// elements in rows of 1024).
template <size_t N>
class RowStarts {
 public:
  RowStarts(const isa::Instruction& instruction, std::span<void* const> buffers, int64_t row)
      : shape_(instruction.operands[0]) {
    for (size_t k = 0; k < N; ++k) {
      const isa::Operand& operand = instruction.operands[k];
      const auto size = static_cast<int64_t>(isa::dtypeSize(operand.dtype));
      base_[k] = static_cast<char*>(buffers[operand.buffer]);
      offsets_[k] = operand.offset * size;
      for (int d = 0; d < shape_.rank - 1; ++d) byte_strides_[k][d] = operand.strides[d] * size;
    }
    for (int d = shape_.rank - 2; d >= 0; --d) {
      index_[d] = row % shape_.shape[d];
      row /= shape_.shape[d];
      for (size_t k = 0; k < N; ++k) offsets_[k] += index_[d] * byte_strides_[k][d];
    }
  }

  // The current row's start in each operand.
  std::array<char*, N> operator*() const {
    std::array<char*, N> starts{};
    for (size_t k = 0; k < N; ++k) starts[k] = base_[k] + offsets_[k];
    return starts;
  }

  // On to the next row (past the last one, offsets no row has: never read).
  void next() {
    for (int d = shape_.rank - 2; d >= 0; --d) {
      if (++index_[d] < shape_.shape[d] || d == 0) {
        for (size_t k = 0; k < N; ++k) offsets_[k] += byte_strides_[k][d];
        return;
      }
      index_[d] = 0;
      for (size_t k = 0; k < N; ++k) offsets_[k] -= (shape_.shape[d] - 1) * byte_strides_[k][d];
    }
  }

 private:
  const isa::Operand& shape_;
  std::array<int64_t, isa::kMaxRank> index_{};
  std::array<char*, N> base_{};
  std::array<int64_t, N> offsets_{};
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
