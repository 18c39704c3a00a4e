// Template part of strided_loop.h.
#pragma once

#include "multi_index.h"
#include "runtime/sim/sim_parallel.h"

namespace pto::rt::sim::kernels {

namespace detail {

// Elements per parallel chunk: below this, waking another core costs more than it saves.
constexpr int64_t kParallelGrain = 32768;

// The rows of elements [begin, end), their index over the outer dimensions stepped
// (multi_index.h); the pointers formed afresh from the loop's bases each row, as copying
// an array updated element by element costs a store-forwarding stall.
template <typename Row>
void runRange(const StridedLoop& loop, int64_t begin, int64_t end, Row& row) {
  const int64_t inner = loop.innerSize();
  const int outer = loop.rank - 1;  // the dimensions before the inner one
  MultiIndex index = unravel(begin / inner, loop.shape, outer);
  int64_t column = begin % inner;
  while (begin < end) {
    std::array<char*, kMaxOperands> pointers = loop.base;
    for (int d = 0; d < outer; ++d) {
      for (int k = 0; k < loop.operands; ++k) pointers[k] += index[d] * loop.byte_strides[k][d];
    }
    for (int k = 0; k < loop.operands; ++k) pointers[k] += column * loop.innerStride(k);
    const int64_t count = std::min(inner - column, end - begin);
    row(pointers, count);
    begin += count;
    column = 0;
    stepIndex(index, loop.shape, outer);
  }
}

}  // namespace detail

template <typename Row>
void forEachRowIn(const StridedLoop& loop, int64_t begin, int64_t end, Row row) {
  detail::runRange(loop, begin, end, row);
}

template <typename Row>
void forEachRow(const StridedLoop& loop, Row row) {
  const int64_t total = loop.numel();
  if (total == 0) return;
  if (total < 2 * detail::kParallelGrain) {
    detail::runRange(loop, 0, total, row);
    return;
  }
  rt::sim::parallelFor(static_cast<size_t>(total), detail::kParallelGrain, [&](size_t begin, size_t end) {
    Row local = row;
    detail::runRange(loop, static_cast<int64_t>(begin), static_cast<int64_t>(end), local);
  });
}

}  // namespace pto::rt::sim::kernels
