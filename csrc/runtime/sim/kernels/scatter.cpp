// tscatter and tscatteradd. The loop runs over the positions off the axis (out, in and
// index seen at in's shape with extent 1 there); each run of positions walks its lines
// of index and in along the axis, in order, one step for all of them at a time. Runs
// of at least a cache line of positions go to different cores. Where the index is
// the same for a whole run (index_put's is, for the elements of a row), the cores
// split out's axis into slices instead, each reading every index and writing the
// whole rows that land in its slice: one test per row, and no row shared by cores.
// A 1-D scatter (one line) runs on one core, as PyTorch's CPU kernel does: splitting
// it would have each core read every index, or sort them first. Each element
// of out is written by one core, in index order: the last write wins and sums are
// exact and deterministic. float16/bfloat16 sums and products accumulate in a float32
// copy of out and round once at the end, as PyTorch's CPU kernel does.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "element_types.h"
#include "execute.h"
#include "opcode_dispatch.h"
#include "runtime/sim/sim_parallel.h"
#include "strided_loop.h"

namespace pto::rt::sim::kernels {
namespace {

// Index elements per parallel chunk: below this, waking another core costs more than it saves.
constexpr int64_t kGrain = 32768;
// Positions per parallel chunk at least: neighbours in one cache line stay on one core.
constexpr int64_t kLinePositions = 16;

[[noreturn]] void outOfBounds(int64_t at, int axis, int64_t extent) {
  char message[160];
  std::snprintf(message, sizeof message, "index %" PRId64 " is out of bounds for dimension %d with size %" PRId64, at,
                axis, extent);
  throw std::out_of_range(message);
}

// How an instruction combines in[i] into out[at].
enum class Combine { kAssign, kAdd, kMul, kMax, kMin };

template <isa::Opcode op>
constexpr Combine combineOf() {
  if constexpr (op == isa::Opcode::kScatter) return Combine::kAssign;
  else if constexpr (op == isa::Opcode::kScatterAdd) return Combine::kAdd;
  else if constexpr (op == isa::Opcode::kScatterMul) return Combine::kMul;
  else if constexpr (op == isa::Opcode::kScatterMax) return Combine::kMax;
  else if constexpr (op == isa::Opcode::kScatterMin) return Combine::kMin;
  else static_assert(op == isa::Opcode::kScatter, "the ScatterElements family has no combine for this instruction");
}

// out (op)= in, out held as Out and in as In: integers wrap, bools or (sum, max) and and
// (product, min), and max/min take a NaN from either side, as PyTorch's CPU kernels do.
template <typename Out, typename In, Combine kOp>
void combine(char* slot, const char* source) {
  using C = ComputeType<Out>;
  if constexpr (kOp == Combine::kAssign) {
    std::memcpy(slot, source, sizeof(Out));
  } else if constexpr (std::is_same_v<Out, bool>) {
    const bool a = load<Out>(slot), b = load<In>(source);
    store<Out>(slot, kOp == Combine::kAdd || kOp == Combine::kMax ? a || b : a && b);
  } else if constexpr (kOp == Combine::kMax || kOp == Combine::kMin) {
    const C a = load<Out>(slot), b = load<In>(source);
    if (b != b || (kOp == Combine::kMax ? a < b : b < a)) store<Out>(slot, b);  // a NaN a stays
  } else if constexpr (std::is_floating_point_v<C>) {
    const C a = load<Out>(slot), b = load<In>(source);
    store<Out>(slot, kOp == Combine::kAdd ? a + b : a * b);
  } else {
    // Integers wrap: computed in uint64_t, where no promotion to int can overflow.
    const auto a = static_cast<uint64_t>(load<Out>(slot)), b = static_cast<uint64_t>(load<In>(source));
    store<Out>(slot, static_cast<C>(static_cast<std::make_unsigned_t<C>>(kOp == Combine::kAdd ? a + b : a * b)));
  }
}

// combine() as the loops take it, with the element sizes, so that a run of
// contiguous elements is a loop the compiler can vectorise.
template <typename Out, typename In, Combine kOp>
struct Combiner {
  static constexpr int64_t kOutSize = sizeof(Out), kInSize = sizeof(In);
  void operator()(char* slot, const char* source) const { combine<Out, In, kOp>(slot, source); }
};

struct ScatterPlan {
  StridedLoop loop;  // over the positions off the axis: out, in, index
  int axis = 0;
  int64_t count = 1, extent = 1;                       // index entries per line, out's extent on the axis
  bool wrap = false;                                   // wrap=1: indices from -extent, negatives from the end
  int64_t out_step = 0, in_step = 0, index_step = 0;  // byte strides along the axis
};

ScatterPlan makePlan(const isa::Operand& out, const isa::Operand& in, const isa::Operand& index,
                     const std::array<double, isa::kMaxImmediates>& immediates, std::span<void* const> buffers) {
  ScatterPlan plan;
  const double axis = immediates[0];
  isa::Operand out_line = out, in_line = in, index_line = index;
  for (int d = 0; d < out.rank; ++d) out_line.shape[d] = in.shape[d];
  if (out.rank > 0) {
    plan.axis = static_cast<int>(axis);
    plan.count = in.shape[plan.axis];
    plan.extent = out.shape[plan.axis];
    plan.out_step = out.strides[plan.axis] * static_cast<int64_t>(isa::dtypeSize(out.dtype));
    plan.in_step = in.strides[plan.axis] * static_cast<int64_t>(isa::dtypeSize(in.dtype));
    plan.index_step = index.strides[plan.axis] * static_cast<int64_t>(sizeof(int64_t));
    out_line.shape[plan.axis] = in_line.shape[plan.axis] = index_line.shape[plan.axis] = 1;
  }
  plan.wrap = immediates[1] != 0;
  const isa::Operand operands[] = {out_line, in_line, index_line};
  plan.loop = makeLoop(operands, buffers);
  return plan;
}

// Runs of positions from `p` on, `n` long: apply(&out[at], &in[i]) for at = index[i];
// where the index is the same along the run, only for at in [low, high) (a slice).
template <bool kWrap, typename Apply>
void scatterRun(const ScatterPlan& plan, const std::array<char*, kMaxOperands>& p, int64_t n, int64_t low,
                int64_t high, const Apply& apply) {
  // Locals, not plan's fields: the stores through char* could alias those, and the loop would reload them.
  const int64_t out_stride = plan.loop.innerStride(0), in_stride = plan.loop.innerStride(1);
  const int64_t index_stride = plan.loop.innerStride(2);
  const int64_t count = plan.count, extent = plan.extent, out_step = plan.out_step;
  const int64_t in_step = plan.in_step, index_step = plan.index_step;
  const auto position = [&](const char* index) {
    int64_t at = 0;
    std::memcpy(&at, index, sizeof at);
    if constexpr (kWrap) {  // at in [-extent, extent), in one unsigned comparison; negatives count from the end
      if (static_cast<uint64_t>(at) + static_cast<uint64_t>(extent) >= 2 * static_cast<uint64_t>(extent)) {
        outOfBounds(at, plan.axis, extent);
      }
      return at + ((at >> 63) & extent);
    } else {
      if (static_cast<uint64_t>(at) >= static_cast<uint64_t>(extent)) outOfBounds(at, plan.axis, extent);
      return at;
    }
  };
  const char* index = p[2];
  const char* in = p[1];
  if (n == 1) {  // one position (a 1-D scatter): a single loop along the axis
    for (int64_t i = 0; i < count; ++i, index += index_step, in += in_step) apply(p[0] + position(index) * out_step, in);
    return;
  }
  if (index_stride == 0) {  // one index for the run (index_put's rows): one test, then the run
    for (int64_t i = 0; i < count; ++i, index += index_step, in += in_step) {
      const int64_t at = position(index);
      if (at < low || at >= high) continue;
      char* const out = p[0] + at * out_step;
      if (out_stride == Apply::kOutSize && in_stride == Apply::kInSize) {
        for (int64_t e = 0; e < n; ++e) apply(out + e * Apply::kOutSize, in + e * Apply::kInSize);
      } else {
        for (int64_t e = 0; e < n; ++e) apply(out + e * out_stride, in + e * in_stride);
      }
    }
    return;
  }
  if (std::abs(index_step) < std::abs(index_stride)) {  // the axis is the nearer in memory: each line in turn
    for (int64_t e = 0; e < n; ++e) {
      const char* line_index = p[2] + e * index_stride;
      const char* line_in = p[1] + e * in_stride;
      char* const line_out = p[0] + e * out_stride;
      for (int64_t i = 0; i < count; ++i, line_index += index_step, line_in += in_step) {
        apply(line_out + position(line_index) * out_step, line_in);
      }
    }
    return;
  }
  for (int64_t i = 0; i < count; ++i, index += index_step, in += in_step) {  // a step of every line at a time
    for (int64_t e = 0; e < n; ++e) {
      apply(p[0] + e * out_stride + position(index + e * index_stride) * out_step, in + e * in_stride);
    }
  }
}

template <typename Apply>
void scatter(const ScatterPlan& plan, const Apply& apply) {
  const int64_t positions = plan.loop.numel();
  const auto cores = static_cast<int64_t>(rt::sim::parallelism());
  const bool index_per_run = plan.loop.rank > 0 && plan.loop.innerStride(2) == 0 && positions >= kLinePositions;
  const int64_t slices = index_per_run && positions * plan.count >= 2 * kGrain ? std::min(plan.extent, cores) : 1;
  const int64_t grain = std::max(kLinePositions, kGrain / plan.count);
  // Work item k is position k % positions of slice k / positions.
  rt::sim::parallelFor(static_cast<size_t>(positions * slices), static_cast<size_t>(slices > 1 ? positions : grain),
                       [&](size_t begin, size_t end) {
    for (auto item = static_cast<int64_t>(begin); item < static_cast<int64_t>(end);) {
      const int64_t slice = item / positions, first = item % positions;
      const int64_t last = std::min(positions, first + static_cast<int64_t>(end) - item);
      const int64_t low = slice * plan.extent / slices, high = (slice + 1) * plan.extent / slices;
      forEachRowIn(plan.loop, first, last, [&](const std::array<char*, kMaxOperands>& p, int64_t n) {
        if (plan.wrap) scatterRun<true>(plan, p, n, low, high, apply);
        else scatterRun<false>(plan, p, n, low, high, apply);
      });
      item += last - first;
    }
  });
}

// A sum or product of float16/bfloat16 T: out widened into a float32 copy, the
// combining done there, and the elements that received any rounded back once. Only
// those are written back: out may view one element more than once (index_put's
// folded view does), and an untouched alias must not undo a sum.
template <typename T, Combine kOp>
void scatterWide(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const isa::Operand& out = instruction.operands[0];
  std::vector<float> wide(static_cast<size_t>(out.numel()));
  std::vector<char> touched(wide.size(), 0);
  const char* const wide_base = reinterpret_cast<const char*>(wide.data());
  std::vector<void*> all(buffers.begin(), buffers.end());
  all.push_back(wide.data());
  isa::Operand wide_out = out;
  wide_out.buffer = static_cast<int32_t>(buffers.size());
  wide_out.dtype = isa::DType::kFloat32;
  wide_out.offset = 0;
  for (int64_t d = out.rank - 1, stride = 1; d >= 0; stride *= out.shape[d--]) wide_out.strides[d] = stride;
  const isa::Operand pair[] = {wide_out, out};
  const StridedLoop widen_loop = makeLoop(pair, all);
  forEachRow(widen_loop, [&](const std::array<char*, kMaxOperands>& p, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      store<float>(p[0] + i * widen_loop.innerStride(0), load<T>(p[1] + i * widen_loop.innerStride(1)));
    }
  });
  struct MarkingCombiner : Combiner<float, T, kOp> {
    char* touched;
    const char* wide_base;
    void operator()(char* slot, const char* source) const {
      combine<float, T, kOp>(slot, source);
      touched[static_cast<size_t>(slot - wide_base) / sizeof(float)] = 1;
    }
  };
  const isa::Instruction& in = instruction;
  scatter(makePlan(wide_out, in.operands[1], in.operands[2], in.immediates, all),
          MarkingCombiner{{}, touched.data(), wide_base});
  const isa::Operand back[] = {out, wide_out};
  const StridedLoop narrow_loop = makeLoop(back, all);
  forEachRow(narrow_loop, [&](const std::array<char*, kMaxOperands>& p, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const char* sum = p[1] + i * narrow_loop.innerStride(1);
      if (touched[static_cast<size_t>(sum - wide_base) / sizeof(float)]) {
        store<T>(p[0] + i * narrow_loop.innerStride(0), load<float>(sum));
      }
    }
  });
}

}  // namespace

void executeScatterElements(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const isa::Operand& out = instruction.operands[0];
  const isa::Operand& in = instruction.operands[1];
  const isa::Operand& index = instruction.operands[2];
  if (in.numel() == 0) return;
  if (out.numel() == 0) {  // out is empty on the axis (it covers in off it): every index is out of bounds
    int64_t at = 0;
    std::memcpy(&at, static_cast<const char*>(buffers[index.buffer]) + index.offset * 8, sizeof at);
    outOfBounds(at, static_cast<int>(instruction.immediates[0]), 0);
  }
  dispatchOpcode<isa::Group::ScatterElements>(instruction.opcode, [&]<isa::Opcode op>() {
    constexpr Combine kOp = combineOf<op>();
    dispatchDType(out.dtype, [&]<typename T>() {
      if constexpr ((std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) &&
                    (kOp == Combine::kAdd || kOp == Combine::kMul)) {
        scatterWide<T, kOp>(instruction, buffers);
      } else {
        scatter(makePlan(out, in, index, instruction.immediates, buffers), Combiner<T, T, kOp>{});
      }
    });
  });
}

}  // namespace pto::rt::sim::kernels
