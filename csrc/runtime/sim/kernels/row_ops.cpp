// The fused row instructions: softmax and log_softmax over the last dimension,
// and their gradients, each one pass (per statistic) over a row held in cache.
// Statistics accumulate in float32 for float16/bfloat16 and float32 (as PyTorch's
// CPU kernels do), in double for float64.
#include <algorithm>
#include <cmath>
#include <limits>

#include "element_types.h"
#include "elementwise_ops.h"
#include "execute.h"
#include "runtime/sim/sim_parallel.h"
#include "vector_extrema.h"

namespace pto::rt::sim::kernels {
namespace {

using isa::Opcode;

// Pointers to the start of row `row` of each operand (rows: every index but the last).
template <size_t N>
std::array<char*, N> rowStarts(const isa::Instruction& instruction, std::span<void* const> buffers, int64_t row) {
  std::array<char*, N> starts{};
  const isa::Operand& shape = instruction.operands[0];
  for (size_t k = 0; k < N; ++k) {
    const isa::Operand& operand = instruction.operands[k];
    int64_t offset = operand.offset;
    int64_t rest = row;
    for (int d = shape.rank - 2; d >= 0; --d) {
      offset += (rest % shape.shape[d]) * operand.strides[d];
      rest /= shape.shape[d];
    }
    starts[k] = static_cast<char*>(buffers[operand.buffer]) + offset * static_cast<int64_t>(isa::dtypeSize(operand.dtype));
  }
  return starts;
}

// A contiguous float32 row: max, then exp(x - max) written to out while summing
// (one exp per element), then one scaling pass. kLanes independent partial sums
// keep the loop vectorisable without reassociating floating point.
void softmaxRow(float* out, const float* in, int64_t length) {
  constexpr int kLanes = 16;
  bool nan = false;
  float max = runExtreme<true>(in, length, &nan);
  if (nan) max = std::numeric_limits<float>::quiet_NaN();
  if (max == -std::numeric_limits<float>::infinity()) max = 0;  // a row of -inf: exp(-inf - 0) = 0
  float sums[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= length; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float e = fastExp(in[i + l] - max);
      out[i + l] = e;
      sums[l] += e;
    }
  }
  for (; i < length; ++i) {
    out[i] = fastExp(in[i] - max);
    sums[0] += out[i];
  }
  float sum = 0;
  for (float partial : sums) sum += partial;
  const float scale = 1.0f / sum;
  for (i = 0; i < length; ++i) out[i] *= scale;
}

template <Opcode op, typename T>
void rowKernel(const isa::Instruction& instruction, std::span<void* const> buffers) {
  using C = ComputeType<T>;
  const isa::Operand& out = instruction.operands[0];
  const int64_t length = out.rank == 0 ? 1 : out.shape[out.rank - 1];
  const int64_t rows = length == 0 ? 0 : out.numel() / length;
  constexpr size_t N = op == Opcode::kSoftmax || op == Opcode::kLogSoftmax ? 2 : 3;
  std::array<int64_t, N> step{};
  for (size_t k = 0; k < N; ++k) {
    const isa::Operand& operand = instruction.operands[k];
    step[k] = (operand.rank == 0 ? 0 : operand.strides[operand.rank - 1]) * static_cast<int64_t>(sizeof(T));
  }
  const size_t grain = static_cast<size_t>(std::max<int64_t>(1, 16384 / std::max<int64_t>(1, length)));
  rt::sim::parallelFor(static_cast<size_t>(rows), grain, [&](size_t begin, size_t end) {
    for (size_t row = begin; row < end; ++row) {
      const auto p = rowStarts<N>(instruction, buffers, static_cast<int64_t>(row));
      auto at = [&](size_t k, int64_t i) { return load<T>(p[k] + i * step[k]); };
      if constexpr (std::is_same_v<T, float> && op == Opcode::kSoftmax) {
        if (step[0] == sizeof(float) && step[1] == sizeof(float)) {
          softmaxRow(reinterpret_cast<float*>(p[0]), reinterpret_cast<const float*>(p[1]), length);
          continue;
        }
      }
      if constexpr (op == Opcode::kSoftmax || op == Opcode::kLogSoftmax) {
        C max = -std::numeric_limits<C>::infinity();
        for (int64_t i = 0; i < length; ++i) max = std::max(max, at(1, i));
        if (std::isinf(max) && max < 0) max = 0;  // a row of -inf: exp(-inf - 0) = 0
        C sum = 0;
        for (int64_t i = 0; i < length; ++i) sum += expOf(at(1, i) - max);
        if constexpr (op == Opcode::kSoftmax) {
          const C scale = C(1) / sum;
          for (int64_t i = 0; i < length; ++i) store<T>(p[0] + i * step[0], expOf(at(1, i) - max) * scale);
        } else {
          // (x - max) - log(sum), in this order: x - (max + log(sum)) cancels badly.
          const C log_sum = std::log(sum);
          for (int64_t i = 0; i < length; ++i) store<T>(p[0] + i * step[0], (at(1, i) - max) - log_sum);
        }
      } else if constexpr (op == Opcode::kSoftmaxGrad) {  // dx = y * (dy - sum(dy * y))
        C dot = 0;
        for (int64_t i = 0; i < length; ++i) dot += at(1, i) * at(2, i);
        for (int64_t i = 0; i < length; ++i) store<T>(p[0] + i * step[0], at(2, i) * (at(1, i) - dot));
      } else {  // log_softmax: dx = dy - exp(y) * sum(dy)
        C sum = 0;
        for (int64_t i = 0; i < length; ++i) sum += at(1, i);
        for (int64_t i = 0; i < length; ++i) store<T>(p[0] + i * step[0], at(1, i) - expOf(at(2, i)) * sum);
      }
    }
  });
}

}  // namespace

void executeRow(const isa::Instruction& instruction, std::span<void* const> buffers) {
  dispatchDType(instruction.operands[0].dtype, [&]<typename T>() {
    if constexpr (isa::kFloatTypes.contains(dtypeOf<T>())) {
      switch (instruction.opcode) {
        case Opcode::kSoftmax: return rowKernel<Opcode::kSoftmax, T>(instruction, buffers);
        case Opcode::kLogSoftmax: return rowKernel<Opcode::kLogSoftmax, T>(instruction, buffers);
        case Opcode::kSoftmaxGrad: return rowKernel<Opcode::kSoftmaxGrad, T>(instruction, buffers);
        case Opcode::kLogSoftmaxGrad: return rowKernel<Opcode::kLogSoftmaxGrad, T>(instruction, buffers);
        default: return;
      }
    }
  });
}

}  // namespace pto::rt::sim::kernels
