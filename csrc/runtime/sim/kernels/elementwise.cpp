// Kernels of the elementwise families: unary, binary, compare, select, convert, fill.
// Each inner row has a contiguous fast path (and one with a broadcast scalar)
// written so the compiler vectorises it, and a strided general path. Compiled once
// per vector target, chosen at run time (vector_target.h describes the pattern).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/sim/kernels/elementwise.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <utility>

#include "element_types.h"
#include "elementwise_ops.h"
#include "execute.h"
#include "strided_loop.h"
#include "vector_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pto::rt::sim::kernels::HWY_NAMESPACE {
namespace {

using isa::Group;

// Calls fn.template operator()<op>() for the opcode, among those of `group`.
template <Group group, typename Fn>
void dispatchOpcode(Opcode opcode, Fn&& fn) {
  switch (opcode) {
#define PTO_INSTRUCTION(op, name, grp, inputs, dtypes, output, immediates, properties) \
    case Opcode::op:                                                        \
      if constexpr (Group::grp == group) fn.template operator()<Opcode::op>(); \
      return;
#include "isa/instructions.def"
#undef PTO_INSTRUCTION
  }
}

template <Opcode op, typename T>
constexpr bool accepts() { return isa::acceptedDTypes(op).contains(dtypeOf<T>()); }

template <Opcode op, typename T>
void unaryRows(const StridedLoop& loop) {
  using C = ComputeType<T>;
  forEachRow(loop, [&](const std::array<char*, kMaxOperands>& p, int64_t n) {
    const int64_t so = loop.innerStride(0), si = loop.innerStride(1);
    if (so == sizeof(T) && si == sizeof(T)) {
      T* out = reinterpret_cast<T*>(p[0]);
      const T* in = reinterpret_cast<const T*>(p[1]);
      if constexpr (hasVectorMath<op, T>()) return unaryMathRow<op>(out, in, n);
      for (int64_t i = 0; i < n; ++i) out[i] = castTo<T>(unaryOp<op, C>(widen(in[i])));
      return;
    }
    for (int64_t i = 0; i < n; ++i) store<T>(p[0] + i * so, unaryOp<op, C>(load<T>(p[1] + i * si)));
  });
}

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

template <Opcode op, typename T>
void binaryRows(const StridedLoop& loop, double alpha_value) {
  using C = ComputeType<T>;
  constexpr bool prescaled = !std::is_same_v<C, T> && (op == Opcode::kAdd || op == Opcode::kSub);
  const C given_alpha = castTo<C>(alpha_value);  // verified to fit; u8 takes negatives (wrapping)
  const C alpha = prescaled ? C(1) : given_alpha;
  // Scalars are captured by value: by reference the compiler must assume a store
  // through `out` may change them, reloads them per element and cannot vectorise.
  auto operand = [given_alpha](C b) { return scaledOperand<op, T>(b, given_alpha); };
  forEachRow(loop, [&loop, alpha, operand](const std::array<char*, kMaxOperands>& p, int64_t n) {
    const int64_t so = loop.innerStride(0), sa = loop.innerStride(1), sb = loop.innerStride(2);
    T* out = reinterpret_cast<T*>(p[0]);
    const T* a = reinterpret_cast<const T*>(p[1]);
    const T* b = reinterpret_cast<const T*>(p[2]);
    if constexpr (hasVectorMath<op, T>()) {
      const bool a_runs = sa == sizeof(T) || sa == 0, b_runs = sb == sizeof(T) || sb == 0;
      if (so == sizeof(T) && a_runs && b_runs) return binaryMathRow<op>(out, a, sa == 0 ? 0 : 1, b, sb == 0 ? 0 : 1, n);
    }
    if (so == sizeof(T) && sa == sizeof(T) && sb == sizeof(T)) {
      for (int64_t i = 0; i < n; ++i) out[i] = castTo<T>(binaryOp<op, C, T>(widen(a[i]), operand(widen(b[i])), alpha));
    } else if (so == sizeof(T) && sa == sizeof(T) && sb == 0) {
      const C scalar = operand(widen(*b));
      for (int64_t i = 0; i < n; ++i) out[i] = castTo<T>(binaryOp<op, C, T>(widen(a[i]), scalar, alpha));
    } else if (so == sizeof(T) && sa == 0 && sb == sizeof(T)) {
      const C scalar = widen(*a);
      for (int64_t i = 0; i < n; ++i) out[i] = castTo<T>(binaryOp<op, C, T>(scalar, operand(widen(b[i])), alpha));
    } else {
      for (int64_t i = 0; i < n; ++i) {
        store<T>(p[0] + i * so,
                 binaryOp<op, C, T>(load<T>(p[1] + i * sa), operand(load<T>(p[2] + i * sb)), alpha));
      }
    }
  });
}

template <Opcode op, typename T>
void compareRows(const StridedLoop& loop) {
  forEachRow(loop, [&](const std::array<char*, kMaxOperands>& p, int64_t n) {
    const int64_t so = loop.innerStride(0), sa = loop.innerStride(1), sb = loop.innerStride(2);
    bool* out = reinterpret_cast<bool*>(p[0]);
    const T* a = reinterpret_cast<const T*>(p[1]);
    const T* b = reinterpret_cast<const T*>(p[2]);
    // Runs the compiler vectorises: both inputs contiguous, or one of them a scalar
    // (x == -inf, mask > 0: the common comparisons).
    if (so == 1 && sa == sizeof(T) && sb == sizeof(T)) {
      for (int64_t i = 0; i < n; ++i) out[i] = compareOp<op>(widen(a[i]), widen(b[i]));
      return;
    }
    if (so == 1 && sa == sizeof(T) && sb == 0) {
      const auto scalar = widen(b[0]);
      for (int64_t i = 0; i < n; ++i) out[i] = compareOp<op>(widen(a[i]), scalar);
      return;
    }
    if (so == 1 && sa == 0 && sb == sizeof(T)) {
      const auto scalar = widen(a[0]);
      for (int64_t i = 0; i < n; ++i) out[i] = compareOp<op>(scalar, widen(b[i]));
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      store<bool>(p[0] + i * so, compareOp<op>(load<T>(p[1] + i * sa), load<T>(p[2] + i * sb)));
    }
  });
}

template <typename T>
void selectRows(const StridedLoop& loop) {
  forEachRow(loop, [&](const std::array<char*, kMaxOperands>& p, int64_t n) {
    const int64_t so = loop.innerStride(0), sc = loop.innerStride(1);
    const int64_t sa = loop.innerStride(2), sb = loop.innerStride(3);
    constexpr auto size = static_cast<int64_t>(sizeof(T));
    if (so == size && sc == 1 && (sa == size || sa == 0) && (sb == size || sb == 0)) {
      // Typed, so the compiler blends whole vectors; a scalar side (masked_fill's
      // value, where's 0) is read once.
      T* out = reinterpret_cast<T*>(p[0]);
      const auto* condition = reinterpret_cast<const uint8_t*>(p[1]);
      const T* a = reinterpret_cast<const T*>(p[2]);
      const T* b = reinterpret_cast<const T*>(p[3]);
      const int64_t ia = sa == 0 ? 0 : 1, ib = sb == 0 ? 0 : 1;
      if (ia == 1 && ib == 1) {
        for (int64_t i = 0; i < n; ++i) out[i] = condition[i] ? a[i] : b[i];
      } else if (ia == 1) {
        const T other = b[0];
        for (int64_t i = 0; i < n; ++i) out[i] = condition[i] ? a[i] : other;
      } else if (ib == 1) {
        const T other = a[0];
        for (int64_t i = 0; i < n; ++i) out[i] = condition[i] ? other : b[i];
      } else {
        const T first = a[0], second = b[0];
        for (int64_t i = 0; i < n; ++i) out[i] = condition[i] ? first : second;
      }
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      const bool condition = *reinterpret_cast<const bool*>(p[1] + i * sc);
      std::memcpy(p[0] + i * so, condition ? p[2] + i * sa : p[3] + i * sb, sizeof(T));
    }
  });
}

template <typename To, typename From>
void convertRows(const StridedLoop& loop) {
  forEachRow(loop, [&](const std::array<char*, kMaxOperands>& p, int64_t n) {
    const int64_t so = loop.innerStride(0), si = loop.innerStride(1);
    if (so == sizeof(To) && si == sizeof(From)) {
      To* out = reinterpret_cast<To*>(p[0]);
      const From* in = reinterpret_cast<const From*>(p[1]);
      if constexpr (std::is_same_v<To, From>) {
        // memmove: the two may be overlapping views of one storage (x[1:].copy_(x[:-1])).
        std::memmove(out, in, static_cast<size_t>(n) * sizeof(To));
      } else {
        for (int64_t i = 0; i < n; ++i) out[i] = castTo<To>(widen(in[i]));
      }
      return;
    }
    if (so == sizeof(To) && si == -static_cast<int64_t>(sizeof(From))) {  // a run read backwards (flip)
      To* out = reinterpret_cast<To*>(p[0]);
      const From* in = reinterpret_cast<const From*>(p[1]);
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<To, From>) out[i] = in[-i];
        else out[i] = castTo<To>(widen(in[-i]));
      }
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<To, From>) {
        // A move copies the bits, as the contiguous path does: a round trip through
        // float would quiet float16/bfloat16 NaNs and drop their payloads.
        std::memcpy(p[0] + i * so, p[1] + i * si, sizeof(To));
      } else {
        From value;
        std::memcpy(&value, p[1] + i * si, sizeof value);
        const To converted = castTo<To>(widen(value));
        std::memcpy(p[0] + i * so, &converted, sizeof converted);
      }
    }
  });
}

StridedLoop loopOf(const isa::Instruction& instruction, std::span<void* const> buffers) {
  return makeLoop(instruction.operands, buffers);
}

}  // namespace

// The entry points, one copy per target.
void unaryKernel(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const StridedLoop loop = loopOf(instruction, buffers);
  dispatchDType(instruction.operands[0].dtype, [&]<typename T>() {
    dispatchOpcode<Group::Unary>(instruction.opcode, [&]<Opcode op>() {
      if constexpr (accepts<op, T>()) unaryRows<op, T>(loop);
    });
  });
}

void binaryKernel(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const StridedLoop loop = loopOf(instruction, buffers);
  const bool has_alpha = isa::info(instruction.opcode).immediateCount() > 0;
  const double alpha = has_alpha ? instruction.immediates[0] : 1.0;
  dispatchDType(instruction.operands[0].dtype, [&]<typename T>() {
    dispatchOpcode<Group::Binary>(instruction.opcode, [&]<Opcode op>() {
      if constexpr (accepts<op, T>()) binaryRows<op, T>(loop, alpha);
    });
  });
}

void compareKernel(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const StridedLoop loop = loopOf(instruction, buffers);
  dispatchDType(instruction.operands[1].dtype, [&]<typename T>() {
    dispatchOpcode<Group::Compare>(instruction.opcode, [&]<Opcode op>() {
      if constexpr (accepts<op, T>()) compareRows<op, T>(loop);
    });
  });
}

void selectKernel(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const StridedLoop loop = loopOf(instruction, buffers);
  dispatchDType(instruction.operands[0].dtype, [&]<typename T>() { selectRows<T>(loop); });
}

void convertKernel(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const StridedLoop loop = loopOf(instruction, buffers);
  dispatchDType(instruction.operands[0].dtype, [&]<typename To>() {
    dispatchDType(instruction.operands[1].dtype, [&]<typename From>() { convertRows<To, From>(loop); });
  });
}

void fillKernel(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const StridedLoop loop = loopOf(instruction, buffers);
  dispatchDType(instruction.operands[0].dtype, [&]<typename T>() {
    const T value = castTo<T>(instruction.immediates[0]);
    forEachRow(loop, [&](const std::array<char*, kMaxOperands>& p, int64_t n) {
      const int64_t so = loop.innerStride(0);
      for (int64_t i = 0; i < n; ++i) std::memcpy(p[0] + i * so, &value, sizeof value);
    });
  });
}

}  // namespace pto::rt::sim::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pto::rt::sim::kernels {

HWY_EXPORT(unaryKernel);
HWY_EXPORT(binaryKernel);
HWY_EXPORT(compareKernel);
HWY_EXPORT(selectKernel);
HWY_EXPORT(convertKernel);
HWY_EXPORT(fillKernel);

void executeUnary(const isa::Instruction& instruction, std::span<void* const> buffers) {
  HWY_DYNAMIC_DISPATCH(unaryKernel)(instruction, buffers);
}

void executeBinary(const isa::Instruction& instruction, std::span<void* const> buffers) {
  HWY_DYNAMIC_DISPATCH(binaryKernel)(instruction, buffers);
}

void executeCompare(const isa::Instruction& instruction, std::span<void* const> buffers) {
  HWY_DYNAMIC_DISPATCH(compareKernel)(instruction, buffers);
}

void executeSelect(const isa::Instruction& instruction, std::span<void* const> buffers) {
  HWY_DYNAMIC_DISPATCH(selectKernel)(instruction, buffers);
}

void executeConvert(const isa::Instruction& instruction, std::span<void* const> buffers) {
  HWY_DYNAMIC_DISPATCH(convertKernel)(instruction, buffers);
}

void executeFill(const isa::Instruction& instruction, std::span<void* const> buffers) {
  HWY_DYNAMIC_DISPATCH(fillKernel)(instruction, buffers);
}

}  // namespace pto::rt::sim::kernels
#endif  // HWY_ONCE
