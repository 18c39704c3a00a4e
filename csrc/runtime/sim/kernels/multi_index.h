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

// A walk over an operand's elements in row-major order: its index and that element's
// offset (in elements, from the operand's own offset), both stepped without division.
struct ElementWalk {
  MultiIndex index;
  int64_t offset = 0;

  // At row-major position `linear` of `operand`.
  ElementWalk(const isa::Operand& operand, int64_t linear) : index(unravel(linear, operand.shape, operand.rank)) {
    for (int d = 0; d < operand.rank; ++d) offset += index[d] * operand.strides[d];
  }

  // On to the next element of `operand` (the one walked).
  void step(const isa::Operand& operand) {
    for (int d = operand.rank - 1; d >= 0; --d) {
      offset += operand.strides[d];
      if (++index[d] < operand.shape[d]) return;
      offset -= index[d] * operand.strides[d];
      index[d] = 0;
    }
  }
};

}  // namespace pto::rt::sim::kernels
