// The positions off an axis of an (out, in) operand pair: kernels that work along
// an axis line by line (the sorts, the scans) number the lines, split the numbers
// over the device's cores, and find where each line starts in out and in.
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include "isa/program.h"

namespace pto::rt::sim::kernels {

struct LinePositions {
  int rank = 0;  // dimensions kept (size 1 ones dropped), outermost first
  std::array<int64_t, isa::kMaxRank> shape{};
  std::array<int64_t, isa::kMaxRank> out_strides{};
  std::array<int64_t, isa::kMaxRank> in_strides{};
  int64_t count = 1;

  // The element offsets, from out's and in's own offsets, of position `index` (row-major).
  std::pair<int64_t, int64_t> offsets(int64_t index) const {
    int64_t out_offset = 0, in_offset = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t i = index % shape[d];
      index /= shape[d];
      out_offset += i * out_strides[d];
      in_offset += i * in_strides[d];
    }
    return {out_offset, in_offset};
  }
};

// The positions over every dimension of out (whose shape in shares off the axis)
// but `axis` and `also_skipped` (-1: none).
inline LinePositions positionsOff(const isa::Operand& out, const isa::Operand& in, int axis, int also_skipped = -1) {
  LinePositions positions;
  for (int d = 0; d < out.rank; ++d) {
    if (d == axis || d == also_skipped || out.shape[d] == 1) continue;
    positions.shape[positions.rank] = out.shape[d];
    positions.out_strides[positions.rank] = out.strides[d];
    positions.in_strides[positions.rank] = in.strides[d];
    positions.count *= out.shape[d];
    ++positions.rank;
  }
  return positions;
}

}  // namespace pto::rt::sim::kernels
