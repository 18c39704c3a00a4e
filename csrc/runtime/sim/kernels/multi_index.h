// A position in a row-major walk over the first `rank` dimensions of a shape (the last
// fastest): found from a linear position by division once, then stepped like an
// odometer. Walks that divided for every row (the strided and row kernels') spent as
// long on those 64-bit divisions as on a short row's work.
#pragma once

#include <array>
#include <cstdint>

#include "isa/program.h"

namespace pto::rt::sim::kernels {

using MultiIndex = std::array<int64_t, isa::kMaxRank>;

// The index of row-major position `linear` over shape[0, rank).
inline MultiIndex unravel(int64_t linear, const std::array<int64_t, isa::kMaxRank>& shape, int rank) {
  MultiIndex index{};
  for (int d = rank - 1; d >= 0; --d) {
    index[d] = linear % shape[d];
    linear /= shape[d];
  }
  return index;
}

// On to the next row-major position over shape[0, rank) (after the last: all zeros).
inline void stepIndex(MultiIndex& index, const std::array<int64_t, isa::kMaxRank>& shape, int rank) {
  for (int d = rank - 1; d >= 0 && ++index[d] == shape[d]; --d) index[d] = 0;
}

}  // namespace pto::rt::sim::kernels
