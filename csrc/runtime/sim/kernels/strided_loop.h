// Iteration over operands that share a shape but not a layout: dimensions are
// ordered by the output's strides and merged where every operand allows it, so
// the innermost loop runs over the longest stretch a compiler can vectorise.
// Work is split over the simulated device's cores by element ranges.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "isa/program.h"

namespace pto::rt::sim::kernels {

constexpr int kMaxOperands = 4;

struct StridedLoop {
  int operands = 0;
  int rank = 0;  // after merging; 0 for a single element
  std::array<int64_t, isa::kMaxRank> shape{};
  std::array<std::array<int64_t, isa::kMaxRank>, kMaxOperands> byte_strides{};
  std::array<char*, kMaxOperands> base{};

  int64_t numel() const;
  int64_t innerSize() const { return rank == 0 ? 1 : shape[rank - 1]; }
  int64_t innerStride(int operand) const { return rank == 0 ? 0 : byte_strides[operand][rank - 1]; }
};

// `buffers` are the base addresses of the instruction's buffers.
StridedLoop makeLoop(std::span<const isa::Operand> operands, std::span<void* const> buffers);

// Calls row(pointers, n) for runs of n elements along the inner dimension, in
// parallel over the device's cores when there is enough work.
template <typename Row>
void forEachRow(const StridedLoop& loop, Row row);

// The same over elements [begin, end) of the loop only, on the calling thread: for
// kernels whose work per element varies, which split it over the cores themselves.
template <typename Row>
void forEachRowIn(const StridedLoop& loop, int64_t begin, int64_t end, Row row);

}  // namespace pto::rt::sim::kernels

#include "strided_loop_impl.h"
