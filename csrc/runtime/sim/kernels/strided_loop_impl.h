// Template part of strided_loop.h.
#pragma once

#include "runtime/sim/sim_parallel.h"

namespace pto::rt::sim::kernels {

namespace detail {

// Elements per parallel chunk: below this, waking another core costs more than it saves.
constexpr int64_t kParallelGrain = 32768;

template <typename Row>
void runRange(const StridedLoop& loop, int64_t begin, int64_t end, Row& row) {
  const int64_t inner = loop.innerSize();
  int64_t row_index = begin / inner;
  int64_t column = begin % inner;
  while (begin < end) {
    std::array<char*, kMaxOperands> pointers = loop.base;
    int64_t rest = row_index;
    for (int d = loop.rank - 2; d >= 0; --d) {
      const int64_t index = rest % loop.shape[d];
      rest /= loop.shape[d];
      for (int k = 0; k < loop.operands; ++k) pointers[k] += index * loop.byte_strides[k][d];
    }
    for (int k = 0; k < loop.operands; ++k) pointers[k] += column * loop.innerStride(k);
    const int64_t count = std::min(inner - column, end - begin);
    row(pointers, count);
    begin += count;
    column = 0;
    ++row_index;
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
