// The normalisation row instructions (the Norm group): tlayernorm, trmsnorm and
// trowrstd over the last dimension. A contiguous float32 row's statistics take one
// pass (sums of the row shifted by its first element, and of their squares, in float32
// vectors whose blocks fold into doubles as reduce.cpp's sums do), then one pass
// normalises the row while it sits in L1. Other rows take two passes in double (the
// mean, then the squared deviations from it); float16/bfloat16 normalise in float32,
// as PyTorch's CPU kernels do. Compiled once per vector target, chosen at run time
// (vector_target.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/sim/kernels/norm_ops.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>

#include "element_types.h"
#include "execute.h"
#include "opcode_dispatch.h"
#include "row_starts.h"
#include "runtime/sim/sim_parallel.h"

HWY_BEFORE_NAMESPACE();
namespace pto::rt::sim::kernels::HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using isa::Opcode;

// Elements summed in float vectors before the block's totals join doubles.
constexpr int64_t kSumBlock = 4096;

struct Moments {
  double sum = 0;      // of x - shift
  double squares = 0;  // of (x - shift)^2
};

// One pass over a contiguous float32 row: the sums of x - shift and of its squares,
// in four vector chains. With shift the row's first element (near its mean, as any
// element of an ordinary row is), var = squares / n - (sum / n)^2 loses no more than a
// two-pass variance would; rms_norm passes shift = 0.
Moments vectorMoments(const float* HWY_RESTRICT in, int64_t length, float shift) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto c = hn::Set(d, shift);
  Moments moments;
  for (int64_t block = 0; block < length; block += kSumBlock) {
    const int64_t end = std::min(length, block + kSumBlock);
    auto sum0 = hn::Zero(d), sum1 = hn::Zero(d), squares0 = hn::Zero(d), squares1 = hn::Zero(d);
    int64_t i = block;
    for (; i + 2 * lanes <= end; i += 2 * lanes) {
      const auto v0 = hn::Sub(hn::LoadU(d, in + i), c), v1 = hn::Sub(hn::LoadU(d, in + i + lanes), c);
      sum0 = hn::Add(sum0, v0);
      sum1 = hn::Add(sum1, v1);
      squares0 = hn::MulAdd(v0, v0, squares0);
      squares1 = hn::MulAdd(v1, v1, squares1);
    }
    float sum_rest = 0, squares_rest = 0;
    for (; i < end; ++i) {
      const float v = in[i] - shift;
      sum_rest += v;
      squares_rest += v * v;
    }
    moments.sum += static_cast<double>(hn::GetLane(hn::SumOfLanes(d, hn::Add(sum0, sum1)))) + sum_rest;
    moments.squares += static_cast<double>(hn::GetLane(hn::SumOfLanes(d, hn::Add(squares0, squares1)))) + squares_rest;
  }
  return moments;
}

struct RowStatistics {
  double mean = 0;  // 0 for rms_norm
  double rstd = 0;  // 1 / sqrt(var + eps), or 1 / sqrt(mean(x^2) + eps) for rms_norm
};

// The row's statistics; a contiguous float32 row takes the vector sums.
template <Opcode op, typename T>
RowStatistics statistics(const char* in, int64_t step, int64_t length, double eps) {
  const auto n = static_cast<double>(length);
  double mean = 0, squares = 0;
  if constexpr (std::is_same_v<T, float>) {
    if (step == sizeof(float)) {
      const auto* x = reinterpret_cast<const float*>(in);
      const float shift = op == Opcode::kRmsNorm ? 0.0f : x[0];
      const Moments moments = vectorMoments(x, length, shift);
      if constexpr (op == Opcode::kRmsNorm) return {0, 1.0 / std::sqrt(moments.squares / n + eps)};
      const double centre = moments.sum / n;
      const double spread = moments.squares / n - centre * centre;
      const double variance = spread < 0 ? 0.0 : spread;  // rounding below 0; NaN stays NaN
      return {shift + centre, 1.0 / std::sqrt(variance + eps)};
    }
  }
  if constexpr (op != Opcode::kRmsNorm) {
    for (int64_t i = 0; i < length; ++i) mean += static_cast<double>(load<T>(in + i * step));
    mean /= n;
  }
  for (int64_t i = 0; i < length; ++i) {
    const double deviation = static_cast<double>(load<T>(in + i * step)) - mean;
    squares += deviation * deviation;
  }
  return {mean, 1.0 / std::sqrt(squares / n + eps)};
}

// out = (x - mean) * rstd * weight + bias over a contiguous float32 row; a weight or
// bias step of 0 repeats its one value.
void normaliseRow(float* HWY_RESTRICT out, const float* HWY_RESTRICT in, const float* weight, int64_t weight_step,
                  const float* bias, int64_t bias_step, int64_t length, float mean, float rstd) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto m = hn::Set(d, mean), r = hn::Set(d, rstd);
  int64_t i = 0;
  if (weight_step != 0 && bias_step != 0) {
    for (; i + lanes <= length; i += lanes) {
      const auto normalised = hn::Mul(hn::Sub(hn::LoadU(d, in + i), m), r);
      hn::StoreU(hn::MulAdd(normalised, hn::LoadU(d, weight + i), hn::LoadU(d, bias + i)), d, out + i);
    }
  } else if (weight_step != 0) {
    const auto b = hn::Set(d, *bias);
    for (; i + lanes <= length; i += lanes) {
      const auto normalised = hn::Mul(hn::Sub(hn::LoadU(d, in + i), m), r);
      hn::StoreU(hn::MulAdd(normalised, hn::LoadU(d, weight + i), b), d, out + i);
    }
  } else {
    const auto w = hn::Set(d, *weight);
    const auto b = bias_step != 0 ? hn::Zero(d) : hn::Set(d, *bias);
    for (; i + lanes <= length; i += lanes) {
      const auto normalised = hn::Mul(hn::Sub(hn::LoadU(d, in + i), m), r);
      const auto shift = bias_step != 0 ? hn::LoadU(d, bias + i) : b;
      hn::StoreU(hn::MulAdd(normalised, w, shift), d, out + i);
    }
  }
  for (; i < length; ++i) out[i] = (in[i] - mean) * rstd * weight[i * weight_step] + bias[i * bias_step];
}

template <Opcode op, typename T>
void normKernel(const isa::Instruction& instruction, std::span<void* const> buffers) {
  static_assert(op == Opcode::kLayerNorm || op == Opcode::kRmsNorm || op == Opcode::kRowRstd,
                "the Norm family has no kernel for this instruction");
  using C = ComputeType<T>;
  constexpr size_t N = op == Opcode::kLayerNorm ? 4 : op == Opcode::kRmsNorm ? 3 : 2;
  const isa::Operand& out = instruction.operands[0];
  const int64_t length = out.rank == 0 ? 1 : out.shape[out.rank - 1];
  const int64_t rows = length == 0 ? 0 : out.numel() / length;
  const double eps = instruction.immediates[0];
  const std::array<int64_t, N> step = rowSteps<N>(instruction);
  const size_t grain = static_cast<size_t>(std::max<int64_t>(1, kRowSerialElements / std::max<int64_t>(1, length)));
  rt::sim::parallelFor(static_cast<size_t>(rows), grain, [&](size_t begin, size_t end) {
    RowStarts<N> starts(instruction, buffers, static_cast<int64_t>(begin));
    for (size_t row = begin; row < end; ++row, starts.next()) {
      const auto p = *starts;
      const RowStatistics stats = statistics<op, T>(p[1], step[1], length, eps);
      if constexpr (op == Opcode::kRowRstd) {
        store<T>(p[0], static_cast<C>(stats.rstd));
        continue;
      } else {
        const auto mean = static_cast<C>(stats.mean), rstd = static_cast<C>(stats.rstd);
        constexpr size_t kBias = op == Opcode::kLayerNorm ? 3 : 2;  // rms_norm: the weight's step again, unread
        if constexpr (std::is_same_v<T, float>) {
          const bool weight_ok = step[2] == 0 || step[2] == sizeof(float);
          const bool bias_ok = op == Opcode::kRmsNorm || step[kBias] == 0 || step[kBias] == sizeof(float);
          if (step[0] == sizeof(float) && step[1] == sizeof(float) && weight_ok && bias_ok) {
            static const float kZero = 0;
            const float* bias = op == Opcode::kLayerNorm ? reinterpret_cast<const float*>(p[kBias]) : &kZero;
            normaliseRow(reinterpret_cast<float*>(p[0]), reinterpret_cast<const float*>(p[1]),
                         reinterpret_cast<const float*>(p[2]), step[2] / static_cast<int64_t>(sizeof(float)), bias,
                         op == Opcode::kLayerNorm ? step[kBias] / static_cast<int64_t>(sizeof(float)) : 0, length,
                         mean, rstd);
            continue;
          }
        }
        for (int64_t i = 0; i < length; ++i) {
          C y = (load<T>(p[1] + i * step[1]) - mean) * rstd * load<T>(p[2] + i * step[2]);
          if constexpr (op == Opcode::kLayerNorm) y += load<T>(p[kBias] + i * step[kBias]);
          store<T>(p[0] + i * step[0], y);
        }
      }
    }
  });
}

}  // namespace

void normOpKernel(const isa::Instruction& instruction, std::span<void* const> buffers) {
  dispatchDType(instruction.operands[0].dtype, [&]<typename T>() {
    dispatchOpcode<isa::Group::Norm>(instruction.opcode, [&]<Opcode op>() {
      if constexpr (isa::acceptedDTypes(op).contains(dtypeOf<T>())) normKernel<op, T>(instruction, buffers);
    });
  });
}

}  // namespace pto::rt::sim::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pto::rt::sim::kernels {

HWY_EXPORT(normOpKernel);

void executeNorm(const isa::Instruction& instruction, std::span<void* const> buffers) {
  HWY_DYNAMIC_DISPATCH(normOpKernel)(instruction, buffers);
}

}  // namespace pto::rt::sim::kernels
#endif  // HWY_ONCE
