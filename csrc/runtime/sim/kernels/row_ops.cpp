// The fused row instructions: softmax and log_softmax over the last dimension,
// and their gradients, each one pass (per statistic) over a row held in cache.
// Statistics accumulate in float32 for float16/bfloat16 and float32 (as PyTorch's
// CPU kernels do), in double for float64. Compiled once per vector target, chosen
// at run time (vector_target.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/sim/kernels/row_ops.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "element_types.h"
#include "elementwise_ops.h"
#include "execute.h"
#include "opcode_dispatch.h"
#include "row_starts.h"
#include "runtime/sim/sim_parallel.h"
#include "vector_extrema.h"
#include "vector_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pto::rt::sim::kernels::HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using isa::Opcode;


// 1 / sum, softmax's scale: where the sum is 0 the row was all -inf (its exps are 0 and
// any other row's largest is exp(0) = 1), which gives NaN (0 * inf) unless its
// instruction asks for zeros there (tsoftmax's zero_masked_rows).
template <typename C>
C softmaxScale(C sum, bool zero_masked_rows) {
  return zero_masked_rows && sum == C(0) ? C(0) : C(1) / sum;
}

// A contiguous float32 row: max, then exp(x - max) summed (one exp per element,
// vectorExp), then one pass writing softmax's exp(x - max) / sum or
// log_softmax's (x - max) - log(sum). Softmax keeps its exps in out between the
// passes; log_softmax has nothing to keep. The sums are float vectors, as
// PyTorch's vectorised softmax keeps them.
template <bool kLog>
void softmaxRow(float* HWY_RESTRICT out, const float* HWY_RESTRICT in, int64_t length, bool zero_masked_rows) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  bool nan = false;
  float max = runExtreme<true>(in, length, &nan);
  if (nan) max = std::numeric_limits<float>::quiet_NaN();
  if (max == -std::numeric_limits<float>::infinity()) max = 0;  // a row of -inf: exp(-inf - 0) = 0
  const auto shift = hn::Set(d, max);
  // Four exps in flight per step, as unaryMathRow runs exp's rows: one exp is a chain
  // of ~15 dependent instructions, which the core overlaps only across vectors that
  // lie side by side.
  constexpr size_t kGroup = kMathGroup<Opcode::kExp>;
  hn::Vec<decltype(d)> sums[kGroup];
  for (auto& sum : sums) sum = hn::Zero(d);
  int64_t i = 0;
  for (; i + static_cast<int64_t>(kGroup) * lanes <= length; i += static_cast<int64_t>(kGroup) * lanes) {
    hn::Vec<decltype(d)> e[kGroup];
    for (size_t j = 0; j < kGroup; ++j) e[j] = hn::Sub(hn::LoadU(d, in + i + static_cast<int64_t>(j) * lanes), shift);
    vectorExps<kGroup>(d, e);
    for (size_t j = 0; j < kGroup; ++j) {
      if constexpr (!kLog) hn::StoreU(e[j], d, out + i + static_cast<int64_t>(j) * lanes);
      sums[j] = hn::Add(sums[j], e[j]);
    }
  }
  for (; i + lanes <= length; i += lanes) {
    const auto e = vectorExp(d, hn::Sub(hn::LoadU(d, in + i), shift));
    if constexpr (!kLog) hn::StoreU(e, d, out + i);
    sums[0] = hn::Add(sums[0], e);
  }
  if (i < length) {  // the last partial vector, padded with -inf (whose exp adds 0)
    HWY_ALIGN float rest[hn::MaxLanes(d)];
    std::fill(std::begin(rest), std::end(rest), -std::numeric_limits<float>::infinity());
    std::copy(in + i, in + length, rest);
    const auto e = vectorExp(d, hn::Sub(hn::Load(d, rest), shift));
    if constexpr (!kLog) {
      hn::Store(e, d, rest);
      std::copy(rest, rest + (length - i), out + i);
    }
    sums[kGroup - 1] = hn::Add(sums[kGroup - 1], e);
  }
  for (size_t j = 1; j < kGroup; ++j) sums[0] = hn::Add(sums[0], sums[j]);
  const float sum = hn::GetLane(hn::SumOfLanes(d, sums[0]));
  if constexpr (kLog) {
    // (x - max) - log(sum), in this order: x - (max + log(sum)) cancels badly.
    const float log_sum = std::log(sum);
    const auto log_sum_v = hn::Set(d, log_sum);
    for (i = 0; i + lanes <= length; i += lanes) {
      hn::StoreU(hn::Sub(hn::Sub(hn::LoadU(d, in + i), shift), log_sum_v), d, out + i);
    }
    for (; i < length; ++i) out[i] = (in[i] - max) - log_sum;
  } else {
    const float scale = softmaxScale(sum, zero_masked_rows);
    for (i = 0; i + lanes <= length; i += lanes) hn::StoreU(hn::Mul(hn::LoadU(d, out + i), hn::Set(d, scale)), d, out + i);
    for (; i < length; ++i) out[i] *= scale;
  }
}

// Longest float16/bfloat16 row widened whole for softmaxRow (two float copies of
// it, 8 MiB); longer rows take the scalar loop, which needs no copy.
constexpr int64_t kWidenedRowElements = 1 << 20;

// A contiguous float16/bfloat16 row: widened into float, softmaxRow's passes, each
// result rounded once, as PyTorch's CPU kernel computes these rows in float.
// `scratch` holds the two float copies.
template <bool kLog, typename T>
void halfSoftmaxRow(T* out, const T* in, int64_t length, bool zero_masked_rows, std::vector<float>& scratch) {
  scratch.resize(static_cast<size_t>(2 * length));
  float* wide = scratch.data();
  float* result = wide + length;
  widenToFloat(wide, in, length);
  softmaxRow<kLog>(result, wide, length, zero_masked_rows);
  roundFromFloat(out, result, length);
}

template <Opcode op, typename T>
void rowKernel(const isa::Instruction& instruction, std::span<void* const> buffers) {
  using C = ComputeType<T>;
  const isa::Operand& out = instruction.operands[0];
  const int64_t length = out.rank == 0 ? 1 : out.shape[out.rank - 1];
  const int64_t rows = length == 0 ? 0 : out.numel() / length;
  constexpr size_t N = op == Opcode::kSoftmax || op == Opcode::kLogSoftmax ? 2 : 3;
  const std::array<int64_t, N> step = rowSteps<N>(instruction);
  const size_t grain = static_cast<size_t>(std::max<int64_t>(1, kRowSerialElements / std::max<int64_t>(1, length)));
  constexpr bool kSoftmaxFamily = op == Opcode::kSoftmax || op == Opcode::kLogSoftmax;
  [[maybe_unused]] const bool zero_masked_rows = op == Opcode::kSoftmax && instruction.immediates[0] != 0;
  rt::sim::parallelFor(static_cast<size_t>(rows), grain, [&](size_t begin, size_t end) {
    std::vector<float> scratch;
    RowStarts<N> starts(instruction, buffers, static_cast<int64_t>(begin));
    for (size_t row = begin; row < end; ++row, starts.next()) {
      const auto p = *starts;
      auto at = [&](size_t k, int64_t i) { return load<T>(p[k] + i * step[k]); };
      if constexpr (kSoftmaxFamily && (std::is_same_v<T, float> || kIsHalfFloat<T>)) {
        if (step[0] == sizeof(T) && step[1] == sizeof(T)) {
          T* out_row = reinterpret_cast<T*>(p[0]);
          const T* in_row = reinterpret_cast<const T*>(p[1]);
          if constexpr (std::is_same_v<T, float>) {
            softmaxRow<op == Opcode::kLogSoftmax>(out_row, in_row, length, zero_masked_rows);
            continue;
          } else if (length <= kWidenedRowElements) {
            halfSoftmaxRow<op == Opcode::kLogSoftmax>(out_row, in_row, length, zero_masked_rows, scratch);
            continue;
          }
        }
      }
      if constexpr (op == Opcode::kSoftmax || op == Opcode::kLogSoftmax) {
        C max = -std::numeric_limits<C>::infinity();
        for (int64_t i = 0; i < length; ++i) max = std::max(max, at(1, i));
        if (std::isinf(max) && max < 0) max = 0;  // a row of -inf: exp(-inf - 0) = 0
        C sum = 0;
        for (int64_t i = 0; i < length; ++i) sum += expOf(at(1, i) - max);
        if constexpr (op == Opcode::kSoftmax) {
          const C scale = softmaxScale(sum, zero_masked_rows);
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
      } else if constexpr (op == Opcode::kLogSoftmaxGrad) {  // dx = dy - exp(y) * sum(dy)
        C sum = 0;
        for (int64_t i = 0; i < length; ++i) sum += at(1, i);
        for (int64_t i = 0; i < length; ++i) store<T>(p[0] + i * step[0], at(1, i) - expOf(at(2, i)) * sum);
      } else {
        static_assert(op == Opcode::kSoftmax, "the Row family has no kernel for this instruction");
      }
    }
  });
}

}  // namespace

void rowOpKernel(const isa::Instruction& instruction, std::span<void* const> buffers) {
  dispatchDType(instruction.operands[0].dtype, [&]<typename T>() {
    dispatchOpcode<isa::Group::Row>(instruction.opcode, [&]<Opcode op>() {
      if constexpr (isa::acceptedDTypes(op).contains(dtypeOf<T>())) rowKernel<op, T>(instruction, buffers);
    });
  });
}

}  // namespace pto::rt::sim::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pto::rt::sim::kernels {

HWY_EXPORT(rowOpKernel);

void executeRow(const isa::Instruction& instruction, std::span<void* const> buffers) {
  HWY_DYNAMIC_DISPATCH(rowOpKernel)(instruction, buffers);
}

}  // namespace pto::rt::sim::kernels
#endif  // HWY_ONCE
