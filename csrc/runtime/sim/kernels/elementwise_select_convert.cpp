// Kernels of the comparisons, select, conversions (and moves) and fill. Each inner
// row has a contiguous fast path (and ones with a broadcast scalar) written so the
// compiler vectorises it, and a strided general path. Compiled once per vector
// target, chosen at run time (vector_target.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/sim/kernels/elementwise_select_convert.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>

#include "element_types.h"
#include "elementwise_ops.h"
#include "execute.h"
#include "strided_loop.h"
#include "elementwise_dispatch-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pto::rt::sim::kernels::HWY_NAMESPACE {
namespace {

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


}  // namespace

// The entry points, one copy per target.
void compareKernel(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const StridedLoop loop = loopOf(instruction, buffers);
  dispatchDType(instruction.operands[1].dtype, [&]<typename T>() {
    dispatchOpcode<Group::Compare>(instruction.opcode, [&]<Opcode op>() {
      if constexpr (accepts<op, T>()) compareRows<op, T>(loop);
    });
  });
}

static_assert(coversGroup<Group::Select, Opcode::kSelect>(), "selectKernel runs tsel only");
void selectKernel(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const StridedLoop loop = loopOf(instruction, buffers);
  dispatchDType(instruction.operands[0].dtype, [&]<typename T>() { selectRows<T>(loop); });
}

// tmov is tcvt between equal dtypes.
static_assert(coversGroup<Group::Convert, Opcode::kMove, Opcode::kConvert>(), "convertKernel runs tmov and tcvt only");
void convertKernel(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const StridedLoop loop = loopOf(instruction, buffers);
  dispatchDType(instruction.operands[0].dtype, [&]<typename To>() {
    dispatchDType(instruction.operands[1].dtype, [&]<typename From>() { convertRows<To, From>(loop); });
  });
}

static_assert(coversGroup<Group::Fill, Opcode::kFill>(), "fillKernel runs texpands only");
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

HWY_EXPORT(compareKernel);
HWY_EXPORT(selectKernel);
HWY_EXPORT(convertKernel);
HWY_EXPORT(fillKernel);

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
