// tcumsum and tcumprod. The lines along the axis are independent. When the axis is
// out's innermost dimension, a core scans whole lines, eight side by side (one
// element of each per step, so that the running folds do not wait on each other).
// Otherwise a core takes a block of neighbouring lines (along out's innermost other
// dimension) and scans them together, each step along the axis updating a row of
// accumulators: axis 0 of a row-major [N, M] goes row by row, with a vectorised
// add over M. Lines are read before they are written, element by element, so out
// may be in itself (in place).
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "element_types.h"
#include "execute.h"
#include "line_positions.h"
#include "opcode_dispatch.h"
#include "runtime/sim/sim_parallel.h"

namespace pto::rt::sim::kernels {
namespace {

// Elements per parallel chunk: below this, waking another core costs more than it saves.
constexpr int64_t kScanGrain = 32768;

// Neighbouring lines scanned together: a row of accumulators that stays in L1.
constexpr int64_t kBlock = 256;

// Lines scanned together when each runs along memory: enough independent folds
// to hide the latency of one addition (or multiplication).
constexpr int64_t kLanes = 8;

// The running sum or product of T, as PyTorch's CPU accumulates it (at::acc_type):
// float32 and float64 in double, float16/bfloat16 in float, integers in 64 bits
// (unsigned here, so that they wrap without overflowing).
template <isa::Opcode op, typename T>
struct Scan {
  static_assert(op == isa::Opcode::kCumsum || op == isa::Opcode::kCumprod, "the Scan family has no kernel for this instruction");
  using C = ComputeType<T>;
  static constexpr bool kHalfWidth = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
  using Acc = std::conditional_t<std::is_integral_v<C>, uint64_t, std::conditional_t<kHalfWidth, float, double>>;
  static constexpr Acc kStart = op == isa::Opcode::kCumsum ? Acc(0) : Acc(1);

  static Acc step(Acc acc, C x) {
    Acc value;
    if constexpr (std::is_integral_v<C>) value = static_cast<uint64_t>(static_cast<int64_t>(x));  // sign-extended
    else value = static_cast<Acc>(x);
    return op == isa::Opcode::kCumsum ? acc + value : acc * value;
  }

  // The accumulator in T: integers truncate, as PyTorch's (scalar_t) cast does.
  static T result(Acc acc) {
    if constexpr (std::is_integral_v<C>) return castTo<T>(static_cast<int64_t>(acc));
    else return castTo<T>(acc);
  }
};

// kCount whole lines of n elements, `in_step` and `out_step` bytes apart, one
// element of each per step: independent running folds, so that a step need not
// wait for the one before it in the same line.
template <isa::Opcode op, typename T, int kCount>
void scanLines(char* const* out, const char* const* in, int64_t n, int64_t out_step, int64_t in_step) {
  using S = Scan<op, T>;
  std::array<typename S::Acc, kCount> acc;
  acc.fill(S::kStart);
  for (int64_t i = 0; i < n; ++i) {
    for (int l = 0; l < kCount; ++l) {
      acc[l] = S::step(acc[l], load<T>(in[l] + i * in_step));
      const T value = S::result(acc[l]);
      std::memcpy(out[l] + i * out_step, &value, sizeof value);
    }
  }
}

// `width` neighbouring lines, `out_stride` and `in_stride` bytes apart, scanned together.
template <isa::Opcode op, typename T>
void scanBlock(char* out, const char* in, int64_t n, int64_t width, int64_t out_step, int64_t in_step,
               int64_t out_stride, int64_t in_stride) {
  using S = Scan<op, T>;
  std::array<typename S::Acc, kBlock> acc;
  std::fill(acc.begin(), acc.begin() + width, S::kStart);
  const bool dense = out_stride == sizeof(T) && in_stride == sizeof(T);
  for (int64_t i = 0; i < n; ++i) {
    const char* source = in + i * in_step;
    char* target = out + i * out_step;
    if (dense) {
      const T* values = reinterpret_cast<const T*>(source);
      T* results = reinterpret_cast<T*>(target);
      for (int64_t j = 0; j < width; ++j) {
        acc[j] = S::step(acc[j], widen(values[j]));
        results[j] = S::result(acc[j]);
      }
    } else {
      for (int64_t j = 0; j < width; ++j) {
        acc[j] = S::step(acc[j], load<T>(source + j * in_stride));
        const T value = S::result(acc[j]);
        std::memcpy(target + j * out_stride, &value, sizeof value);
      }
    }
  }
}

template <isa::Opcode op, typename T>
void scan(const isa::Operand& out, const isa::Operand& in, int axis, std::span<void* const> buffers) {
  const auto size = static_cast<int64_t>(sizeof(T));
  const int64_t n = out.rank > 0 ? out.shape[axis] : 1;
  const int64_t out_step = out.rank > 0 ? out.strides[axis] * size : 0;
  const int64_t in_step = out.rank > 0 ? in.strides[axis] * size : 0;
  // The innermost dimension of out but the axis; none when the axis is innermost.
  int inner = -1;
  for (int d = 0; d < out.rank; ++d) {
    if (d == axis || out.shape[d] == 1) continue;
    if (inner < 0 || std::abs(out.strides[d]) < std::abs(out.strides[inner])) inner = d;
  }
  if (inner >= 0 && n > 1 && std::abs(out.strides[axis]) < std::abs(out.strides[inner])) inner = -1;
  char* const out_base = static_cast<char*>(buffers[out.buffer]) + out.offset * size;
  const char* const in_base = static_cast<const char*>(buffers[in.buffer]) + in.offset * size;
  if (inner < 0) {  // whole lines, kLanes at a time
    const LinePositions lines = positionsOff(out, in, axis);
    const int64_t groups = (lines.count + kLanes - 1) / kLanes;
    const int64_t grain = std::max<int64_t>(1, kScanGrain / (n * kLanes));  // groups per chunk
    rt::sim::parallelFor(static_cast<size_t>(groups), static_cast<size_t>(grain), [&](size_t begin, size_t end) {
      for (size_t group = begin; group < end; ++group) {
        const int64_t first = static_cast<int64_t>(group) * kLanes;
        const int64_t count = std::min(kLanes, lines.count - first);
        std::array<char*, kLanes> targets;
        std::array<const char*, kLanes> sources;
        for (int64_t l = 0; l < count; ++l) {
          const auto [out_offset, in_offset] = lines.offsets(first + l);
          targets[l] = out_base + out_offset * size;
          sources[l] = in_base + in_offset * size;
        }
        if (count == kLanes) {
          scanLines<op, T, kLanes>(targets.data(), sources.data(), n, out_step, in_step);
        } else {
          for (int64_t l = 0; l < count; ++l) scanLines<op, T, 1>(&targets[l], &sources[l], n, out_step, in_step);
        }
      }
    });
    return;
  }
  // Blocks of up to kBlock neighbouring lines along the inner dimension.
  const int64_t width = out.shape[inner];
  const int64_t out_stride = out.strides[inner] * size, in_stride = in.strides[inner] * size;
  const LinePositions outer = positionsOff(out, in, axis, inner);
  const int64_t blocks = (width + kBlock - 1) / kBlock;  // per outer position
  const int64_t grain = std::max<int64_t>(1, kScanGrain / (n * std::min(width, kBlock)));  // blocks per chunk
  rt::sim::parallelFor(static_cast<size_t>(outer.count * blocks), static_cast<size_t>(grain),
                       [&](size_t begin, size_t end) {
    for (size_t task = begin; task < end; ++task) {
      const auto [out_offset, in_offset] = outer.offsets(static_cast<int64_t>(task) / blocks);
      const int64_t first = static_cast<int64_t>(task) % blocks * kBlock;
      char* target = out_base + out_offset * size + first * out_stride;
      const char* source = in_base + in_offset * size + first * in_stride;
      scanBlock<op, T>(target, source, n, std::min(kBlock, width - first), out_step, in_step, out_stride, in_stride);
    }
  });
}

}  // namespace

void executeScan(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const isa::Operand& out = instruction.operands[0];
  const isa::Operand& in = instruction.operands[1];
  const int axis = static_cast<int>(instruction.immediates[0]);
  if (out.numel() == 0) return;
  dispatchOpcode<isa::Group::Scan>(instruction.opcode, [&]<isa::Opcode op>() {
    dispatchDType(out.dtype, [&]<typename T>() {
      if constexpr (!std::is_same_v<T, bool>) scan<op, T>(out, in, axis, buffers);
    });
  });
}

}  // namespace pto::rt::sim::kernels
