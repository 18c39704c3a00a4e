// tscatter and tscatteradd. The loop runs over the positions off the axis (out, in and
// index seen at in's shape with extent 1 there); each run of positions walks its lines
// of index and in along the axis, in order, one step for all of them at a time. Runs
// of positions go to different cores; when positions are too few to keep the cores
// busy (a 1-D scatter has one), the cores also split out's axis into slices, each
// reading every index of its positions and writing only those that land in its slice.
// Either way each element of out is written by one core, in index order: the last
// write wins and sums are exact and deterministic.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "element_types.h"
#include "execute.h"
#include "runtime/sim/sim_parallel.h"
#include "strided_loop.h"

namespace pto::kernels {
namespace {

// Index elements per parallel chunk: below this, waking another core costs more than it saves.
constexpr int64_t kGrain = 32768;

[[noreturn]] void outOfBounds(int64_t at, int axis, int64_t extent) {
  char message[160];
  std::snprintf(message, sizeof message, "index %" PRId64 " is out of bounds for dimension %d with size %" PRId64, at,
                axis, extent);
  throw std::out_of_range(message);
}

template <typename T, bool kAdd>
void combine(char* slot, const char* source) {
  using C = ComputeType<T>;
  if constexpr (!kAdd) {
    std::memcpy(slot, source, sizeof(T));
  } else if constexpr (std::is_same_v<T, bool>) {
    store<T>(slot, load<T>(slot) || load<T>(source));  // torch's bool sum: or
  } else if constexpr (std::is_floating_point_v<C>) {
    store<T>(slot, load<T>(slot) + load<T>(source));  // float16/bfloat16 round at each step, as on the CPU
  } else {
    using U = std::make_unsigned_t<C>;  // integers wrap
    store<T>(slot, static_cast<C>(static_cast<U>(load<T>(slot)) + static_cast<U>(load<T>(source))));
  }
}

struct ScatterPlan {
  StridedLoop loop;  // over the positions off the axis: out, in, index
  int axis = 0;
  int64_t count = 1, extent = 1;                       // index entries per line, out's extent on the axis
  int64_t out_step = 0, in_step = 0, index_step = 0;  // byte strides along the axis
};

// Runs of positions from `p` on, `n` long: out[at] (op)= in[i] for at = index[i] in [low, high).
template <typename T, bool kAdd>
void scatterRun(const ScatterPlan& plan, const std::array<char*, kMaxOperands>& p, int64_t n, int64_t low,
                int64_t high) {
  const int64_t out_stride = plan.loop.innerStride(0), in_stride = plan.loop.innerStride(1);
  const int64_t index_stride = plan.loop.innerStride(2);
  for (int64_t i = 0; i < plan.count; ++i) {
    const char* index = p[2] + i * plan.index_step;
    const char* in = p[1] + i * plan.in_step;
    for (int64_t e = 0; e < n; ++e) {
      int64_t at = 0;
      std::memcpy(&at, index + e * index_stride, sizeof at);
      if (at < 0 || at >= plan.extent) outOfBounds(at, plan.axis, plan.extent);
      if (at >= low && at < high) combine<T, kAdd>(p[0] + e * out_stride + at * plan.out_step, in + e * in_stride);
    }
  }
}

}  // namespace

void executeScatterElements(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const isa::Operand& out = instruction.operands[0];
  const isa::Operand& in = instruction.operands[1];
  const isa::Operand& index = instruction.operands[2];
  if (in.numel() == 0) return;
  if (out.numel() == 0) {  // out is empty on the axis (it covers in off it): the first index is out of bounds
    int64_t at = 0;
    std::memcpy(&at, static_cast<const char*>(buffers[index.buffer]) + index.offset * 8, sizeof at);
    outOfBounds(at, static_cast<int>(instruction.immediates[0]), 0);
  }
  ScatterPlan plan;
  isa::Operand out_line = out, in_line = in, index_line = index;
  for (int d = 0; d < out.rank; ++d) out_line.shape[d] = in.shape[d];
  if (out.rank > 0) {
    plan.axis = static_cast<int>(instruction.immediates[0]);
    plan.count = in.shape[plan.axis];
    plan.extent = out.shape[plan.axis];
    const auto size = static_cast<int64_t>(isa::dtypeSize(out.dtype));
    plan.out_step = out.strides[plan.axis] * size;
    plan.in_step = in.strides[plan.axis] * size;
    plan.index_step = index.strides[plan.axis] * static_cast<int64_t>(sizeof(int64_t));
    out_line.shape[plan.axis] = in_line.shape[plan.axis] = index_line.shape[plan.axis] = 1;
  }
  const isa::Operand operands[] = {out_line, in_line, index_line};
  plan.loop = makeLoop(operands, buffers);
  const int64_t positions = plan.loop.numel();
  const auto cores = static_cast<int64_t>(rt::sim::parallelism());
  const int64_t slices = positions >= cores || positions * plan.count < 2 * kGrain
                             ? 1 : std::min(plan.extent, (cores + positions - 1) / positions);
  const bool add = instruction.opcode == isa::Opcode::kScatterAdd;
  dispatchDType(out.dtype, [&]<typename T>() {
    const auto run = add ? &scatterRun<T, true> : &scatterRun<T, false>;
    // Work item k is positions k % positions of slice k / positions.
    rt::sim::parallelFor(static_cast<size_t>(positions * slices),
                         static_cast<size_t>(std::max<int64_t>(1, kGrain / plan.count)), [&](size_t begin, size_t end) {
      for (auto item = static_cast<int64_t>(begin); item < static_cast<int64_t>(end);) {
        const int64_t slice = item / positions, first = item % positions;
        const int64_t last = std::min(positions, first + static_cast<int64_t>(end) - item);
        const int64_t low = slice * plan.extent / slices, high = (slice + 1) * plan.extent / slices;
        forEachRowIn(plan.loop, first, last, [&](const std::array<char*, kMaxOperands>& p, int64_t n) {
          run(plan, p, n, low, high);
        });
        item += last - first;
      }
    });
  });
}

}  // namespace pto::kernels
