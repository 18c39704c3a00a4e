// Kernels of the unary elementwise instructions. Each inner row has a contiguous
// fast path (MKL's vector math for the ops vector_math_mkl.h names; Sleef's vector
// functions where vector_math-inl.h has a form; else a loop the compiler vectorises)
// and a strided general path. Compiled once per vector target, chosen at run time
// (vector_target.h describes the pattern: this file is its model).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/sim/kernels/elementwise_unary.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "element_types.h"
#include "elementwise_ops.h"
#include "execute.h"
#include "stream_copy.h"
#include "strided_loop.h"
#include "elementwise_dispatch-inl.h"
#include "stream_store-inl.h"
#include "vector_math-inl.h"
#include "vector_math_mkl.h"

HWY_BEFORE_NAMESPACE();
namespace pto::rt::sim::kernels::HWY_NAMESPACE {
namespace {

// op's contiguous row through MKL (vector_math_mkl.h): float32/float64 directly,
// float16/bfloat16 widened a block at a time, as unaryMathRow widens them.
template <Opcode op, typename T>
void mklRow(T* out, const T* in, int64_t n) {
  if constexpr (std::is_same_v<T, ComputeType<T>>) {
    mklUnary<op>(in, out, n);
  } else {
    roundedByBlocks(out, n, [in](float* block, int64_t start, int64_t count) {
      widenToFloat(block, in + start, count);
      mklUnary<op>(block, block, count);
    });
  }
}

template <Opcode op, typename T>
void unaryRows(const StridedLoop& loop, const std::array<double, isa::kMaxImmediates>& given) {
  using C = ComputeType<T>;
  const Immediates<C> immediates = immediatesIn<op, C>(given);
  // The math rows are bound by their arithmetic, not memory: streaming their output
  // through a block only adds work (16M float32 exp on the AVX2 EPYC: 8.2 -> 10.7 ms).
  constexpr bool kMkl = kMklMath<op, ComputeType<T>>;
  constexpr bool kMath = hasVectorMath<op, T>() || kMkl;
  const bool streamed = !kMath && streamsOutput(loop.numel() * static_cast<int64_t>(sizeof(T)));
  forEachRow(loop, [&](const std::array<char*, kMaxOperands>& p, int64_t n) {
    const int64_t so = loop.innerStride(0), si = loop.innerStride(1);
    if (so == sizeof(T) && si == sizeof(T)) {
      const T* in = reinterpret_cast<const T*>(p[1]);
      auto row = [in, &immediates](T* out, int64_t start, int64_t count) {
        // A local copy of the immediates, which out cannot alias, lets the loop vectorise
        // (read through the closure, they are reloaded for every element).
        const Immediates<C> local = immediates;
        if constexpr (kMkl) return mklRow<op>(out, in + start, count);
        if constexpr (hasVectorMath<op, T>()) return unaryMathRow<op>(out, in + start, count, local);
        for (int64_t i = 0; i < count; ++i) out[i] = castTo<T>(unaryOp<op, C>(widen(in[start + i]), local));
      };
      return writeRow(reinterpret_cast<T*>(p[0]), n, streamed, row);
    }
    for (int64_t i = 0; i < n; ++i) store<T>(p[0] + i * so, unaryOp<op, C>(load<T>(p[1] + i * si), immediates));
  });
}

}  // namespace

// The entry points, one copy per target.
void unaryKernel(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const StridedLoop loop = loopOf(instruction, buffers);
  dispatchDType(instruction.operands[0].dtype, [&]<typename T>() {
    dispatchOpcode<Group::Unary>(instruction.opcode, [&]<Opcode op>() {
      if constexpr (accepts<op, T>()) unaryRows<op, T>(loop, instruction.immediates);
    });
  });
}

}  // namespace pto::rt::sim::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pto::rt::sim::kernels {

HWY_EXPORT(unaryKernel);

void executeUnary(const isa::Instruction& instruction, std::span<void* const> buffers) {
  HWY_DYNAMIC_DISPATCH(unaryKernel)(instruction, buffers);
}

}  // namespace pto::rt::sim::kernels
#endif  // HWY_ONCE
