// Kernels of the reductions. The output operand is viewed at the input's shape
// with stride 0 along the reduced dimensions. Two strategies:
//  - rows: the input's innermost dimension is reduced: each output element folds
//    a run of memory, with several independent accumulators (vectorisable);
//  - columns: the innermost dimension is kept: a vector of accumulators, one per
//    output element of that dimension, folds whole input rows at a time.
// float32 (and widened float16/bfloat16) sums of contiguous runs accumulate in
// float32 vectors, cascaded as PyTorch's CPU sums are: blocks of partial sums are
// added one level up (in double) once per block, so the rounding error grows with
// the block, not the whole count.
// Compiled once per vector target, chosen at run time (vector_target.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/sim/kernels/reduce.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "element_types.h"
#include "elementwise_ops.h"
#include "execute.h"
#include "opcode_dispatch.h"
#include "runtime/sim/host_caches.h"
#include "runtime/sim/sim_parallel.h"
#include "vector_extrema.h"
#include "vector_widen-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pto::rt::sim::kernels::HWY_NAMESPACE {
namespace {

using isa::Opcode;

// Input elements below which a reduction runs on the calling core alone: waking
// another core costs tens of microseconds, as long as reading a few MiB takes.
constexpr int64_t kSerialElements = 1 << 19;

// A reduction of few outputs split over the cores: parts per core, and their least size.
constexpr int64_t kPartsPerCore = 8;
constexpr int64_t kPartElements = 1 << 16;

// Input rows a column block folds into its float partial sums before they move up.
constexpr int64_t kColumnBlockRows = 64;

// Column sums of float32 (or float16/bfloat16, widened) rows, cascaded: `rows`
// input rows (row r at rowAt(r), `count` contiguous values of T) are folded
// kColumnBlockRows at a time into float partial sums over a tile of columns, then
// added into `acc`. The partial sums fill half the L1 cache, in whole 4 KiB pages of
// input row: a tile's rows are then long runs the hardware prefetchers follow from
// one page to the next (4096^2 float32 on an AVX2 EPYC, 2 cores, 32 KiB L1: 4.05 ms in
// tiles of 1365 columns, partial and total sums sharing the half, 3.10 ms in tiles of 4096).
// The tiles split columns only: every column's sum is the same whatever their size.
template <typename T, typename RowAt>
void cascadeColumnSums(double* acc, int64_t count, int64_t rows, RowAt rowAt) {
  constexpr int64_t kPage = 4096 / sizeof(T);
  const int64_t tile = std::max(kPage, hostCaches().l1_data_bytes / 2 / static_cast<int64_t>(sizeof(float)) / kPage * kPage);
  std::vector<float> partial(static_cast<size_t>(std::min(tile, count)));
  constexpr bool kWidenFirst = kIsHalfFloat<T> && !kVectorConverts<T>;  // else widened as addRow loads
  std::vector<float> widened(kWidenFirst ? partial.size() : 0);
  for (int64_t column = 0; column < count; column += tile) {
    const int64_t width = std::min(tile, count - column);
    for (int64_t first = 0; first < rows; first += kColumnBlockRows) {
      std::fill_n(partial.begin(), width, 0.0f);
      const int64_t last = std::min(rows, first + kColumnBlockRows);
      int64_t r = first;
      if constexpr (!kWidenFirst) {
        for (; r + 4 <= last; r += 4) {
          addFourRows(partial.data(), rowAt(r) + column, rowAt(r + 1) + column, rowAt(r + 2) + column,
                      rowAt(r + 3) + column, width);
        }
      }
      for (; r < last; ++r) {
        if constexpr (kWidenFirst) {
          widenToFloat(widened.data(), rowAt(r) + column, width);
          addRow(partial.data(), widened.data(), width);
        } else {
          addRow(partial.data(), rowAt(r) + column, width);
        }
      }
      for (int64_t i = 0; i < width; ++i) acc[column + i] += partial[i];
    }
  }
}

// fold(run, count) over a contiguous run of T: float32 and the 16-bit floats this
// target widens as it loads (kVectorConverts) directly, other 16-bit floats widened
// into a float block at a time first.
template <typename T, typename Fold>
void foldContiguous(const T* values, int64_t n, Fold fold) {
  if constexpr (std::is_same_v<T, float> || kVectorConverts<T>) {
    fold(values, n);
  } else {
    float block[kBlockElements];
    for (int64_t start = 0; start < n; start += kBlockElements) {
      const int64_t count = std::min<int64_t>(kBlockElements, n - start);
      widenToFloat(block, values + start, count);
      fold(static_cast<const float*>(block), count);
    }
  }
}

struct Dim {
  int64_t size;
  int64_t in_stride;   // elements
  int64_t out_stride;  // elements
};

struct Plan {
  std::vector<Dim> kept;     // outermost first
  std::vector<Dim> reduced;  // outermost first (row-major over the input's dims)
  int64_t kept_count = 1;
  int64_t reduced_count = 1;
};

// Neighbours that step through memory as one dimension does, merged into it (a
// contiguous tensor's reduced dimensions become one run): fewer, longer runs.
void mergeContiguous(std::vector<Dim>& dims) {
  std::vector<Dim> merged;
  for (const Dim& dim : dims) {
    if (!merged.empty() && merged.back().in_stride == dim.size * dim.in_stride &&
        merged.back().out_stride == dim.size * dim.out_stride) {
      merged.back() = {merged.back().size * dim.size, dim.in_stride, dim.out_stride};
    } else {
      merged.push_back(dim);
    }
  }
  dims = std::move(merged);
}

// The kept and the reduced dimensions, each in the input's row-major order, or (the
// reduced ones, `memory_order`) from the largest input stride to the smallest, as
// PyTorch's CPU reductions visit them: a channels_last tensor's full sum reads memory
// in one run. Only a fold that no position depends on may take the memory order.
Plan makePlan(const isa::Operand& out, const isa::Operand& in, bool memory_order = false) {
  Plan plan;
  for (int d = 0; d < in.rank; ++d) {
    const Dim dim{in.shape[d], in.strides[d], out.strides[d]};
    if (in.shape[d] == 1) continue;
    if (out.strides[d] == 0) {
      plan.reduced.push_back(dim);
      plan.reduced_count *= dim.size;
    } else {
      plan.kept.push_back(dim);
      plan.kept_count *= dim.size;
    }
  }
  if (memory_order) {
    std::ranges::stable_sort(plan.reduced, [](const Dim& a, const Dim& b) {
      return std::abs(a.in_stride) > std::abs(b.in_stride);
    });
  }
  mergeContiguous(plan.kept);
  mergeContiguous(plan.reduced);
  return plan;
}

// Offset (elements) of the i-th combination of `dims`, row-major.
int64_t offsetOf(const std::vector<Dim>& dims, int64_t index, bool output) {
  int64_t offset = 0;
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    const int64_t i = index % dims[d].size;
    index /= dims[d].size;
    offset += i * (output ? dims[d].out_stride : dims[d].in_stride);
  }
  return offset;
}

// The fold of each reduction: accumulator type, start, step, and result.
template <Opcode op, typename C>
struct Fold {
  static_assert(op == Opcode::kSum || op == Opcode::kProd || op == Opcode::kAmax || op == Opcode::kAmin ||
                    op == Opcode::kAny || op == Opcode::kAll,
                "the Reduce family has no fold for this instruction");
  // max/min are exact in the compute type; sums and products widen (double, and
  // for integers 64 bits, unsigned so that they wrap without signed overflow; GCC 12
  // at -O3 miscompiled 8-bit sums folded as int64 through uint64 casts).
  static constexpr bool kExtreme = op == Opcode::kAmax || op == Opcode::kAmin;
  using Acc = std::conditional_t<kExtreme || std::is_same_v<C, bool>, C,
                                 std::conditional_t<std::is_floating_point_v<C>, double, uint64_t>>;
  static Acc init() {
    if constexpr (op == Opcode::kSum) return Acc(0);
    else if constexpr (op == Opcode::kProd) return Acc(1);
    else if constexpr (op == Opcode::kAny) return false;
    else if constexpr (op == Opcode::kAll) return true;
    // Floats start at an infinity, not at the finite extreme: the max of a row of -inf is -inf.
    else if constexpr (std::numeric_limits<C>::has_infinity) {
      return op == Opcode::kAmax ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
    }
    else if constexpr (op == Opcode::kAmax) return std::numeric_limits<C>::lowest();
    else return std::numeric_limits<C>::max();  // kAmin
  }
  static Acc merge(Acc a, Acc b) {
    if constexpr (op == Opcode::kSum || op == Opcode::kProd || std::is_same_v<Acc, bool>) {
      if constexpr (op == Opcode::kSum) {
        return a + b;
      } else if constexpr (op == Opcode::kProd) {
        return a * b;
      } else {
        return step(a, static_cast<C>(b));
      }
    } else {
      if (isNaN(a) || isNaN(b)) return Acc(NAN);
      return op == Opcode::kAmax ? std::max(a, b) : std::min(a, b);
    }
  }

  static Acc step(Acc acc, C x) {
    if constexpr (op == Opcode::kSum) return acc + static_cast<Acc>(x);  // integers: sign-extended, wrapping
    else if constexpr (op == Opcode::kProd) return acc * static_cast<Acc>(x);
    else if constexpr (op == Opcode::kAny) return acc || x;
    else if constexpr (op == Opcode::kAll) return acc && x;
    else if constexpr (op == Opcode::kAmax) return isNaN(acc) || isNaN(x) ? Acc(NAN) : (x > acc ? Acc(x) : acc);
    else return isNaN(acc) || isNaN(x) ? Acc(NAN) : (x < acc ? Acc(x) : acc);
  }
};

template <Opcode op, typename T>
void reduceValues(const isa::Operand& out_op, const isa::Operand& in_op, std::span<void* const> buffers,
                  double scale) {
  using C = ComputeType<T>;
  using F = Fold<op, C>;
  using Acc = typename F::Acc;
  // float32 sums cascade (Acc: double); float16/bfloat16 sums too, widened. Their sums,
  // maxima and minima over contiguous runs take the vector folds.
  constexpr bool kFloat = std::is_same_v<T, float> || kIsHalfFloat<T>;
  constexpr bool kFloatSum = op == Opcode::kSum && kFloat;
  constexpr bool kVectorFold = kFloat && (op == Opcode::kSum || op == Opcode::kAmax || op == Opcode::kAmin);
  const Plan plan = makePlan(out_op, in_op, true);
  const char* in = static_cast<const char*>(buffers[in_op.buffer]) + in_op.offset * sizeof(T);
  char* out = static_cast<char*>(buffers[out_op.buffer]) + out_op.offset * sizeof(T);
  auto finish = [&](Acc acc) {
    if constexpr (op == Opcode::kSum && std::is_floating_point_v<C>) return static_cast<C>(acc * scale);
    else return static_cast<C>(acc);
  };
  if (plan.kept_count == 0) return;
  if (plan.reduced_count == 0) {  // folding nothing: every output is the fold's start
    for (int64_t k = 0; k < plan.kept_count; ++k) {
      store<T>(out + offsetOf(plan.kept, k, true) * static_cast<int64_t>(sizeof(T)), finish(F::init()));
    }
    return;
  }
  // Rows when the reduced run is the innermost in memory, unless it is too short to
  // fill a vector (pooling windows of 2 or 3): then columns of outputs fold faster.
  const bool rows = plan.reduced.empty() || plan.kept.empty() ||
                    (std::abs(plan.reduced.back().in_stride) <= std::abs(plan.kept.back().in_stride) &&
                     plan.reduced.back().size >= 8);
  if (rows) {
    // Each output folds its reduced elements; the innermost reduced run is read
    // with eight accumulators (independent chains the compiler can vectorise).
    const Dim inner = plan.reduced.empty() ? Dim{1, 0, 0} : plan.reduced.back();
    std::vector<Dim> outer_reduced(plan.reduced.begin(), plan.reduced.empty() ? plan.reduced.end() : plan.reduced.end() - 1);
    const int64_t outer_count = plan.reduced.empty() ? 1 : plan.reduced_count / inner.size;
    // Fewer outputs than cores, each folding much: an output's runs (or a long run's
    // chunks) are split into parts, whose folds are merged in order. Several parts per
    // core: a core woken late still finds some left, where one part each would leave
    // the caller to fold both while the other wakes (2M floats: 0.25 -> 0.13 ms here).
    const auto cores = static_cast<int64_t>(rt::sim::parallelism());
    const int64_t parts = plan.kept_count < cores && plan.reduced_count >= 2 * kSerialElements
                              ? std::min(kPartsPerCore * cores, plan.reduced_count / kPartElements)
                              : 1;
    const int64_t chunks_per_run = outer_count >= parts ? 1 : (parts + outer_count - 1) / outer_count;
    const int64_t chunk = (inner.size + chunks_per_run - 1) / chunks_per_run;
    const int64_t pieces = outer_count * chunks_per_run;  // (run, chunk of it), run-major
    // The fold of output k's pieces [first, last).
    auto foldPieces = [&](int64_t k, int64_t first, int64_t last) {
      const char* base = in + offsetOf(plan.kept, k, false) * static_cast<int64_t>(sizeof(T));
      const int64_t stride = inner.in_stride * static_cast<int64_t>(sizeof(T));
      Acc lanes[8];
      std::fill(std::begin(lanes), std::end(lanes), F::init());
      for (int64_t piece = first; piece < last; ++piece) {
        const int64_t start = piece % chunks_per_run * chunk, count = std::min(chunk, inner.size - start);
        if (count <= 0) continue;
        const char* run = base + offsetOf(outer_reduced, piece / chunks_per_run, false) * static_cast<int64_t>(sizeof(T)) +
                          start * stride;
        int64_t i = 0;
        if constexpr (kVectorFold) {
          if (stride == sizeof(T)) {
            foldContiguous(reinterpret_cast<const T*>(run), count, [&](const auto* values, int64_t n) {
              if constexpr (op == Opcode::kSum) {
                lanes[0] += runSum(values, n);
              } else {  // vector max/min over the run, NaNs flagged alongside
                bool nan = false;
                const float extreme = runExtreme<op == Opcode::kAmax>(values, n, &nan);
                lanes[0] = F::step(lanes[0], nan ? std::numeric_limits<float>::quiet_NaN() : extreme);
              }
            });
            continue;
          }
        }
        if (stride == sizeof(T)) {
          const T* values = reinterpret_cast<const T*>(run);
          for (; i + 8 <= count; i += 8) {
            for (int l = 0; l < 8; ++l) lanes[l] = F::step(lanes[l], widen(values[i + l]));
          }
        }
        for (; i < count; ++i) lanes[0] = F::step(lanes[0], load<T>(run + i * stride));
      }
      Acc acc = lanes[0];
      for (int l = 1; l < 8; ++l) acc = F::merge(acc, lanes[l]);
      return acc;
    };
    auto storeOutput = [&](int64_t k, Acc acc) {
      store<T>(out + offsetOf(plan.kept, k, true) * static_cast<int64_t>(sizeof(T)), finish(acc));
    };
    if (parts == 1) {
      rt::sim::parallelFor(static_cast<size_t>(plan.kept_count),
                           static_cast<size_t>(std::max<int64_t>(1, kSerialElements / std::max<int64_t>(1, plan.reduced_count))),
                           [&](size_t begin, size_t end) {
                             for (size_t k = begin; k < end; ++k) {
                               storeOutput(static_cast<int64_t>(k), foldPieces(static_cast<int64_t>(k), 0, pieces));
                             }
                           });
      return;
    }
    struct Partial {
      Acc fold;  // in a struct: a std::vector<bool>'s elements share words across threads
    };
    std::vector<Partial> partials(static_cast<size_t>(plan.kept_count * parts));
    rt::sim::parallelFor(partials.size(), 1, [&](size_t begin, size_t end) {
      for (size_t item = begin; item < end; ++item) {
        const auto k = static_cast<int64_t>(item) / parts, part = static_cast<int64_t>(item) % parts;
        partials[item].fold = foldPieces(k, part * pieces / parts, (part + 1) * pieces / parts);
      }
    });
    for (int64_t k = 0; k < plan.kept_count; ++k) {
      Acc acc = partials[static_cast<size_t>(k * parts)].fold;
      for (int64_t part = 1; part < parts; ++part) acc = F::merge(acc, partials[static_cast<size_t>(k * parts + part)].fold);
      storeOutput(k, acc);
    }
    return;
  }
  // Columns: the innermost kept dimension is folded as a vector.
  const Dim inner = plan.kept.back();
  std::vector<Dim> outer_kept(plan.kept.begin(), plan.kept.end() - 1);
  const int64_t outer_count = plan.kept_count / inner.size;
  // Each output element folds reduced_count rows: size the chunks by that work.
  const auto column_grain =
      static_cast<size_t>(std::max<int64_t>(64, kSerialElements / std::max<int64_t>(1, plan.reduced_count)));
  rt::sim::parallelFor(static_cast<size_t>(outer_count * inner.size), column_grain, [&](size_t begin, size_t end) {
    std::vector<Acc> acc;
    std::vector<float> widened;
    for (size_t flat = begin; flat < end;) {
      const int64_t o = static_cast<int64_t>(flat) / inner.size;
      const int64_t first = static_cast<int64_t>(flat) % inner.size;
      const int64_t count = std::min<int64_t>(inner.size - first, static_cast<int64_t>(end - flat));
      acc.assign(static_cast<size_t>(count), F::init());
      const int64_t base = offsetOf(outer_kept, o, false) + first * inner.in_stride;
      auto rowAt = [&](int64_t r) {
        return in + (base + offsetOf(plan.reduced, r, false)) * static_cast<int64_t>(sizeof(T));
      };
      const int64_t stride = inner.in_stride * static_cast<int64_t>(sizeof(T));
      bool folded = false;
      if constexpr (kFloatSum) {
        if (stride == sizeof(T)) {
          cascadeColumnSums<T>(acc.data(), count, plan.reduced_count,
                               [&](int64_t r) { return reinterpret_cast<const T*>(rowAt(r)); });
          folded = true;
        }
      }
      if constexpr (kVectorFold && op != Opcode::kSum && (std::is_same_v<T, float> || kVectorConverts<T>)) {
        if (stride == sizeof(T)) {
          foldExtremeRows<op == Opcode::kAmax, T>(acc.data(), count, plan.reduced_count,
                                                 [&](int64_t r) { return reinterpret_cast<const T*>(rowAt(r)); });
          folded = true;
        }
      }
      for (int64_t r = 0; !folded && r < plan.reduced_count; ++r) {
        const char* row = rowAt(r);
        if (stride == sizeof(T)) {
          const T* values = reinterpret_cast<const T*>(row);
          if constexpr (kIsHalfFloat<T>) {  // widened a vector at a time where the target can
            widened.resize(static_cast<size_t>(count));
            widenToFloat(widened.data(), values, count);
            for (int64_t i = 0; i < count; ++i) acc[i] = F::step(acc[i], widened[i]);
          } else {
            for (int64_t i = 0; i < count; ++i) acc[i] = F::step(acc[i], widen(values[i]));
          }
        } else {
          for (int64_t i = 0; i < count; ++i) acc[i] = F::step(acc[i], load<T>(row + i * stride));
        }
      }
      const int64_t out_base = offsetOf(outer_kept, o, true) + first * inner.out_stride;
      for (int64_t i = 0; i < count; ++i) {
        store<T>(out + (out_base + i * inner.out_stride) * static_cast<int64_t>(sizeof(T)), finish(acc[i]));
      }
      flat += static_cast<size_t>(count);
    }
  });
}

// argmax/argmin: the row-major position, among the reduced elements, of the first
// extreme value (a NaN counts as the extreme, as in PyTorch).
template <Opcode op, typename T>
void reduceIndex(const isa::Operand& out_op, const isa::Operand& in_op, std::span<void* const> buffers) {
  using C = ComputeType<T>;
  const Plan plan = makePlan(out_op, in_op);
  const char* in = static_cast<const char*>(buffers[in_op.buffer]) + in_op.offset * sizeof(T);
  char* out = static_cast<char*>(buffers[out_op.buffer]) + out_op.offset * sizeof(int64_t);
  if (plan.kept_count == 0 || plan.reduced_count == 0) return;  // the glue rejects empty argmax
  rt::sim::parallelFor(static_cast<size_t>(plan.kept_count), 64, [&](size_t begin, size_t end) {
    for (size_t k = begin; k < end; ++k) {
      const char* base = in + offsetOf(plan.kept, static_cast<int64_t>(k), false) * static_cast<int64_t>(sizeof(T));
      C best{};
      int64_t best_index = 0;
      // The reduced elements in row-major order, odometer-style (no division per element).
      std::array<int64_t, isa::kMaxRank> position{};
      int64_t offset = 0;
      const int dims = static_cast<int>(plan.reduced.size());
      for (int64_t r = 0; r < plan.reduced_count; ++r) {
        const C x = load<T>(base + offset * static_cast<int64_t>(sizeof(T)));
        for (int d = dims - 1; d >= 0; --d) {
          offset += plan.reduced[d].in_stride;
          if (++position[d] < plan.reduced[d].size) break;
          offset -= position[d] * plan.reduced[d].in_stride;
          position[d] = 0;
        }
        if (r == 0) {
          best = x;
          continue;
        }
        if (isNaN(best)) break;
        const bool better = isNaN(x) || (op == Opcode::kArgmax ? x > best : x < best);
        if (better) {
          best = x;
          best_index = r;
        }
      }
      store<int64_t>(out + offsetOf(plan.kept, static_cast<int64_t>(k), true) * static_cast<int64_t>(sizeof(int64_t)),
                     best_index);
    }
  });
}

template <Opcode op>
constexpr bool isIndexReduction() { return op == Opcode::kArgmax || op == Opcode::kArgmin; }

}  // namespace

void reduceKernel(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const isa::Operand& out = instruction.operands[0];
  const isa::Operand& in = instruction.operands[1];
  const double scale = isa::info(instruction.opcode).immediateCount() > 0 ? instruction.immediates[0] : 1.0;
  dispatchDType(in.dtype, [&]<typename T>() {
    dispatchOpcode<isa::Group::Reduce>(instruction.opcode, [&]<Opcode op>() {
      if constexpr (isa::acceptedDTypes(op).contains(dtypeOf<T>())) {
        if constexpr (isIndexReduction<op>()) reduceIndex<op, T>(out, in, buffers);
        else reduceValues<op, T>(out, in, buffers, scale);
      }
    });
  });
}

}  // namespace pto::rt::sim::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pto::rt::sim::kernels {

HWY_EXPORT(reduceKernel);

void executeReduce(const isa::Instruction& instruction, std::span<void* const> buffers) {
  HWY_DYNAMIC_DISPATCH(reduceKernel)(instruction, buffers);
}

}  // namespace pto::rt::sim::kernels
#endif  // HWY_ONCE
