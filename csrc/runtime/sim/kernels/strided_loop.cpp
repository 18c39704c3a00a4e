#include "strided_loop.h"

#include <algorithm>
#include <numeric>

namespace pto::rt::sim::kernels {

int64_t StridedLoop::numel() const {
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) count *= shape[d];
  return count;
}

StridedLoop makeLoop(std::span<const isa::Operand> operands, std::span<void* const> buffers) {
  StridedLoop loop;
  loop.operands = static_cast<int>(operands.size());
  const isa::Operand& out = operands[0];
  // Nothing to do: an empty operand's offset is unchecked (it may be anything, and
  // offset * size overflow), so no base pointer is formed from it.
  for (int d = 0; d < out.rank; ++d) {
    if (out.shape[d] == 0) {
      loop.rank = 1;
      loop.shape[0] = 0;
      return loop;
    }
  }
  for (int k = 0; k < loop.operands; ++k) {
    const isa::Operand& operand = operands[k];
    loop.base[k] = static_cast<char*>(buffers[operand.buffer]) +
                   operand.offset * static_cast<int64_t>(isa::dtypeSize(operand.dtype));
  }
  // Dimensions of size 1 carry no iteration; the rest go outermost-first by the
  // output's stride, so the output is written in memory order.
  std::array<int, isa::kMaxRank> order{};
  int kept = 0;
  for (int d = 0; d < out.rank; ++d) {
    if (out.shape[d] != 1) order[kept++] = d;
  }
  std::stable_sort(order.begin(), order.begin() + kept, [&](int a, int b) {
    return std::abs(out.strides[a]) > std::abs(out.strides[b]);
  });
  for (int i = 0; i < kept; ++i) {
    const int d = order[i];
    const bool merge = loop.rank > 0 && [&] {
      for (int k = 0; k < loop.operands; ++k) {
        const int64_t size = isa::dtypeSize(operands[k].dtype);
        if (loop.byte_strides[k][loop.rank - 1] != operands[k].strides[d] * size * out.shape[d]) return false;
      }
      return true;
    }();
    if (merge) {
      loop.shape[loop.rank - 1] *= out.shape[d];
    } else {
      loop.shape[loop.rank] = out.shape[d];
      ++loop.rank;
    }
    for (int k = 0; k < loop.operands; ++k) {
      loop.byte_strides[k][loop.rank - 1] =
          operands[k].strides[d] * static_cast<int64_t>(isa::dtypeSize(operands[k].dtype));
    }
  }
  return loop;
}

}  // namespace pto::rt::sim::kernels
