// Template part of strided_loop.h.
#pragma once

#include "runtime/sim/sim_parallel.h"

namespace pto::rt::sim::kernels {

namespace detail {

// Elements per parallel chunk: below this, waking another core costs more than it saves.
constexpr int64_t kParallelGrain = 32768;

// The rows of elements [begin, end). The row's index over the outer dimensions is
// found by division once, then stepped like an odometer (64-bit divisions for every
// row cost more than a short row's work); its pointers are formed afresh from the
// loop's bases each row, as copying an array updated element by element costs a
// store-forwarding stall.
template <typename Row>
void runRange(const StridedLoop& loop, int64_t begin, int64_t end, Row& row) {
  const int64_t inner = loop.innerSize();
  const int outer = loop.rank - 1;  // the dimensions before the inner one
  std::array<int64_t, isa::kMaxRank> index{};
  for (int64_t rest = begin / inner, d = outer - 1; d >= 0; --d) {
    index[d] = rest % loop.shape[d];
    rest /= loop.shape[d];
  }
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
    for (int d = outer - 1; d >= 0 && ++index[d] == loop.shape[d]; --d) index[d] = 0;
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
