// Kernels of the binary and ternary elementwise instructions. Each inner row has a
// contiguous fast path (and ones with a broadcast scalar) and a strided general
// path. Compiled once per vector target, chosen at run time (vector_target.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/sim/kernels/elementwise_binary.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <limits>
#include <array>
#include <utility>

#include "element_types.h"
#include "elementwise_ops.h"
#include "execute.h"
#include "stream_copy.h"
#include "strided_loop.h"
#include "elementwise_dispatch-inl.h"
#include "stream_store-inl.h"
#include "vector_widen-inl.h"
#include "vector_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pto::rt::sim::kernels::HWY_NAMESPACE {
namespace {

// a + alpha * b for float16/bfloat16 rounds alpha * b to the storage type
// first, as PyTorch's CPU kernels do; the op then sees alpha == 1.
template <Opcode op, typename T>
inline ComputeType<T> scaledOperand(ComputeType<T> b, ComputeType<T> alpha) {
  constexpr bool reduced = !std::is_same_v<ComputeType<T>, T>;
  if constexpr (reduced && (op == Opcode::kAdd || op == Opcode::kSub)) {
    return alpha == 1 ? b : widen(castTo<T>(alpha * b));
  } else {
    return b;
  }
}

// out[i] = a[i * a_step] op b[i * b_step] for a step of 1 (contiguous) or 0 (a
// broadcast scalar), in loops the compiler vectorises. Scalars and the immediates
// arrive by value: by reference the compiler must assume a store through `out` may
// change them, reloads them per element and cannot vectorise.
template <Opcode op, typename T, typename Operand>
void binaryRunRow(T* out, const T* a, int64_t a_step, const T* b, int64_t b_step, int64_t n,
                  Immediates<ComputeType<T>> immediates, Operand operand) {
  using C = ComputeType<T>;
  if (a_step == 1 && b_step == 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = castTo<T>(binaryOp<op, C, T>(widen(a[i]), operand(widen(b[i])), immediates));
  } else if (a_step == 1) {
    const C scalar = operand(widen(*b));
    for (int64_t i = 0; i < n; ++i) out[i] = castTo<T>(binaryOp<op, C, T>(widen(a[i]), scalar, immediates));
  } else if (b_step == 1) {
    const C scalar = widen(*a);
    for (int64_t i = 0; i < n; ++i) out[i] = castTo<T>(binaryOp<op, C, T>(scalar, operand(widen(b[i])), immediates));
  } else {
    const T result = castTo<T>(binaryOp<op, C, T>(widen(*a), operand(widen(*b)), immediates));
    std::fill(out, out + n, result);
  }
}

template <Opcode op, typename T>
void binaryRows(const StridedLoop& loop, const std::array<double, isa::kMaxImmediates>& given) {
  using C = ComputeType<T>;
  constexpr bool prescaled = !std::is_same_v<C, T> && (op == Opcode::kAdd || op == Opcode::kSub);
  Immediates<C> immediates = immediatesIn<op, C>(given);
  const C given_alpha = immediates[0];
  if (prescaled) immediates[0] = C(1);
  auto operand = [given_alpha](C b) { return scaledOperand<op, T>(b, given_alpha); };
  // As in unaryRows, the math rows are bound by their arithmetic and write in place.
  const bool streamed = !hasVectorMath<op, T>() && streamsOutput(loop.numel() * static_cast<int64_t>(sizeof(T)));
  forEachRow(loop, [&loop, immediates, operand, streamed](const std::array<char*, kMaxOperands>& p, int64_t n) {
    const int64_t so = loop.innerStride(0), sa = loop.innerStride(1), sb = loop.innerStride(2);
    T* out = reinterpret_cast<T*>(p[0]);
    const T* a = reinterpret_cast<const T*>(p[1]);
    const T* b = reinterpret_cast<const T*>(p[2]);
    if (so == sizeof(T) && (sa == sizeof(T) || sa == 0) && (sb == sizeof(T) || sb == 0)) {
      const int64_t a_step = sa == 0 ? 0 : 1, b_step = sb == 0 ? 0 : 1;
      return writeRow(out, n, streamed, [=](T* dst, int64_t start, int64_t count) {
        const T* a_at = a + start * a_step;
        const T* b_at = b + start * b_step;
        if constexpr (hasVectorMath<op, T>()) {
          return binaryMathRow<op>(dst, a_at, a_step, b_at, b_step, count, immediates);
        } else {
          return binaryRunRow<op>(dst, a_at, a_step, b_at, b_step, count, immediates, operand);
        }
      });
    }
    for (int64_t i = 0; i < n; ++i) {
      store<T>(p[0] + i * so, binaryOp<op, C, T>(load<T>(p[1] + i * sa), operand(load<T>(p[2] + i * sb)), immediates));
    }
  });
}


// The same on vectors of float or double, a vector at a time; an operand's step is 1
// (contiguous) or 0 (a broadcast scalar). The last partial vector goes through
// zero-padded copies.
template <Opcode op, typename T>
void ternaryVectorRow(T* out, std::array<const T*, 3> in, std::array<int64_t, 3> step, int64_t n, T value) {
  const hn::ScalableTag<T> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto scale = hn::Set(d, value);
  auto apply = [&](auto a, auto b, auto c) {
    if constexpr (op == Opcode::kLerpWeights) {  // ternaryOp's choice of end, lane by lane
      const auto near = hn::Lt(hn::Abs(c), hn::Set(d, T(0.5)));
      const auto coefficient = hn::IfThenElse(near, c, hn::Sub(c, hn::Set(d, T(1))));
      return hn::MulAdd(coefficient, hn::Sub(b, a), hn::IfThenElse(near, a, b));
    } else if constexpr (op == Opcode::kClamp) {  // ternaryOp's selections, lane by lane
      const auto raised = hn::IfThenElse(hn::Lt(a, b), b, a);
      const auto held = hn::IfThenElse(hn::Lt(c, raised), c, raised);
      return hn::IfThenElse(hn::Or(hn::IsNaN(b), hn::IsNaN(c)), hn::Set(d, std::numeric_limits<T>::quiet_NaN()), held);
    } else {
      const auto scaled = hn::Mul(scale, b);
      if constexpr (op == Opcode::kAddcmul) return hn::MulAdd(scaled, c, a);
      else return hn::Add(a, hn::Div(scaled, c));
    }
  };
  auto operand = [&](int k, int64_t i) { return step[k] == 0 ? hn::Set(d, *in[k]) : hn::LoadU(d, in[k] + i); };
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(apply(operand(0, i), operand(1, i), operand(2, i)), d, out + i);
  if (i < n) {
    HWY_ALIGN T rest[3][hn::MaxLanes(hn::ScalableTag<T>())] = {};
    for (int k = 0; k < 3; ++k) {
      for (int64_t j = i; j < n; ++j) rest[k][j - i] = in[k][j * step[k]];
    }
    // A zero divisor in the padding is harmless: those lanes are never stored.
    hn::Store(apply(hn::Load(d, rest[0]), hn::Load(d, rest[1]), hn::Load(d, rest[2])), d, rest[0]);
    std::copy(rest[0], rest[0] + (n - i), out + i);
  }
}

// out[i] = op(in[0][i * step[0]], in[1][...], in[2][...]) for steps of 1 or 0.
template <Opcode op, typename T>
void ternaryRunRow(T* out, std::array<const T*, 3> in, std::array<int64_t, 3> step, int64_t n, ComputeType<T> value) {
  using C = ComputeType<T>;
  // taddcmul's and tlerpw's multiply-adds are fused: vectors on targets with FMA only,
  // the scalar loop (std::fma) on the others.
  constexpr bool vectors = (op != Opcode::kAddcmul && op != Opcode::kLerpWeights) || HWY_NATIVE_FMA;
  if constexpr ((std::is_same_v<T, float> || std::is_same_v<T, double>) && vectors) {
    ternaryVectorRow<op>(out, in, step, n, value);
  } else if constexpr (std::is_floating_point_v<C> && !std::is_same_v<C, T> && vectors) {
    // float16/bfloat16: widened to float a block at a time, rounded once at the end.
    float block[3][kBlockElements];
    for (int64_t start = 0; start < n; start += kBlockElements) {
      const int64_t count = std::min<int64_t>(kBlockElements, n - start);
      for (int k = 0; k < 3; ++k) {
        for (int64_t i = 0; i < count; ++i) block[k][i] = widen(in[k][(start + i) * step[k]]);
      }
      ternaryVectorRow<op, float>(block[0], {block[0], block[1], block[2]}, {1, 1, 1}, count, value);
      roundFromFloat(out + start, block[0], count);
    }
  } else if (step[0] == 1 && step[1] == 1 && step[2] == 1) {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = castTo<T>(ternaryOp<op, C>(widen(in[0][i]), widen(in[1][i]), widen(in[2][i]), value));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = castTo<T>(ternaryOp<op, C>(widen(in[0][i * step[0]]), widen(in[1][i * step[1]]),
                                          widen(in[2][i * step[2]]), value));
    }
  }
}

template <Opcode op, typename T>
void ternaryRows(const StridedLoop& loop, double value_immediate) {
  using C = ComputeType<T>;
  const C value = castTo<C>(value_immediate);  // verified to fit the dtype
  const bool streamed = streamsOutput(loop.numel() * static_cast<int64_t>(sizeof(T)));
  forEachRow(loop, [&loop, value, streamed](const std::array<char*, kMaxOperands>& p, int64_t n) {
    const std::array<int64_t, 3> stride = {loop.innerStride(1), loop.innerStride(2), loop.innerStride(3)};
    constexpr auto size = static_cast<int64_t>(sizeof(T));
    bool runs = loop.innerStride(0) == size;
    for (int64_t s : stride) runs = runs && (s == size || s == 0);
    if (runs) {
      const std::array<int64_t, 3> step = {stride[0] / size, stride[1] / size, stride[2] / size};
      return writeRow(reinterpret_cast<T*>(p[0]), n, streamed, [&](T* dst, int64_t start, int64_t count) {
        std::array<const T*, 3> in{};
        for (int k = 0; k < 3; ++k) in[k] = reinterpret_cast<const T*>(p[k + 1]) + start * step[k];
        ternaryRunRow<op>(dst, in, step, count, value);
      });
    }
    for (int64_t i = 0; i < n; ++i) {
      store<T>(p[0] + i * loop.innerStride(0),
               ternaryOp<op, C>(load<T>(p[1] + i * stride[0]), load<T>(p[2] + i * stride[1]),
                                load<T>(p[3] + i * stride[2]), value));
    }
  });
}

}  // namespace

// The entry points, one copy per target.
void binaryKernel(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const StridedLoop loop = loopOf(instruction, buffers);
  std::array<double, isa::kMaxImmediates> immediates = instruction.immediates;
  if (isa::info(instruction.opcode).immediateCount() == 0) immediates[0] = 1.0;  // alpha's default
  dispatchDType(instruction.operands[0].dtype, [&]<typename T>() {
    dispatchOpcode<Group::Binary>(instruction.opcode, [&]<Opcode op>() {
      if constexpr (accepts<op, T>()) binaryRows<op, T>(loop, immediates);
    });
  });
}

void ternaryKernel(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const StridedLoop loop = loopOf(instruction, buffers);
  dispatchDType(instruction.operands[0].dtype, [&]<typename T>() {
    dispatchOpcode<Group::Ternary>(instruction.opcode, [&]<Opcode op>() {
      if constexpr (accepts<op, T>()) ternaryRows<op, T>(loop, instruction.immediates[0]);
    });
  });
}

}  // namespace pto::rt::sim::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pto::rt::sim::kernels {

HWY_EXPORT(binaryKernel);
HWY_EXPORT(ternaryKernel);

void executeBinary(const isa::Instruction& instruction, std::span<void* const> buffers) {
  HWY_DYNAMIC_DISPATCH(binaryKernel)(instruction, buffers);
}

void executeTernary(const isa::Instruction& instruction, std::span<void* const> buffers) {
  HWY_DYNAMIC_DISPATCH(ternaryKernel)(instruction, buffers);
}

}  // namespace pto::rt::sim::kernels
#endif  // HWY_ONCE
