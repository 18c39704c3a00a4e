// tsearchsorted. Each value finds its line through a third operand, the sorted lines
// seen at out's shape with stride 0 along the last dimension (so the loop hands every
// element the start of its line, whatever the layouts), and halves that line as
// PyTorch's CPU kernel does. The values are split over the cores in chunks.
#include <cstdlib>
#include <cstring>

#include "element_types.h"
#include "execute.h"
#include "opcode_dispatch.h"
#include "runtime/sim/sim_parallel.h"
#include "strided_loop.h"

namespace pto::rt::sim::kernels {
namespace {

// Values per parallel chunk: a search reads log2(length) elements, so a few hundred
// searches outweigh waking a core (PyTorch's CPU kernel splits at 200).
constexpr size_t kSearchGrain = 256;

// Lines longer than this many bytes are searched with prefetches (measured: 4 MiB lines
// 1.2x faster with them, 16 KiB ones 1.4x slower).
constexpr int64_t kNearLineBytes = int64_t{1} << 20;

// The first position of a line of `length` elements, `stride` bytes apart, whose element
// is >= value (right: > value), or length. PyTorch's halving step for step: a NaN
// value compares false everywhere and goes past the end, and a line that is not
// sorted gives the position PyTorch gives.
// Written as the range's start and length, each step's choice arithmetic on a mask
// rather than a branch: a search for a random value mispredicts half of its branches.
// A line `far` from the core (beyond its L2) costs a memory latency a step unless the
// next step's two candidates are prefetched, which in cache only costs time.
template <typename T, bool right, bool far>
int64_t searchLine(const char* line, int64_t stride, int64_t length, ComputeType<T> value) {
  int64_t start = 0;
  while (length > 0) {
    const int64_t half = length >> 1;
    if constexpr (far) {  // both elements the next step may read, fetched while this one's compare waits
      __builtin_prefetch(line + (start + (half >> 1)) * stride);
      __builtin_prefetch(line + (start + half + 1 + ((length - half - 1) >> 1)) * stride);
    }
    const ComputeType<T> element = load<T>(line + (start + half) * stride);
    // All ones where the value lies after the element: the range moves past it.
    const int64_t after = -static_cast<int64_t>(!(right ? element > value : element >= value));
    start += (half + 1) & after;
    length = half + ((length - 2 * half - 1) & after);  // length - half - 1 there, else half
  }
  return start;
}

}  // namespace

static_assert(coversGroup<isa::Group::Search, isa::Opcode::kSearchSorted>(), "executeSearch runs tsearchsorted only");

void executeSearch(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const isa::Operand& out = instruction.operands[0];
  const isa::Operand& sorted = instruction.operands[1];
  const int last = out.rank - 1;
  isa::Operand line_start = sorted;
  line_start.shape[last] = out.shape[last];
  line_start.strides[last] = 0;
  const isa::Operand operands[] = {out, instruction.operands[2], line_start};
  const StridedLoop loop = makeLoop(operands, buffers);
  const int64_t length = sorted.shape[last];
  const int64_t stride = sorted.strides[last] * static_cast<int64_t>(isa::dtypeSize(sorted.dtype));
  const bool right = instruction.immediates[0] != 0;
  dispatchDType(sorted.dtype, [&]<typename T>() {
    if constexpr (isa::kNumericTypes.contains(dtypeOf<T>())) {
      const bool far = length * std::abs(stride) > kNearLineBytes;
      const auto search = right ? (far ? searchLine<T, true, true> : searchLine<T, true, false>)
                                : (far ? searchLine<T, false, true> : searchLine<T, false, false>);
      rt::sim::parallelFor(static_cast<size_t>(loop.numel()), kSearchGrain, [&](size_t begin, size_t end) {
        forEachRowIn(loop, static_cast<int64_t>(begin), static_cast<int64_t>(end),
                     [&](const std::array<char*, kMaxOperands>& p, int64_t n) {
          const int64_t out_stride = loop.innerStride(0), value_stride = loop.innerStride(1);
          const int64_t line_stride = loop.innerStride(2);
          for (int64_t i = 0; i < n; ++i) {
            const int64_t position =
                search(p[2] + i * line_stride, stride, length, load<T>(p[1] + i * value_stride));
            std::memcpy(p[0] + i * out_stride, &position, sizeof position);
          }
        });
      });
    }
  });
}

}  // namespace pto::rt::sim::kernels
