// The structured kernels (csrc/runtime/sim/kernels): the reductions, tmatmul, the fused row
// ops, tgather, tscatter/tscatteradd, twrapindex, tnonzero, tiota, the sorts and
// the scans, each against a naive reference loop written here that computes in
// double (integer sums and products: wrapping in 64 bits; the scans: in PyTorch's
// accumulator types). Reductions
// over the inner, outer, several and all dimensions of strided inputs, on both
// strategies (rows and columns) and their parallel splits; matmul over
// transposed, padded, batched, broadcast and packed operands with alpha and beta;
// softmax and its gradients over strided rows, rows of -inf, NaN and large
// values; gather and scatter along each axis (duplicate indices: the last write
// wins, sums in index order) and their out-of-bounds failures, from execute() and
// from a program launched on a runtime stream; index wrapping; nonzero's
// coordinates over strided inputs; tiota's ranges; targsort against
// std::stable_sort and ttopk's picks, with NaNs and ties, on short lines and on
// radix-sorted long ones; the scans by whole lines, by blocks of lines and in place.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "isa/program.h"
#include "isa/schedule.h"
#include "runtime/sim/kernels/element_types.h"
#include "runtime/sim/kernels/execute.h"
#include "runtime/sim/kernels/half.h"
#include "kernels_test_support.h"
#include "runtime/program.h"
#include "runtime/pto_runtime.h"
#include "runtime_test_support.h"

namespace {

using namespace pto;
namespace kernels = rt::sim::kernels;  // the sim driver's instruction kernels
using isa::DType;
using isa::Instruction;
using isa::Opcode;
using isa::Operand;
using kernels::BFloat16;
using kernels::ComputeType;
using kernels::Half;
using namespace pto_test;

using Index = std::array<int64_t, isa::kMaxRank>;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr float kNaNF = std::numeric_limits<float>::quiet_NaN();

// ---------------------------------------------------------------------------
// Memory, operands and comparisons.
// ---------------------------------------------------------------------------

// A buffer for `elements` elements of the operand's dtype, every byte the sentinel 0xa5.
Bytes bufferFor(const Operand& operand, int64_t elements) {
  return Bytes(static_cast<size_t>(std::max<int64_t>(elements, 1)) * isa::dtypeSize(operand.dtype), 0xa5);
}

char* elementAt(Bytes& memory, const Operand& operand, const Index& index) {
  return reinterpret_cast<char*>(memory.data()) +
         elementOf(operand, index) * static_cast<int64_t>(isa::dtypeSize(operand.dtype));
}

// Writes a value from next() into every element slot of `memory` (of T).
template <typename T, typename Next>
void fillSlots(Bytes& memory, Next&& next) {
  for (size_t at = 0; at + sizeof(T) <= memory.size(); at += sizeof(T)) {
    writeValue(reinterpret_cast<char*>(memory.data() + at), static_cast<T>(next()));
  }
}

// An operand of `shape` with the given strides whose lowest element lies
// `extra` elements into its buffer; *elements: how many the buffer needs.
Operand view(int32_t buffer, DType dtype, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
             int64_t extra, int64_t* elements) {
  Operand operand;
  operand.buffer = buffer;
  operand.dtype = dtype;
  operand.rank = static_cast<int32_t>(shape.size());
  std::copy(shape.begin(), shape.end(), operand.shape.begin());
  std::copy(strides.begin(), strides.end(), operand.strides.begin());
  int64_t low = 0, high = 0;
  for (int d = 0; d < operand.rank; ++d) {
    const int64_t extent = std::max<int64_t>(shape[d] - 1, 0) * strides[d];
    (extent < 0 ? low : high) += extent;
  }
  operand.offset = -low + extra;
  *elements = operand.offset + high + 1;
  return operand;
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::ostringstream text;
  text << "[";
  for (size_t d = 0; d < shape.size(); ++d) text << (d ? "," : "") << shape[d];
  text << "]";
  return text.str();
}

// Runs `instruction` as an eager op does: its one-instruction program loaded onto
// the current device and launched on `stream`. Loading verifies it (a refusal is
// returned with the verifier's message). The handle is released at once, which
// the launch already queued survives.
ptoError launchInstruction(ptoStream stream, const Instruction& instruction, const std::vector<void*>& buffers,
                           const std::vector<uint64_t>& bytes) {
  ptoProgram program = nullptr;
  const ptoError loaded = rt::loadProgram(
      std::make_shared<const isa::ScheduledProgram>(isa::scheduleInOrder(isa::programOf(instruction))), &program);
  if (loaded != PTO_SUCCESS) return loaded;
  const ptoError launched = ptoProgramLaunch(program, stream, buffers.data(), bytes.data(), buffers.size(), nullptr);
  EXPECT_PTO_OK(ptoProgramRelease(program));
  return launched;
}

// Whether every byte of `after` outside the operand's elements is still `before`'s.
::testing::AssertionResult gapsUntouched(const Bytes& before, const Bytes& after, const Operand& operand) {
  const size_t size = isa::dtypeSize(operand.dtype);
  std::vector<bool> is_element(before.size() / size, false);
  forEachIndex(operand, [&](const Index& index) { is_element[static_cast<size_t>(elementOf(operand, index))] = true; });
  for (size_t e = 0; e < is_element.size(); ++e) {
    if (!is_element[e] && std::memcmp(before.data() + e * size, after.data() + e * size, size) != 0) {
      return ::testing::AssertionFailure() << "the kernel wrote buffer element " << e << ", outside its output";
    }
  }
  return ::testing::AssertionSuccess();
}

// The relative error of rounding an exact result to T once.
template <typename T>
constexpr double kRoundoff = std::is_same_v<T, Half> ? 0x1p-11 : std::is_same_v<T, BFloat16> ? 0x1p-8
                             : std::is_same_v<T, float> ? 0x1p-24 : 0x1p-53;

// The relative error of one operation in what the kernels compute T in (float
// for float16/bfloat16/float32, double for float64); reductions use double for all.
template <typename T>
constexpr double kComputeRoundoff = std::is_same_v<T, double> ? 0x1p-53 : 0x1p-24;

// The smallest magnitude T holds: the absolute error of an underflow.
template <typename T>
constexpr double kTiny = std::is_same_v<T, Half> ? 0x1p-24 : std::is_same_v<T, BFloat16> ? 0x1p-133
                         : std::is_same_v<T, float> ? 0x1p-149 : 0x1p-1074;

// Whether `got` is `want` within `tolerance`: a NaN matches only a NaN, an infinity only itself.
bool near(double got, double want, double tolerance) {
  if (got == want) return true;
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  return std::abs(got - want) <= tolerance;
}

template <typename T>
double toDouble(const char* p) {
  return static_cast<double>(refLoad<T>(p));
}

template <typename T>
T uniformValue(std::mt19937_64& rng, double low, double high) {
  return refCast<T>(std::uniform_real_distribution<double>(low, high)(rng));
}

// ---------------------------------------------------------------------------
// Reductions.
// ---------------------------------------------------------------------------

constexpr Opcode kReduceOpcodes[] = {Opcode::kSum,    Opcode::kProd,   Opcode::kAmax, Opcode::kAmin,
                                     Opcode::kArgmax, Opcode::kArgmin, Opcode::kAny,  Opcode::kAll};

bool isIndexReduction(Opcode op) { return op == Opcode::kArgmax || op == Opcode::kArgmin; }

struct ReduceCase {
  std::vector<int64_t> shape;
  std::vector<int> reduced;        // the dimensions folded
  Layout input = Layout::kContiguous;
  bool output_transposed = false;  // the kept dimensions column-major in the output

  bool isReduced(int d) const { return std::find(reduced.begin(), reduced.end(), d) != reduced.end(); }
  // A reduced extent of 0 with outputs to write: each is the fold's start.
  bool foldsNothing() const {
    bool empty_fold = false;
    for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
      if (shape[d] == 0 && !isReduced(d)) return false;
      if (shape[d] == 0) empty_fold = true;
    }
    return empty_fold;
  }
  std::string text() const {
    std::ostringstream out;
    out << shapeText(shape) << " reduce {";
    for (size_t i = 0; i < reduced.size(); ++i) out << (i ? "," : "") << reduced[i];
    out << "} input " << layoutName(input) << (output_transposed ? ", output column-major" : "");
    return out.str();
  }
};

// A reduction's output: at the input's shape, stride 0 along the reduced
// dimensions, the kept ones packed (row- or column-major) between one sentinel
// element before and one after.
Operand reductionOutput(DType dtype, const ReduceCase& c, int64_t* elements) {
  Operand out;
  out.buffer = 0;
  out.dtype = dtype;
  out.rank = static_cast<int32_t>(c.shape.size());
  std::copy(c.shape.begin(), c.shape.end(), out.shape.begin());
  std::vector<int> kept;
  for (int d = 0; d < out.rank; ++d) {
    if (!c.isReduced(d)) kept.push_back(d);
  }
  if (!c.output_transposed) std::reverse(kept.begin(), kept.end());  // innermost first
  int64_t stride = 1;
  for (int d : kept) {
    out.strides[d] = stride;
    stride *= c.shape[d];
  }
  out.offset = 1;
  *elements = stride + 2;
  return out;
}

// Reduction inputs: floats uniform in [-2, 2), with `specials` also NaNs,
// infinities, signed zeros and repeats (poolValue); integers small or any bit
// pattern; bools either way, with `specials` mostly true.
template <typename T>
T reduceInput(std::mt19937_64& rng, bool specials) {
  if constexpr (std::is_same_v<T, bool>) {
    return specials ? rng() % 16 != 0 : rng() % 2 != 0;
  } else if constexpr (std::is_integral_v<T>) {
    return rng() % 2 ? static_cast<T>(static_cast<int64_t>(rng() % 11) - 5) : static_cast<T>(rng());
  } else {
    if (specials && rng() % 8 == 0) return poolValue<T>(rng);
    return uniformValue<T>(rng, -2.0, 2.0);
  }
}

// Checks one output of `op` against the fold of `values` (its reduced elements
// in row-major order); "" when right, else what was expected.
template <typename T>
std::string checkReduction(Opcode op, const std::vector<ComputeType<T>>& values, const char* got, double scale) {
  using C = ComputeType<T>;
  std::ostringstream why;
  why.precision(17);
  const auto is_nan = [](C x) { return kIsFloat<T> && x != x; };
  const bool has_nan = std::any_of(values.begin(), values.end(), is_nan);
  if (isIndexReduction(op)) {
    // The first NaN, else the first occurrence of the extreme.
    auto at = std::find_if(values.begin(), values.end(), is_nan);
    if (!has_nan) at = op == Opcode::kArgmax ? std::max_element(values.begin(), values.end())
                                             : std::min_element(values.begin(), values.end());
    const int64_t want = at - values.begin();
    int64_t index = 0;
    std::memcpy(&index, got, sizeof index);
    if (index != want) why << "index " << want << ", got " << index;
  } else if (op == Opcode::kAmax || op == Opcode::kAmin) {
    C want = op == Opcode::kAmax ? *std::max_element(values.begin(), values.end())
                                 : *std::min_element(values.begin(), values.end());
    const C value = refLoad<T>(got);
    const bool right = has_nan ? is_nan(value) : value == want;  // 0 == -0: the sign of a zero is free
    if (!right) {
      if (has_nan) why << "NaN";
      else why << static_cast<double>(want);
      why << ", got " << elementText<T>(got);
    }
  } else if (op == Opcode::kAny || op == Opcode::kAll) {
    const bool want = op == Opcode::kAny ? std::any_of(values.begin(), values.end(), [](C x) { return x; })
                                         : std::all_of(values.begin(), values.end(), [](C x) { return x; });
    if (refLoad<T>(got) != want) why << want << ", got " << elementText<T>(got);
  } else if constexpr (std::is_integral_v<C>) {
    // Integers fold in 64 bits, wrapping, then wrap again into T.
    uint64_t folded = op == Opcode::kSum ? 0 : 1;
    for (C x : values) {
      const auto wide = static_cast<uint64_t>(static_cast<int64_t>(x));
      folded = op == Opcode::kSum ? folded + wide : folded * wide;
    }
    const T want = static_cast<T>(static_cast<int64_t>(folded));
    if (std::memcmp(&want, got, sizeof want) != 0) {
      why << elementText<T>(reinterpret_cast<const char*>(&want)) << ", got " << elementText<T>(got);
    }
  } else {
    // Products and float16/bfloat16 sums fold in double: only the order of the
    // operations and the final rounding differ. float32 sums add in float32 (cascaded,
    // as PyTorch's): each addition may round, so n float32 roundings of the magnitude.
    const double unit = op == Opcode::kSum && std::is_same_v<T, float> ? 0x1p-24 : 0x1p-52;
    double want = op == Opcode::kSum ? 0.0 : 1.0, magnitude = op == Opcode::kSum ? 0.0 : 1.0;
    for (C x : values) {
      want = op == Opcode::kSum ? want + x : want * x;
      magnitude = op == Opcode::kSum ? magnitude + std::abs(x) : magnitude * std::abs(x);
    }
    if (op == Opcode::kSum) {
      want *= scale;
      magnitude *= std::abs(scale);
    }
    const double n = static_cast<double>(values.size()) + 2;
    const double tolerance = 2 * kRoundoff<T> * std::abs(want) + n * unit * magnitude + kTiny<T>;
    if (!near(toDouble<T>(got), want, tolerance)) why << want << " (within " << tolerance << "), got " << elementText<T>(got);
  }
  return why.str();
}

// Runs `op` on the case's input (random, from `seed`) and checks every output
// element against the reference and every other byte of the output's buffer.
template <typename T>
void runReduction(Opcode op, const ReduceCase& c, uint64_t seed, bool specials, double scale = 1.0) {
  using C = ComputeType<T>;
  SCOPED_TRACE(std::string(isa::info(op).name) + " " + typeName<T>() + " " + c.text() +
               (specials ? " with specials" : "") + (scale != 1.0 ? " scale=" + std::to_string(scale) : ""));
  int64_t in_elements = 0, out_elements = 0;
  const Operand in = makeOperand(1, kernels::dtypeOf<T>(), c.shape, c.input, &in_elements);
  const Operand out = reductionOutput(isIndexReduction(op) ? DType::kInt64 : kernels::dtypeOf<T>(), c, &out_elements);
  std::vector<Bytes> memory = {bufferFor(out, out_elements), bufferFor(in, in_elements)};
  std::mt19937_64 rng(seed);
  fillSlots<T>(memory[1], [&] { return reduceInput<T>(rng, specials); });

  // Each output element's reduced elements, in row-major order: the input's
  // indices map onto the output's elements through its stride-0 dimensions.
  std::vector<std::vector<C>> folds(static_cast<size_t>(out_elements));
  forEachIndex(in, [&](const Index& index) {
    folds[static_cast<size_t>(elementOf(out, index))].push_back(refLoad<T>(elementAt(memory[1], in, index)));
  });

  Instruction instruction;
  instruction.opcode = op;
  instruction.operands = {out, in};
  if (op == Opcode::kSum) instruction.immediates[0] = scale;
  const Bytes before = memory[0];
  verifyAndRun(instruction, memory);
  if (::testing::Test::HasFatalFailure()) return;

  Operand kept = out;  // one index per output element, even where a reduced extent is 0
  for (int d : c.reduced) kept.shape[d] = 1;
  std::vector<bool> is_output(folds.size(), false);
  forEachIndex(kept, [&](const Index& index) { is_output[static_cast<size_t>(elementOf(out, index))] = true; });
  const size_t size = isa::dtypeSize(out.dtype);
  for (size_t e = 0; e < folds.size(); ++e) {
    const char* got = reinterpret_cast<const char*>(memory[0].data() + e * size);
    if (!is_output[e]) {
      if (std::memcmp(got, before.data() + e * size, size) != 0) {
        ADD_FAILURE() << "wrote buffer element " << e << ", which is no output\n" << isa::print(instruction);
        return;
      }
      continue;
    }
    const std::string wrong = checkReduction<T>(op, folds[e], got, scale);
    if (!wrong.empty()) {
      ADD_FAILURE() << "output element " << e << " (folding " << folds[e].size() << " elements): expected " << wrong
                    << "\n" << isa::print(instruction);
      return;
    }
  }
}

using L = Layout;

// Small cases: both strategies (the innermost input dimension reduced or kept),
// strided, transposed, reversed and broadcast inputs, column-major outputs,
// size-1 and rank-0 shapes, nothing reduced, everything reduced, and the empty.
const std::vector<ReduceCase>& reduceCases() {
  static const std::vector<ReduceCase> cases = {
      {{3, 5, 7}, {2}},                       // rows
      {{3, 5, 7}, {0}},                       // columns
      {{3, 5, 7}, {1}},                       // columns, under an outer kept dimension
      {{3, 5, 7}, {0, 2}},
      {{3, 5, 7}, {0, 1, 2}},                 // everything: one output
      {{3, 5, 7}, {2}, L::kTransposed},       // the reduced dimension strided: columns
      {{3, 5, 7}, {0}, L::kTransposed},       // the reduced dimension contiguous: rows
      {{3, 5, 7}, {1}, L::kReversed},
      {{4, 6}, {1}, L::kReversedInner},
      {{2, 3, 4}, {0, 2}, L::kPadded},
      {{5, 9}, {0}, L::kBroadcastOuter},      // folding one element repeated
      {{5, 9}, {1}, L::kBroadcastInner},
      {{3, 1, 4}, {1}},                       // a size-1 reduced dimension folds one element
      {{3, 5, 7}, {}},                        // nothing reduced
      {{}, {}},                               // rank 0
      {{37}, {0}},                            // eight lanes and a tail
      {{2, 40}, {1}, L::kReversedInner},
      {{4, 6, 5}, {1}, L::kContiguous, true},
      {{4, 6, 5}, {0, 2}, L::kTransposed, true},
      {{2, 1, 2, 3, 1, 2, 2, 2}, {1, 3, 7}, L::kTransposed},
      {{2, 2, 2, 2, 2, 2, 2, 3}, {0, 2, 4, 6}, L::kPadded, true},
      {{3, 0, 4}, {1}},                       // an empty fold: the start value
      {{0}, {0}},                             // an empty fold into one output
      {{3, 0, 4}, {0}},                       // no outputs
      {{0, 4}, {1}, L::kTransposed},          // no outputs
  };
  return cases;
}

TEST(Reduce, EveryOpcodeDTypeAndLayout) {
  int combinations = 0;
  uint64_t seed = 1000;
  for (Opcode op : kReduceOpcodes) {
    forEachType([&]<typename T>() {
      if (!isa::acceptedDTypes(op).contains(kernels::dtypeOf<T>())) return;
      for (const ReduceCase& c : reduceCases()) {
        // amax, amin and the index reductions of an empty fold are never launched (PyTorch raises).
        const bool needs_an_element = op != Opcode::kSum && op != Opcode::kProd && op != Opcode::kAny && op != Opcode::kAll;
        if (needs_an_element && c.foldsNothing()) continue;
        for (bool specials : {false, true}) {
          runReduction<T>(op, c, seed++, specials);
          if (::testing::Test::HasFailure()) return;
        }
      }
      ++combinations;
    });
  }
  EXPECT_EQ(combinations, 2 * 9 + 4 * 10 + 2);  // sum, prod: numeric; amax ... argmin: all; any, all: bool
}

TEST(Reduce, ScaleMakesAMean) {
  for (const ReduceCase& c : {ReduceCase{{3, 5, 7}, {2}}, ReduceCase{{3, 5, 7}, {0, 1}, L::kTransposed},
                              ReduceCase{{6, 4}, {0}, L::kReversed, true}}) {
    int64_t count = 1;
    for (int d : c.reduced) count *= c.shape[d];
    const double scale = 1.0 / static_cast<double>(count);
    runReduction<float>(Opcode::kSum, c, 7, false, scale);
    runReduction<double>(Opcode::kSum, c, 8, true, scale);
    runReduction<Half>(Opcode::kSum, c, 9, false, scale);
    runReduction<BFloat16>(Opcode::kSum, c, 10, false, -2.5);
  }
}

// Large cases: past the kernels' parallel grain, so that outputs (rows) or
// output runs (columns, in chunks that start inside a row) split over the
// device's cores; and one long fold.
TEST(Reduce, LargeParallel) {
  const std::vector<ReduceCase> cases = {
      {{1000, 100}, {1}},                     // rows: 1000 outputs
      {{300000}, {0}},                        // one output folding 300000
      {{20, 10000}, {0}},                     // columns: 10000 outputs
      {{3, 50, 3000}, {1}},                   // columns under an outer kept dimension
      {{400, 300}, {0}, L::kTransposed},      // rows over a strided input
      {{300, 400}, {1}, L::kPadded, true},
  };
  uint64_t seed = 500;
  for (const ReduceCase& c : cases) {
    runReduction<float>(Opcode::kSum, c, seed++, false);
    runReduction<int64_t>(Opcode::kSum, c, seed++, false);
    runReduction<Half>(Opcode::kAmax, c, seed++, false);
    runReduction<double>(Opcode::kArgmin, c, seed++, false);
    runReduction<bool>(Opcode::kAll, c, seed++, true);
  }
  runReduction<float>(Opcode::kArgmax, {{1000, 100}, {1}}, 600, true);  // first NaNs in every row
  runReduction<int8_t>(Opcode::kProd, {{20, 10000}, {0}}, 601, false);
}

// Reduces `in` (contiguous, of `shape`) over `reduced` with `op`; the outputs, row-major.
template <typename Out, typename In>
std::vector<Out> reduce(Opcode op, const std::vector<In>& in, const std::vector<int64_t>& shape,
                        const std::vector<int>& reduced, double scale = 1.0) {
  const ReduceCase c{shape, reduced};
  int64_t in_elements = 0, out_elements = 0;
  const Operand input = makeOperand(1, kernels::dtypeOf<In>(), shape, Layout::kContiguous, &in_elements);
  const Operand output = reductionOutput(kernels::dtypeOf<Out>(), c, &out_elements);
  std::vector<Bytes> memory = {bufferFor(output, out_elements), bufferFor(input, in_elements)};
  for (size_t i = 0; i < in.size(); ++i) writeValue(reinterpret_cast<char*>(memory[1].data() + i * sizeof(In)), In(in[i]));
  Instruction instruction;
  instruction.opcode = op;
  instruction.operands = {output, input};
  if (op == Opcode::kSum) instruction.immediates[0] = scale;
  verifyAndRun(instruction, memory);
  std::vector<Out> result;  // between the sentinels
  for (int64_t e = 1; e + 1 < out_elements; ++e) {
    Out value;
    std::memcpy(&value, memory[0].data() + e * sizeof(Out), sizeof value);
    result.push_back(value);
  }
  return result;
}

TEST(Reduce, KnownValues) {
  const std::vector<float> m = {1, 2, 3, 4, 5, 6};  // [[1, 2, 3], [4, 5, 6]]
  EXPECT_EQ((reduce<float>(Opcode::kSum, m, {2, 3}, {1})), (std::vector<float>{6, 15}));
  EXPECT_EQ((reduce<float>(Opcode::kSum, m, {2, 3}, {0})), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ((reduce<float>(Opcode::kSum, m, {2, 3}, {0, 1})), (std::vector<float>{21}));
  EXPECT_EQ((reduce<float>(Opcode::kSum, m, {2, 3}, {0, 1}, 1.0 / 6)), (std::vector<float>{3.5f}));  // the mean
  EXPECT_EQ((reduce<float>(Opcode::kProd, m, {2, 3}, {1})), (std::vector<float>{6, 120}));
  EXPECT_EQ((reduce<float>(Opcode::kAmin, m, {2, 3}, {0})), (std::vector<float>{1, 2, 3}));
  // The index of an element among the reduced ones, in their row-major order.
  EXPECT_EQ((reduce<int64_t>(Opcode::kArgmax, m, {2, 3}, {0, 1})), (std::vector<int64_t>{5}));
  EXPECT_EQ((reduce<int64_t>(Opcode::kArgmax, std::vector<float>{1, 9, 9, 2, 9, 0}, {2, 3}, {0, 1})),
            (std::vector<int64_t>{1}));  // the first of equal maxima
  EXPECT_EQ((reduce<int64_t>(Opcode::kArgmin, std::vector<float>{3, 1, 1, 0, 2, 0}, {2, 3}, {1})),
            (std::vector<int64_t>{1, 0}));
  // float32 sums are cascaded: a million 0.1s come to 100000 within 2e-6 of it (one
  // float32 accumulator would drift about 1% off), over a row and over a column.
  const std::vector<float> tenths(1'000'000, 0.1f);
  EXPECT_NEAR((reduce<float>(Opcode::kSum, tenths, {1'000'000}, {0}))[0], 100000.0f, 0.2f);
  EXPECT_NEAR((reduce<float>(Opcode::kSum, tenths, {500'000, 2}, {0}))[1], 50000.0f, 0.1f);
}

TEST(Reduce, NaNPropagatesAndTheFirstNaNIsTheExtreme) {
  const std::vector<float> row = {1, kNaNF, 3, kNaNF, -kInfF};
  for (Opcode op : {Opcode::kAmax, Opcode::kAmin, Opcode::kSum, Opcode::kProd}) {
    const auto result = reduce<float>(op, row, {5}, {0});
    EXPECT_TRUE(std::isnan(result[0])) << isa::info(op).name;
  }
  EXPECT_EQ((reduce<int64_t>(Opcode::kArgmax, row, {5}, {0})), (std::vector<int64_t>{1}));
  EXPECT_EQ((reduce<int64_t>(Opcode::kArgmin, row, {5}, {0})), (std::vector<int64_t>{1}));
  // A NaN in a later lane of the eight (index 13), and columns.
  std::vector<double> wide(40, 1.0);
  wide[13] = kNaN;
  wide[29] = kNaN;
  EXPECT_TRUE(std::isnan(reduce<double>(Opcode::kAmax, wide, {40}, {0})[0]));
  EXPECT_EQ((reduce<int64_t>(Opcode::kArgmin, wide, {40}, {0})), (std::vector<int64_t>{13}));
  const auto columns = reduce<double>(Opcode::kAmin, wide, {10, 4}, {0});  // NaNs at (3, 1) and (7, 1)
  EXPECT_EQ(columns[0], 1.0);
  EXPECT_TRUE(std::isnan(columns[1]));
  EXPECT_EQ((reduce<int64_t>(Opcode::kArgmax, wide, {10, 4}, {0})), (std::vector<int64_t>{0, 3, 0, 0}));
  // float32 columns fold a row of accumulators at a time, vectors then a tail: NaNs
  // in a vector's lanes and in the tail, each first met in a later row.
  std::vector<float> grid(6 * 21, 2.0f);
  grid[4 * 21 + 3] = kNaNF;
  grid[1 * 21 + 19] = kNaNF;
  grid[5 * 21 + 7] = -kInfF;
  for (Opcode op : {Opcode::kAmax, Opcode::kAmin}) {
    const auto folded = reduce<float>(op, grid, {6, 21}, {0});
    for (int c = 0; c < 21; ++c) {
      if (c == 3 || c == 19) { EXPECT_TRUE(std::isnan(folded[c])) << isa::info(op).name << " column " << c; }
      else EXPECT_EQ(folded[c], op == Opcode::kAmin && c == 7 ? -kInfF : 2.0f) << isa::info(op).name << " column " << c;
    }
  }
  // Infinities are ordinary extremes: a row of -inf has the maximum -inf (and +inf the minimum +inf).
  EXPECT_EQ((reduce<float>(Opcode::kAmax, std::vector<float>{-kInfF, -kInfF, -kInfF}, {3}, {0})),
            (std::vector<float>{-kInfF}));
  EXPECT_EQ((reduce<float>(Opcode::kAmin, std::vector<float>{kInfF, kInfF}, {1, 2}, {1})), (std::vector<float>{kInfF}));
  EXPECT_EQ((reduce<double>(Opcode::kAmax, std::vector<double>(20, -kInf), {20}, {0})), (std::vector<double>{-kInf}));
  EXPECT_EQ((reduce<double>(Opcode::kAmax, std::vector<double>(20, -kInf), {4, 5}, {0})),
            (std::vector<double>(5, -kInf)));  // columns
  EXPECT_EQ((reduce<int64_t>(Opcode::kArgmax, std::vector<float>{-kInfF, -kInfF}, {2}, {0})), (std::vector<int64_t>{0}));
}

TEST(Reduce, EmptyFoldsGiveTheStartValue) {
  const std::vector<float> none;
  EXPECT_EQ((reduce<float>(Opcode::kSum, none, {3, 0}, {1})), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ((reduce<float>(Opcode::kProd, none, {3, 0}, {1})), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ((reduce<int32_t>(Opcode::kSum, std::vector<int32_t>{}, {0, 2}, {0})), (std::vector<int32_t>{0, 0}));
  EXPECT_EQ((reduce<int16_t>(Opcode::kProd, std::vector<int16_t>{}, {0}, {0})), (std::vector<int16_t>{1}));
  EXPECT_EQ((reduce<bool>(Opcode::kAny, std::vector<bool>{}, {2, 0}, {1})), (std::vector<bool>{false, false}));
  EXPECT_EQ((reduce<bool>(Opcode::kAll, std::vector<bool>{}, {2, 0}, {1})), (std::vector<bool>{true, true}));
  // No outputs at all: nothing is written (reduce() keeps only the outputs, so none come back).
  EXPECT_TRUE((reduce<float>(Opcode::kSum, none, {0, 3}, {1})).empty());
}

TEST(Reduce, IntegerSumsWrapInInt64) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ((reduce<int64_t>(Opcode::kSum, std::vector<int64_t>{kMax, 1}, {2}, {0})), (std::vector<int64_t>{kMin}));
  EXPECT_EQ((reduce<int64_t>(Opcode::kSum, std::vector<int64_t>(9, kMax), {9}, {0})), (std::vector<int64_t>{kMax - 8}));
  EXPECT_EQ((reduce<int64_t>(Opcode::kProd, std::vector<int64_t>{int64_t{1} << 32, int64_t{1} << 32, 3}, {3}, {0})),
            (std::vector<int64_t>{0}));
  // Narrow types: the int64 fold wraps into the type (1000 * 100 = 100000 = -96 mod 256 as int8).
  EXPECT_EQ((reduce<int8_t>(Opcode::kSum, std::vector<int8_t>(1000, 100), {1000}, {0})), (std::vector<int8_t>{-96}));
  EXPECT_EQ((reduce<int8_t>(Opcode::kSum, std::vector<int8_t>(1000, 100), {10, 100}, {0})),
            (std::vector<int8_t>(100, static_cast<int8_t>(1000))));  // columns: 10 * 100
  EXPECT_EQ((reduce<uint8_t>(Opcode::kSum, std::vector<uint8_t>{200, 100}, {2}, {0})), (std::vector<uint8_t>{44}));
  EXPECT_EQ((reduce<uint8_t>(Opcode::kProd, std::vector<uint8_t>{16, 16, 3}, {3}, {0})), (std::vector<uint8_t>{0}));
  EXPECT_EQ((reduce<int32_t>(Opcode::kSum, std::vector<int32_t>{2147483647, 1}, {2}, {0})),
            (std::vector<int32_t>{-2147483647 - 1}));
  EXPECT_EQ((reduce<int16_t>(Opcode::kSum, std::vector<int16_t>{-32768, -1}, {2}, {0})), (std::vector<int16_t>{32767}));
}

TEST(Reduce, HalfAndBFloat16AccumulateWide) {
  // 4096 ones: float16 additions stop at 2048 (2048 + 1 rounds back), a wide sum does not.
  const auto half_sum = reduce<Half>(Opcode::kSum, std::vector<Half>(4096, kernels::toHalf(1.0f)), {4096}, {0});
  EXPECT_EQ(kernels::toFloat(half_sum[0]), 4096.0f);
  const auto half_columns = reduce<Half>(Opcode::kSum, std::vector<Half>(4096, kernels::toHalf(1.0f)), {2048, 2}, {0});
  EXPECT_EQ(kernels::toFloat(half_columns[1]), 2048.0f);
  // bfloat16 additions stop at 256.
  const auto bf16_sum = reduce<BFloat16>(Opcode::kSum, std::vector<BFloat16>(1000, kernels::toBFloat16(1.0f)), {1000}, {0});
  EXPECT_EQ(kernels::toFloat(bf16_sum[0]), 1000.0f);
  // The mean of 4096 copies of float16's 0.1 is that value, exactly.
  const Half tenth = kernels::toHalf(0.1f);
  const auto mean = reduce<Half>(Opcode::kSum, std::vector<Half>(4096, tenth), {64, 64}, {0, 1}, 1.0 / 4096);
  EXPECT_EQ(mean[0].bits, tenth.bits);
  // Products too: 0.5^30 is below float16's range only at the end.
  const auto product = reduce<Half>(Opcode::kProd, std::vector<Half>{kernels::toHalf(256.0f), kernels::toHalf(256.0f),
                                                                    kernels::toHalf(1.0f / 1024)}, {3}, {0});
  EXPECT_EQ(kernels::toFloat(product[0]), 64.0f);  // 65536 overflows float16 on the way
}

// ---------------------------------------------------------------------------
// Matmul.
// ---------------------------------------------------------------------------

// How a case lays out a matrix (the last two dimensions of an operand).
enum class Mat {
  kRowMajor,
  kTransposed,    // column-major: BLAS reads it transposed
  kPadded,        // row-major with a leading dimension past the row, at an offset
  kStrided,       // rows reversed, every other column: packed before BLAS
  kRowBroadcast,  // every row the same (stride 0 between rows): packed
};

const char* matName(Mat kind) {
  switch (kind) {
    case Mat::kRowMajor: return "row-major";
    case Mat::kTransposed: return "transposed";
    case Mat::kPadded: return "padded";
    case Mat::kStrided: return "strided";
    case Mat::kRowBroadcast: return "row-broadcast";
  }
  return "?";
}

// A [batch..., rows, cols] operand whose matrices are laid out as `kind`, one
// after another, but along the `broadcast` batch dimensions (stride 0).
Operand matrixOperand(int32_t buffer, DType dtype, const std::vector<int64_t>& batch, int64_t rows, int64_t cols,
                      Mat kind, const std::vector<int>& broadcast, int64_t* elements) {
  int64_t row_stride = std::max<int64_t>(cols, 1), col_stride = 1, extra = 0;
  switch (kind) {
    case Mat::kRowMajor: break;
    case Mat::kTransposed: row_stride = 1, col_stride = std::max<int64_t>(rows, 1); break;
    case Mat::kPadded: row_stride = cols + 3, extra = 2; break;
    case Mat::kStrided: row_stride = -(2 * cols + 1), col_stride = 2; break;
    case Mat::kRowBroadcast: row_stride = 0; break;
  }
  const int64_t matrix = std::abs(row_stride) * std::max<int64_t>(rows - 1, 0) + col_stride * std::max<int64_t>(cols - 1, 0) + 1;
  std::vector<int64_t> shape = batch, strides(batch.size() + 2);
  shape.push_back(rows);
  shape.push_back(cols);
  strides[batch.size()] = row_stride;
  strides[batch.size() + 1] = col_stride;
  int64_t stride = matrix;
  for (int d = static_cast<int>(batch.size()) - 1; d >= 0; --d) {
    const bool repeats = std::find(broadcast.begin(), broadcast.end(), d) != broadcast.end();
    strides[d] = repeats ? 0 : stride;
    if (!repeats) stride *= batch[d];
  }
  return view(buffer, dtype, shape, strides, extra, elements);
}

struct MatmulCase {
  std::vector<int64_t> batch;
  int64_t m, n, k;
  Mat out, a, b;
  std::vector<int> a_broadcast = {}, b_broadcast = {};  // batch dimensions a or b repeats

  std::string text() const {
    std::ostringstream text;
    text << shapeText(batch) << " m=" << m << " n=" << n << " k=" << k << " out " << matName(out) << ", a "
         << matName(a) << (a_broadcast.empty() ? "" : " (batch-broadcast)") << ", b " << matName(b)
         << (b_broadcast.empty() ? "" : " (batch-broadcast)");
    return text.str();
  }
};

// out = alpha * a @ b + beta * out on random a, b (and out, or NaNs), against
// a double reference; the tolerance follows the products' magnitudes and the
// precision the GEMM computes in (float32 for float16/bfloat16).
template <typename T>
void runMatmul(const MatmulCase& c, double alpha, double beta, uint64_t seed, bool nan_output = false) {
  std::ostringstream label;
  label << "tmatmul " << typeName<T>() << " " << c.text() << " alpha=" << alpha << " beta=" << beta
        << (nan_output ? " over NaNs" : "");
  SCOPED_TRACE(label.str());
  const DType dtype = kernels::dtypeOf<T>();
  int64_t elements[3] = {};
  const Operand out = matrixOperand(0, dtype, c.batch, c.m, c.n, c.out, {}, &elements[0]);
  const Operand a = matrixOperand(1, dtype, c.batch, c.m, c.k, c.a, c.a_broadcast, &elements[1]);
  const Operand b = matrixOperand(2, dtype, c.batch, c.k, c.n, c.b, c.b_broadcast, &elements[2]);
  std::vector<Bytes> memory = {bufferFor(out, elements[0]), bufferFor(a, elements[1]), bufferFor(b, elements[2])};
  std::mt19937_64 rng(seed);
  fillSlots<T>(memory[0], [&] { return nan_output ? refCast<T>(kNaN) : uniformValue<T>(rng, -1.0, 1.0); });
  fillSlots<T>(memory[1], [&] { return uniformValue<T>(rng, -1.0, 1.0); });
  fillSlots<T>(memory[2], [&] { return uniformValue<T>(rng, -1.0, 1.0); });

  Instruction instruction;
  instruction.opcode = Opcode::kMatmul;
  instruction.operands = {out, a, b};
  instruction.immediates = {alpha, beta};
  const Bytes before = memory[0];
  verifyAndRun(instruction, memory);
  if (::testing::Test::HasFatalFailure()) return;

  const int r = out.rank;
  forEachIndex(out, [&](const Index& index) {
    if (::testing::Test::HasFailure()) return;
    Index a_index = index, b_index = index;  // the batch indices, then [i, kk] and [kk, j]
    double sum = 0, magnitude = 0;
    for (int64_t kk = 0; kk < c.k; ++kk) {
      a_index[r - 1] = kk;
      b_index[r - 2] = kk;
      const double product = toDouble<T>(elementAt(memory[1], a, a_index)) * toDouble<T>(elementAt(memory[2], b, b_index));
      sum += product;
      magnitude += std::abs(product);
    }
    const double old = toDouble<T>(reinterpret_cast<const char*>(before.data()) + elementOf(out, index) * sizeof(T));
    const double want = alpha * sum + (beta == 0 ? 0.0 : beta * old);
    const double scale = std::abs(alpha) * magnitude + (beta == 0 ? 0.0 : std::abs(beta * old));
    const double tolerance = 2 * kRoundoff<T> * std::abs(want) + (c.k + 4) * kComputeRoundoff<T> * scale + kTiny<T>;
    const double got = toDouble<T>(elementAt(memory[0], out, index));
    EXPECT_TRUE(near(got, want, tolerance)) << "at [" << index[r - 2] << ", " << index[r - 1] << "] (element "
                                            << elementOf(out, index) << "): expected " << want << " within "
                                            << tolerance << ", got " << got << "\n" << isa::print(instruction);
  });
  EXPECT_TRUE(gapsUntouched(before, memory[0], out));
}

// Every layout BLAS takes as it is (row-major, transposed, a leading dimension
// past the row, a transposed output) and those it packs first (reversed rows,
// odd strides, broadcast rows); batches, broadcast batches, vector shapes.
const std::vector<MatmulCase>& matmulCases() {
  using M = Mat;
  static const std::vector<MatmulCase> cases = {
      {{}, 5, 3, 7, M::kRowMajor, M::kRowMajor, M::kRowMajor},
      {{}, 5, 3, 7, M::kRowMajor, M::kTransposed, M::kRowMajor},
      {{}, 5, 3, 7, M::kRowMajor, M::kRowMajor, M::kTransposed},
      {{}, 5, 3, 7, M::kRowMajor, M::kTransposed, M::kTransposed},
      {{}, 5, 3, 7, M::kTransposed, M::kRowMajor, M::kRowMajor},  // C^T = B^T A^T
      {{}, 5, 3, 7, M::kTransposed, M::kTransposed, M::kTransposed},
      {{}, 5, 3, 7, M::kPadded, M::kPadded, M::kPadded},
      {{}, 5, 3, 7, M::kStrided, M::kStrided, M::kStrided},
      {{}, 5, 3, 7, M::kStrided, M::kRowBroadcast, M::kTransposed},
      {{}, 5, 3, 7, M::kRowMajor, M::kPadded, M::kRowBroadcast},
      {{}, 1, 6, 4, M::kRowMajor, M::kRowMajor, M::kRowMajor},  // a row vector
      {{}, 6, 1, 4, M::kTransposed, M::kStrided, M::kTransposed},  // a column vector
      {{}, 3, 4, 1, M::kRowMajor, M::kTransposed, M::kRowMajor},  // an outer product
      {{}, 1, 1, 9, M::kStrided, M::kRowMajor, M::kStrided},  // a dot product
      {{2, 3}, 4, 5, 6, M::kRowMajor, M::kRowMajor, M::kRowMajor},
      {{2, 3}, 4, 5, 6, M::kTransposed, M::kRowMajor, M::kTransposed, {0}, {1}},
      {{2, 3}, 4, 5, 6, M::kStrided, M::kPadded, M::kRowMajor, {0, 1}, {}},
      {{3}, 4, 5, 6, M::kPadded, M::kTransposed, M::kStrided, {}, {0}},
      {{2}, 33, 17, 29, M::kRowMajor, M::kTransposed, M::kRowMajor},  // past BLAS's small-matrix kernels
      // Past the libraries' register tiles and depth blocks, odd k included.
      {{}, 13, 70, 1101, M::kRowMajor, M::kTransposed, M::kStrided},
      // Rows enough for the device's cores to take a band each, one GEMM per band.
      {{}, 130, 19, 40, M::kRowMajor, M::kRowMajor, M::kTransposed},
      {{}, 130, 19, 40, M::kTransposed, M::kTransposed, M::kRowMajor},
  };
  return cases;
}

TEST(Matmul, LayoutsDTypesAlphaAndBeta) {
  uint64_t seed = 2000;
  for (const MatmulCase& c : matmulCases()) {
    for (auto [alpha, beta] : {std::pair{1.0, 0.0}, std::pair{-0.5, 1.0}, std::pair{2.0, 0.25}}) {
      runMatmul<float>(c, alpha, beta, seed++);
      runMatmul<double>(c, alpha, beta, seed++);
      runMatmul<Half>(c, alpha, beta, seed++);
      runMatmul<BFloat16>(c, alpha, beta, seed++);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(Matmul, BetaZeroIgnoresNaNsInTheOutput) {
  // BLAS on the output itself (row-major, transposed), and the packed output.
  for (Mat layout : {Mat::kRowMajor, Mat::kTransposed, Mat::kPadded, Mat::kStrided}) {
    const MatmulCase c{{2}, 5, 3, 7, layout, Mat::kRowMajor, Mat::kTransposed};
    runMatmul<float>(c, 1.0, 0.0, 1, true);
    runMatmul<double>(c, 0.5, 0.0, 2, true);
    runMatmul<Half>(c, 1.0, 0.0, 3, true);
    runMatmul<BFloat16>(c, 2.0, 0.0, 4, true);
  }
}

TEST(Matmul, EmptyDimensions) {
  // K = 0: out = beta * out (beta 0: zeros, even over NaNs).
  for (Mat layout : {Mat::kRowMajor, Mat::kTransposed, Mat::kStrided}) {
    const MatmulCase c{{}, 4, 3, 0, layout, Mat::kRowMajor, Mat::kRowMajor};
    runMatmul<float>(c, 1.0, 0.0, 1, true);
    runMatmul<float>(c, 1.0, 1.0, 2);
    runMatmul<double>(c, 2.0, 0.5, 3);
    runMatmul<BFloat16>(c, 1.0, 0.0, 4, true);
    runMatmul<Half>(c, 1.0, -1.0, 5);
  }
  // M = 0 or N = 0: nothing to write (the buffer's sentinels stay).
  runMatmul<float>({{}, 0, 3, 4, Mat::kRowMajor, Mat::kRowMajor, Mat::kRowMajor}, 1.0, 0.0, 6);
  runMatmul<double>({{2}, 4, 0, 4, Mat::kStrided, Mat::kTransposed, Mat::kRowMajor}, 1.0, 1.0, 7);
  runMatmul<Half>({{0}, 4, 3, 4, Mat::kRowMajor, Mat::kRowMajor, Mat::kRowMajor}, 1.0, 0.0, 8);
}

TEST(Matmul, MoreShapesThanThePrimitiveCacheHolds) {
  // oneDNN's primitives are cached per shape (128 kept): shapes past that evict the
  // least recently used, and a shape seen again after its eviction is created anew.
  uint64_t seed = 3000;
  for (int round = 0; round < 2; ++round) {
    for (int64_t m = 1; m <= 140; ++m) {
      runMatmul<float>({{}, m, 3, 5, Mat::kRowMajor, Mat::kRowMajor, Mat::kRowMajor}, 1.0, 0.0, seed++);
      runMatmul<BFloat16>({{}, m, 3, 5, Mat::kRowMajor, Mat::kTransposed, Mat::kRowMajor}, 1.0, 0.5, seed++);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(Matmul, KnownValues) {
  // [[1, 2], [3, 4]] @ [[5, 6], [7, 8]] = [[19, 22], [43, 50]]; then 2 * that + 1 * out.
  std::vector<float> a = {1, 2, 3, 4}, b = {5, 6, 7, 8}, out(4, kNaNF);
  Instruction matmul;
  matmul.opcode = Opcode::kMatmul;
  matmul.operands = {isa::contiguousOperand(0, DType::kFloat32, {2, 2}), isa::contiguousOperand(1, DType::kFloat32, {2, 2}),
                     isa::contiguousOperand(2, DType::kFloat32, {2, 2})};
  matmul.immediates = {1.0, 0.0};
  std::vector<void*> buffers = {out.data(), a.data(), b.data()};
  kernels::execute(matmul, buffers);
  EXPECT_EQ(out, (std::vector<float>{19, 22, 43, 50}));
  matmul.immediates = {2.0, 1.0};
  kernels::execute(matmul, buffers);
  EXPECT_EQ(out, (std::vector<float>{57, 66, 129, 150}));
  // b read transposed through its strides: [[5, 7], [6, 8]]^T.
  matmul.operands[2].strides = {1, 2};
  matmul.immediates = {1.0, 0.0};
  kernels::execute(matmul, buffers);
  EXPECT_EQ(out, (std::vector<float>{17, 23, 39, 53}));
}

// ---------------------------------------------------------------------------
// Row ops: softmax, log_softmax and their gradients over the last dimension.
// ---------------------------------------------------------------------------

// What the rows hold (softmax, log_softmax: x; the gradients: dy, then y).
enum class Rows {
  kOrdinary,  // x uniform in [-4, 4)
  kSpecial,   // some rows all -inf, some with a NaN, an inf or a -inf
  kLarge,     // x of magnitude up to 1000: exp overflows unless the row's max is taken out
};

struct RowCase {
  std::vector<int64_t> shape;
  Layout out = Layout::kContiguous, in = Layout::kContiguous, y = Layout::kContiguous;
};

// The reference softmax (or log_softmax) of one row, in double. A row with a
// NaN, or of -inf only, is NaN throughout (as PyTorch's).
std::vector<double> softmaxRow(const std::vector<double>& x, bool log) {
  double max = -kInf;
  bool nan = false;
  for (double v : x) {
    nan |= std::isnan(v);
    max = std::max(max, v);
  }
  if (nan || max == -kInf) return std::vector<double>(x.size(), kNaN);
  double sum = 0;
  for (double v : x) sum += std::exp(v - max);
  std::vector<double> y;
  for (double v : x) y.push_back(log ? (v - max) - std::log(sum) : std::exp(v - max) / sum);
  return y;
}

template <typename T>
void runRowOp(Opcode op, const RowCase& c, Rows rows, uint64_t seed) {
  const bool forward = op == Opcode::kSoftmax || op == Opcode::kLogSoftmax;
  const bool log = op == Opcode::kLogSoftmax || op == Opcode::kLogSoftmaxGrad;
  SCOPED_TRACE(std::string(isa::info(op).name) + " " + typeName<T>() + " " + shapeText(c.shape) + " out " +
               layoutName(c.out) + ", in " + layoutName(c.in) + (forward ? "" : std::string(", y ") + layoutName(c.y)) +
               (rows == Rows::kSpecial ? ", special rows" : rows == Rows::kLarge ? ", large values" : ""));
  const DType dtype = kernels::dtypeOf<T>();
  int64_t elements[3] = {};
  std::vector<Operand> operands = {makeOperand(0, dtype, c.shape, c.out, &elements[0]),
                                   makeOperand(1, dtype, c.shape, c.in, &elements[1])};
  if (!forward) operands.push_back(makeOperand(2, dtype, c.shape, c.y, &elements[2]));
  std::vector<Bytes> memory;
  for (size_t k = 0; k < operands.size(); ++k) memory.push_back(bufferFor(operands[k], elements[k]));
  std::mt19937_64 rng(seed);
  if (forward) {
    const double range = rows == Rows::kLarge ? 1000.0 : 4.0;
    fillSlots<T>(memory[1], [&] { return uniformValue<T>(rng, -range, range); });
  } else {  // dy, and a y in the forward's range
    fillSlots<T>(memory[1], [&] { return uniformValue<T>(rng, -1.0, 1.0); });
    fillSlots<T>(memory[2], [&] { return log ? uniformValue<T>(rng, -6.0, 0.0) : uniformValue<T>(rng, 0.0, 1.0); });
  }
  const Operand& out = operands[0];
  const int r = out.rank;
  const int64_t length = r == 0 ? 1 : out.shape[r - 1];
  Operand row_starts = out;  // one index per row
  if (r > 0) row_starts.shape[r - 1] = 1;
  if (rows == Rows::kSpecial && forward) {
    // Row by row: all -inf; a NaN; a +inf; a -inf; ordinary; and again.
    int row = 0;
    forEachIndex(row_starts, [&](Index index) {
      const int kind = row++ % 5;
      for (int64_t i = 0; i < length; ++i) {
        if (r > 0) index[r - 1] = i;
        char* x = elementAt(memory[1], operands[1], index);
        const bool middle = i == length / 2;
        if (kind == 0) refStore<T>(x, -kInf);
        if (kind == 1 && middle) refStore<T>(x, kNaN);
        if (kind == 2 && middle) refStore<T>(x, kInf);
        if (kind == 3 && middle) refStore<T>(x, -kInf);
      }
    });
  }

  Instruction instruction;
  instruction.opcode = op;
  instruction.operands = operands;
  const Bytes before = memory[0];
  verifyAndRun(instruction, memory);
  if (::testing::Test::HasFatalFailure()) return;

  constexpr double u = kComputeRoundoff<T>;
  const double n = static_cast<double>(length) + 8;
  forEachIndex(row_starts, [&](Index index) {
    if (::testing::Test::HasFailure()) return;
    const int64_t row_start = elementOf(out, index);
    std::vector<double> in, y, got;
    for (int64_t i = 0; i < length; ++i) {
      if (r > 0) index[r - 1] = i;
      in.push_back(toDouble<T>(elementAt(memory[1], operands[1], index)));
      if (!forward) y.push_back(toDouble<T>(elementAt(memory[2], operands[2], index)));
      got.push_back(toDouble<T>(elementAt(memory[0], out, index)));
    }
    std::vector<double> want(length), tolerance(length);
    if (forward) {
      want = softmaxRow(in, log);
      double max = -kInf, sum = 0;
      for (double v : in) max = std::max(max, v);
      for (double v : in) sum += std::exp(v - max);
      for (int64_t i = 0; i < length; ++i) {
        const double shift = std::abs(in[i] - max);
        tolerance[i] = log ? u * n * (shift + std::abs(std::log(sum)) + 1) : u * (n + shift) * std::abs(want[i]);
      }
    } else if (!log) {  // dx = y * (dy - sum(dy * y))
      double dot = 0, dot_magnitude = 0;
      for (int64_t i = 0; i < length; ++i) dot += in[i] * y[i], dot_magnitude += std::abs(in[i] * y[i]);
      for (int64_t i = 0; i < length; ++i) {
        want[i] = y[i] * (in[i] - dot);
        tolerance[i] = u * n * std::abs(y[i]) * (std::abs(in[i]) + dot_magnitude);
      }
    } else {  // dx = dy - exp(y) * sum(dy)
      double sum = 0, sum_magnitude = 0;
      for (double v : in) sum += v, sum_magnitude += std::abs(v);
      for (int64_t i = 0; i < length; ++i) {
        want[i] = in[i] - std::exp(y[i]) * sum;
        tolerance[i] = u * n * (std::abs(in[i]) + std::exp(y[i]) * sum_magnitude * (1 + std::abs(y[i])));
      }
    }
    for (int64_t i = 0; i < length; ++i) {
      const double allowed = tolerance[i] + 2 * kRoundoff<T> * std::abs(want[i]) + kTiny<T>;
      if (!near(got[i], want[i], allowed)) {
        std::ostringstream row;
        row.precision(9);
        for (int64_t j = 0; j < std::min<int64_t>(length, 8); ++j) row << (j ? ", " : "") << in[j];
        ADD_FAILURE() << "element " << i << " of the row at output element " << row_start << ": expected " << want[i]
                      << " within " << allowed << ", got " << got[i] << "\nthe row's first input: " << row.str()
                      << (length > 8 ? ", ..." : "") << "\n" << isa::print(instruction);
        return;
      }
    }
  });
  EXPECT_TRUE(gapsUntouched(before, memory[0], out));
}

const std::vector<RowCase>& rowCases() {
  static const std::vector<RowCase> cases = {
      {{4, 7}},
      {{5, 19}},                                           // contiguous float32 softmax: the eight-lane row
      {{4, 7}, L::kPadded, L::kTransposed, L::kReversed},  // strided rows: no operand's row is contiguous
      {{3, 2, 9}, L::kReversedInner, L::kPadded, L::kTransposed},
      {{37}, L::kContiguous, L::kReversed, L::kPadded},
      {{2, 3, 5}, L::kTransposed, L::kBroadcastOuter, L::kBroadcastInner},  // inputs repeated
      {{6, 1}},                                                            // rows of one
      {{}},                                                                // one element
      {{3, 0}},                                                            // empty rows
      {{0, 5}},                                                            // no rows
  };
  return cases;
}

TEST(RowOps, EveryOpcodeDTypeAndLayout) {
  uint64_t seed = 3000;
  for (Opcode op : {Opcode::kSoftmax, Opcode::kLogSoftmax, Opcode::kSoftmaxGrad, Opcode::kLogSoftmaxGrad}) {
    for (const RowCase& c : rowCases()) {
      for (Rows rows : {Rows::kOrdinary, Rows::kSpecial, Rows::kLarge}) {
        runRowOp<float>(op, c, rows, seed++);
        runRowOp<double>(op, c, rows, seed++);
        runRowOp<Half>(op, c, rows, seed++);
        runRowOp<BFloat16>(op, c, rows, seed++);
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

TEST(RowOps, LargeParallel) {
  // 1000 rows of 100 and 3 rows of 40000: past the row grain, split over the cores.
  for (const RowCase& c : {RowCase{{1000, 100}, L::kContiguous, L::kTransposed, L::kContiguous},
                           RowCase{{3, 40000}, L::kPadded, L::kContiguous, L::kReversedInner}}) {
    runRowOp<float>(Opcode::kSoftmax, c, Rows::kSpecial, 71);
    runRowOp<double>(Opcode::kLogSoftmax, c, Rows::kLarge, 72);
    runRowOp<Half>(Opcode::kSoftmaxGrad, c, Rows::kOrdinary, 73);
    runRowOp<float>(Opcode::kLogSoftmaxGrad, c, Rows::kOrdinary, 74);
  }
}

TEST(RowOps, KnownRows) {
  // Large values, a row of -inf, a NaN, a -inf among finite values, a tie.
  const std::vector<float> x = {1000, 999, 998,  997,         // softmax of 1000 - [0, 1, 2, 3]
                                -kInfF, -kInfF, -kInfF, -kInfF,  // NaN throughout (PyTorch's answer)
                                1, kNaNF, 2, 3,              // NaN throughout
                                -kInfF, 0, 1000, -1000,      // [0, e^-1000, 1, 0]
                                -1000, -1000, 1000, 1000};   // [0, 0, 1/2, 1/2]
  std::vector<float> y(x.size());
  Instruction softmax;
  softmax.opcode = Opcode::kSoftmax;
  softmax.operands = {isa::contiguousOperand(0, DType::kFloat32, {5, 4}), isa::contiguousOperand(1, DType::kFloat32, {5, 4})};
  std::vector<void*> buffers = {y.data(), const_cast<float*>(x.data())};
  kernels::execute(softmax, buffers);
  const double z = 1 + std::exp(-1.0) + std::exp(-2.0) + std::exp(-3.0);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], std::exp(-i) / z, 1e-7) << i;
  for (int i = 4; i < 12; ++i) EXPECT_TRUE(std::isnan(y[i])) << i;
  EXPECT_EQ((std::vector<float>(y.begin() + 12, y.end())), (std::vector<float>{0, 0, 1, 0, 0, 0, 0.5f, 0.5f}));
  // zero_masked_rows: the row of -inf gives 0 (attention's softmax); a NaN is still NaN,
  // and every other row is as before, in float32 and (by the scalar loop) float64.
  softmax.immediates[0] = 1;
  std::vector<float> masked(x.size());
  buffers[0] = masked.data();
  kernels::execute(softmax, buffers);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(masked[i], 0.0f) << i;
  for (int i = 8; i < 12; ++i) EXPECT_TRUE(std::isnan(masked[i])) << i;
  for (int i : {0, 1, 2, 3, 12, 13, 14, 15, 16, 17, 18, 19}) EXPECT_EQ(masked[i], y[i]) << i;
  std::vector<double> x64(x.begin(), x.end()), masked64(x.size());
  Instruction softmax64 = softmax;
  for (Operand& operand : softmax64.operands) operand.dtype = DType::kFloat64;
  std::vector<void*> buffers64 = {masked64.data(), x64.data()};
  kernels::execute(softmax64, buffers64);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(masked64[i], 0.0) << i;
  for (int i = 8; i < 12; ++i) EXPECT_TRUE(std::isnan(masked64[i])) << i;
  softmax.immediates[0] = 0;
  buffers[0] = y.data();
  softmax.opcode = Opcode::kLogSoftmax;
  kernels::execute(softmax, buffers);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], -i - std::log(z), 1e-6) << i;
  for (int i = 4; i < 12; ++i) EXPECT_TRUE(std::isnan(y[i])) << i;
  EXPECT_EQ((std::vector<float>(y.begin() + 12, y.end())),
            (std::vector<float>{-kInfF, -1000, 0, -2000, -2000 - std::log(2.0f), -2000 - std::log(2.0f),
                                -std::log(2.0f), -std::log(2.0f)}));
}

// ---------------------------------------------------------------------------
// Gather.
// ---------------------------------------------------------------------------

struct GatherCase {
  std::vector<int64_t> in_shape, out_shape;  // the index has the output's shape
  int axis;
  Layout in = Layout::kContiguous, index = Layout::kContiguous, out = Layout::kContiguous;
  bool wrap = false;  // negative indices count from the end
};

template <typename T>
void runGather(const GatherCase& c, uint64_t seed) {
  SCOPED_TRACE("tgather " + typeName<T>() + " " + shapeText(c.in_shape) + " -> " + shapeText(c.out_shape) +
               " axis=" + std::to_string(c.axis) + " in " + layoutName(c.in) + ", index " + layoutName(c.index) +
               ", out " + layoutName(c.out) + (c.wrap ? " wrap" : ""));
  int64_t elements[3] = {};
  const Operand out = makeOperand(0, kernels::dtypeOf<T>(), c.out_shape, c.out, &elements[0]);
  const Operand in = makeOperand(1, kernels::dtypeOf<T>(), c.in_shape, c.in, &elements[1]);
  const Operand index = makeOperand(2, DType::kInt64, c.out_shape, c.index, &elements[2]);
  std::vector<Bytes> memory = {bufferFor(out, elements[0]), bufferFor(in, elements[1]), bufferFor(index, elements[2])};
  std::mt19937_64 rng(seed);
  fillSlots<T>(memory[1], [&] { return randomValue<T>(rng); });
  const int64_t extent = c.in_shape.empty() ? 1 : c.in_shape[c.axis];
  fillSlots<int64_t>(memory[2], [&] {
    if (extent == 0) return int64_t{0};
    return c.wrap ? static_cast<int64_t>(rng() % (2 * extent)) - extent : static_cast<int64_t>(rng() % extent);
  });

  Instruction instruction;
  instruction.opcode = Opcode::kGather;
  instruction.operands = {out, in, index};
  instruction.immediates = {static_cast<double>(c.axis), c.wrap ? 1.0 : 0.0};
  const Bytes before = memory[0];
  verifyAndRun(instruction, memory);
  if (::testing::Test::HasFatalFailure()) return;

  forEachIndex(out, [&](const Index& at) {
    if (::testing::Test::HasFailure()) return;
    Index source = at;  // out[i] = in[i with i[axis] = index[i]]
    if (!c.out_shape.empty()) {
      std::memcpy(&source[c.axis], elementAt(memory[2], index, at), sizeof(int64_t));
      if (source[c.axis] < 0) source[c.axis] += extent;
    }
    const char* want = elementAt(memory[1], in, source);
    const char* got = elementAt(memory[0], out, at);
    EXPECT_EQ(std::memcmp(want, got, sizeof(T)), 0) << "at output element " << elementOf(out, at) << ": expected "
                                                    << elementText<T>(want) << ", got " << elementText<T>(got);
  });
  EXPECT_TRUE(gapsUntouched(before, memory[0], out));
}

TEST(Gather, EachAxisDTypeAndLayout) {
  // Along each axis the output may be longer or shorter than the input; off it, no larger.
  const std::vector<GatherCase> cases = {
      {{5, 6, 7}, {8, 4, 7}, 0},
      {{5, 6, 7}, {3, 10, 5}, 1, L::kTransposed, L::kReversed, L::kPadded},
      {{5, 6, 7}, {2, 6, 3}, 2, L::kPadded, L::kTransposed, L::kReversedInner},
      {{5, 6, 7}, {5, 6, 7}, 2, L::kReversed, L::kBroadcastOuter, L::kTransposed},  // the same index in every [i, ...]
      {{6, 4}, {9, 2}, 0, L::kBroadcastInner, L::kContiguous, L::kContiguous},      // a repeated input
      {{10}, {25}, 0, L::kReversed},
      {{}, {}, 0},                                                                 // a scalar: index 0
      {{4, 3}, {0, 3}, 0},                                                         // an empty output
      {{0, 3}, {0, 2}, 0},                                                         // an empty input, nothing gathered
      {{2, 3, 2, 2}, {2, 3, 2, 5}, 3, L::kTransposed, L::kPadded, L::kReversed},
  };
  uint64_t seed = 4000;
  for (const GatherCase& c : cases) {
    runGather<float>(c, seed++);
    runGather<double>(c, seed++);
    runGather<Half>(c, seed++);
    runGather<int8_t>(c, seed++);
    runGather<int64_t>(c, seed++);
    runGather<bool>(c, seed++);
    if (::testing::Test::HasFailure()) return;
  }
  runGather<float>({{600, 500}, {700, 500}, 0, L::kTransposed}, 90);  // 350000 elements: parallel
  runGather<uint8_t>({{500, 600}, {500, 700}, 1, L::kContiguous, L::kPadded}, 91);
  // wrap=1: indices in [-extent, extent).
  runGather<float>({{5, 6, 7}, {3, 10, 5}, 1, L::kTransposed, L::kReversed, L::kPadded, true}, 92);
  runGather<Half>({{10}, {25}, 0, L::kReversed, L::kContiguous, L::kContiguous, true}, 93);
  runGather<int64_t>({{600, 500}, {700, 500}, 0, L::kTransposed, L::kContiguous, L::kContiguous, true}, 94);
}

TEST(Gather, KnownValues) {
  // torch.gather(in, 1, index): out[i][j] = in[i][index[i][j]].
  const std::vector<int32_t> in = {10, 11, 12, 20, 21, 22};  // [2, 3]
  const std::vector<int64_t> index = {2, 0, 0, 1, 1, 1, 2, 2};  // [2, 4]
  std::vector<int32_t> out(8);
  Instruction gather;
  gather.opcode = Opcode::kGather;
  gather.operands = {isa::contiguousOperand(0, DType::kInt32, {2, 4}), isa::contiguousOperand(1, DType::kInt32, {2, 3}),
                     isa::contiguousOperand(2, DType::kInt64, {2, 4})};
  gather.immediates[0] = 1;
  ASSERT_EQ(isa::verifyInstruction(gather, std::vector<uint64_t>{32, 24, 64}), "");
  std::vector<void*> buffers = {out.data(), const_cast<int32_t*>(in.data()), const_cast<int64_t*>(index.data())};
  kernels::execute(gather, buffers);
  EXPECT_EQ(out, (std::vector<int32_t>{12, 10, 10, 11, 21, 21, 22, 22}));
}

// execute() on an index outside [0, extent): std::out_of_range naming the index and the dimension.
std::string gatherFailure(int64_t bad, int64_t count, int64_t at, bool wrap = false) {
  std::vector<float> in(5 * 2, 1.0f), out(static_cast<size_t>(count) * 2);
  std::vector<int64_t> index(static_cast<size_t>(count) * 2, 4);
  index[static_cast<size_t>(at)] = bad;
  Instruction gather;
  gather.opcode = Opcode::kGather;
  gather.operands = {isa::contiguousOperand(0, DType::kFloat32, {count, 2}), isa::contiguousOperand(1, DType::kFloat32, {5, 2}),
                     isa::contiguousOperand(2, DType::kInt64, {count, 2})};
  gather.immediates[1] = wrap ? 1 : 0;
  std::vector<void*> buffers = {out.data(), in.data(), index.data()};
  try {
    kernels::execute(gather, buffers);
  } catch (const std::out_of_range& error) {
    return error.what();
  }
  return "no exception";
}

TEST(Gather, AnIndexOutOfBoundsThrows) {
  EXPECT_EQ(gatherFailure(5, 3, 4), "index 5 is out of bounds for dimension 0 with size 5");
  EXPECT_EQ(gatherFailure(-1, 3, 0), "index -1 is out of bounds for dimension 0 with size 5");
  EXPECT_EQ(gatherFailure(-6, 3, 0, true), "index -6 is out of bounds for dimension 0 with size 5");
  EXPECT_EQ(gatherFailure(-5, 3, 0, true), "no exception");  // wrap=1: the first row
  // From a chunk on another core: the exception comes back to the caller.
  EXPECT_EQ(gatherFailure(std::numeric_limits<int64_t>::max(), 200000, 399999),
            "index 9223372036854775807 is out of bounds for dimension 0 with size 5");
  EXPECT_EQ(gatherFailure(std::numeric_limits<int64_t>::min(), 200000, 3),
            "index -9223372036854775808 is out of bounds for dimension 0 with size 5");
}

TEST(Gather, AnIndexOutOfBoundsFailsTheStreamUntilReported) {
  Stream stream;
  std::vector<float> in = {10, 11, 12, 13, 14}, out(3, -1.0f);
  std::vector<int64_t> index = {4, 5, 0};  // 5 is past the end
  Instruction gather;
  gather.opcode = Opcode::kGather;
  gather.operands = {isa::contiguousOperand(0, DType::kFloat32, {3}), isa::contiguousOperand(1, DType::kFloat32, {5}),
                     isa::contiguousOperand(2, DType::kInt64, {3})};
  const std::vector<void*> buffers = {out.data(), in.data(), index.data()};
  const std::vector<uint64_t> bytes = {12, 20, 24};
  ASSERT_PTO_OK(launchInstruction(stream.get(), gather, buffers, bytes));  // the launch itself succeeds
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, "tgather")) << message;
  EXPECT_TRUE(contains(message, "index 5 is out of bounds")) << message;
  // Reported, the error is cleared: the stream runs the next launch.
  index[1] = 2;
  ASSERT_PTO_OK(launchInstruction(stream.get(), gather, buffers, bytes));
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(out, (std::vector<float>{14, 12, 10}));
  // An instruction the verifier refuses fails the launch itself, and queues nothing.
  gather.immediates[0] = 1;
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, launchInstruction(stream.get(), gather, buffers, bytes));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "axis=1")) << ptoGetRecentErrMsg();
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
}

// ---------------------------------------------------------------------------
// Scatter (tscatter, tscatteradd), twrapindex and tnonzero.
// ---------------------------------------------------------------------------

struct ScatterCase {
  std::vector<int64_t> out_shape, in_shape;  // the index has the input's shape
  int axis;
  Layout out = Layout::kContiguous, in = Layout::kContiguous, index = Layout::kContiguous;
  bool wrap = false;  // negative indices count from the end
};

constexpr Opcode kScatterOpcodes[] = {Opcode::kScatter, Opcode::kScatterAdd, Opcode::kScatterMul, Opcode::kScatterMax,
                                      Opcode::kScatterMin};

// The reference: every element of in, in row-major order, into out in place. Along
// the axis that is index order, so the last write wins and sums and products run in
// order, as PyTorch's CPU kernels do: in T (integers wrap; bools or for sums and
// maxima, and for products and minima), but float16/bfloat16 sums and products in
// float32, rounded once at the end. Maxima and minima take a NaN from either side.
template <typename T>
void referenceScatter(Opcode opcode, const ScatterCase& c, std::vector<Bytes>& memory, const Operand& out,
                      const Operand& in, const Operand& index) {
  std::map<int64_t, float> wide;  // the float32 sums of float16/bfloat16, by output element
  const bool add = opcode == Opcode::kScatterAdd;
  const bool extreme = opcode == Opcode::kScatterMax || opcode == Opcode::kScatterMin;
  forEachIndex(in, [&](const Index& at) {
    Index target = at;
    if (!c.in_shape.empty()) {
      std::memcpy(&target[c.axis], elementAt(memory[2], index, at), sizeof(int64_t));
      if (target[c.axis] < 0) target[c.axis] += c.out_shape[c.axis];
    }
    char* slot = elementAt(memory[0], out, target);
    const char* source = elementAt(memory[1], in, at);
    const auto a = refLoad<T>(slot), b = refLoad<T>(source);
    if (opcode == Opcode::kScatter) {
      std::memcpy(slot, source, sizeof(T));
    } else if constexpr (std::is_same_v<T, bool>) {
      refStore<T>(slot, add || opcode == Opcode::kScatterMax ? a || b : a && b);
    } else if (extreme) {
      const bool take = b != b || (opcode == Opcode::kScatterMax ? a < b : b < a);
      if (take) std::memcpy(slot, source, sizeof(T));
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      const auto sum = wide.try_emplace(elementOf(out, target), a).first;
      sum->second = add ? sum->second + b : sum->second * b;
      refStore<T>(slot, sum->second);
    } else if constexpr (std::is_integral_v<T>) {
      const auto x = static_cast<uint64_t>(static_cast<int64_t>(a)), y = static_cast<uint64_t>(static_cast<int64_t>(b));
      refStore<T>(slot, static_cast<int64_t>(add ? x + y : x * y));
    } else {
      refStore<T>(slot, add ? a + b : a * b);
    }
  });
}

template <typename T>
void runScatter(Opcode opcode, const ScatterCase& c, uint64_t seed) {
  SCOPED_TRACE(std::string(isa::info(opcode).name) + " " + typeName<T>() + " " + shapeText(c.in_shape) + " -> " +
               shapeText(c.out_shape) + " axis=" + std::to_string(c.axis) + " out " + layoutName(c.out) + ", in " +
               layoutName(c.in) + ", index " + layoutName(c.index) + (c.wrap ? " wrap" : ""));
  int64_t elements[3] = {};
  const Operand out = makeOperand(0, kernels::dtypeOf<T>(), c.out_shape, c.out, &elements[0]);
  const Operand in = makeOperand(1, kernels::dtypeOf<T>(), c.in_shape, c.in, &elements[1]);
  const Operand index = makeOperand(2, DType::kInt64, c.in_shape, c.index, &elements[2]);
  std::vector<Bytes> memory = {bufferFor(out, elements[0]), bufferFor(in, elements[1]), bufferFor(index, elements[2])};
  std::mt19937_64 rng(seed);
  forEachIndex(out, [&](const Index& at) { writeValue(elementAt(memory[0], out, at), randomValue<T>(rng)); });
  fillSlots<T>(memory[1], [&] { return randomValue<T>(rng); });
  const int64_t extent = c.out_shape.empty() ? 1 : c.out_shape[c.axis];
  fillSlots<int64_t>(memory[2], [&] {
    if (extent == 0) return int64_t{0};
    return c.wrap ? static_cast<int64_t>(rng() % (2 * extent)) - extent : static_cast<int64_t>(rng() % extent);
  });
  std::vector<Bytes> expected = memory;
  referenceScatter<T>(opcode, c, expected, out, in, index);

  Instruction instruction;
  instruction.opcode = opcode;
  instruction.operands = {out, in, index};
  instruction.immediates = {static_cast<double>(c.axis), c.wrap ? 1.0 : 0.0};
  const Bytes before = memory[0];
  verifyAndRun(instruction, memory);
  if (::testing::Test::HasFatalFailure()) return;
  forEachIndex(out, [&](const Index& at) {
    if (::testing::Test::HasFailure()) return;
    const char* want = elementAt(expected[0], out, at);
    const char* got = elementAt(memory[0], out, at);
    EXPECT_TRUE(elementsEqual<T>(want, got)) << "at output element " << elementOf(out, at) << ": expected "
                                             << elementText<T>(want) << ", got " << elementText<T>(got);
  });
  EXPECT_TRUE(gapsUntouched(before, memory[0], out));
}

TEST(Scatter, EachAxisDTypeAndLayout) {
  // Along the axis the input may be longer (duplicate indices) or shorter than the output; off it, no larger.
  const std::vector<ScatterCase> cases = {
      {{8, 7, 7}, {5, 6, 7}, 0},
      {{5, 6, 7}, {3, 10, 5}, 1, L::kTransposed, L::kReversed, L::kPadded},
      {{5, 6, 7}, {2, 6, 3}, 2, L::kPadded, L::kTransposed, L::kReversedInner},
      {{5, 6, 7}, {5, 6, 7}, 2, L::kReversed, L::kBroadcastOuter, L::kTransposed},
      {{5, 6, 7}, {5, 6, 9}, 2, L::kContiguous, L::kContiguous, L::kBroadcastInner},  // one index a line: the last wins
      {{9, 2}, {6, 2}, 0, L::kContiguous, L::kBroadcastInner, L::kBroadcastOuter},     // a repeated input and index
      {{4}, {25}, 0, L::kReversed},                                                   // many duplicates
      {{}, {}, 0},                                                                    // a scalar: index 0
      {{4, 3}, {0, 3}, 0},                                                            // nothing to scatter
      {{0, 3}, {0, 2}, 0},
      {{2, 3, 2, 5}, {2, 3, 2, 2}, 3, L::kTransposed, L::kPadded, L::kReversed},
      {{5, 6, 7}, {3, 10, 5}, 1, L::kTransposed, L::kReversed, L::kPadded, true},     // wrap=1: from the end too
      {{4}, {25}, 0, L::kContiguous, L::kContiguous, L::kContiguous, true},
  };
  uint64_t seed = 6000;
  for (const ScatterCase& c : cases) {
    for (Opcode opcode : kScatterOpcodes) {
      runScatter<float>(opcode, c, seed++);
      runScatter<double>(opcode, c, seed++);
      runScatter<Half>(opcode, c, seed++);
      runScatter<BFloat16>(opcode, c, seed++);
      runScatter<int8_t>(opcode, c, seed++);
      runScatter<int64_t>(opcode, c, seed++);
      runScatter<bool>(opcode, c, seed++);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// Many positions split over the cores; a 1-D scatter runs in one loop.
TEST(Scatter, LargeParallel) {
  for (Opcode opcode : kScatterOpcodes) {
    runScatter<float>(opcode, {{700, 500}, {600, 500}, 0, L::kTransposed}, 90);        // many positions
    runScatter<int32_t>(opcode, {{500, 70}, {500, 700}, 1, L::kContiguous, L::kPadded}, 91);  // many duplicates
    runScatter<float>(opcode, {{100000}, {300000}, 0}, 92);                           // one position
    runScatter<Half>(opcode, {{3, 50000}, {3, 70000}, 1, L::kPadded, L::kReversed}, 93);
    runScatter<double>(opcode, {{100000}, {300000}, 0, L::kReversed, L::kContiguous, L::kContiguous, true}, 94);
    // One index per row of 20 (index_put's form): the cores take slices of out's rows.
    runScatter<float>(opcode, {{1000, 20}, {5000, 20}, 0, L::kContiguous, L::kPadded, L::kBroadcastInner}, 95);
    runScatter<BFloat16>(opcode, {{1000, 20}, {5000, 20}, 0, L::kTransposed, L::kContiguous, L::kBroadcastInner}, 96);
  }
}

TEST(Scatter, KnownValues) {
  // torch.zeros(2, 4).scatter_(1, index, src) and scatter_add_: row 0 hits column 1 twice.
  const std::vector<float> src = {1, 2, 3, 4, 5, 6};    // [2, 3]
  const std::vector<int64_t> index = {1, 3, 1, 0, 2, 3};  // [2, 3]
  Instruction scatter;
  scatter.operands = {isa::contiguousOperand(0, DType::kFloat32, {2, 4}),
                      isa::contiguousOperand(1, DType::kFloat32, {2, 3}),
                      isa::contiguousOperand(2, DType::kInt64, {2, 3})};
  scatter.immediates[0] = 1;
  for (Opcode opcode : {Opcode::kScatter, Opcode::kScatterAdd}) {
    scatter.opcode = opcode;
    std::vector<float> out(8, 0.0f);
    ASSERT_EQ(isa::verifyInstruction(scatter, std::vector<uint64_t>{32, 24, 48}), "");
    std::vector<void*> buffers = {out.data(), const_cast<float*>(src.data()), const_cast<int64_t*>(index.data())};
    kernels::execute(scatter, buffers);
    EXPECT_EQ(out, opcode == Opcode::kScatter ? (std::vector<float>{0, 3, 0, 2, 4, 0, 5, 6})
                                               : (std::vector<float>{0, 4, 0, 2, 4, 0, 5, 6}));
  }
}

// index_put's form: out views the rows of a [3, 4] matrix by element offset (0, 4, 8)
// on an axis of stride 1, beside its columns: one element has several (offset, column)
// names, and only the named ones may change.
template <typename T>
void runScatterIntoOffsets(Opcode opcode) {
  SCOPED_TRACE(std::string(isa::info(opcode).name) + " " + typeName<T>());
  std::vector<T> matrix(12), in(20);
  for (size_t i = 0; i < matrix.size(); ++i) matrix[i] = refCast<T>(static_cast<double>(i) + 0.25);
  for (size_t i = 0; i < in.size(); ++i) in[i] = refCast<T>(1.0 / static_cast<double>(i + 3));
  const std::vector<int64_t> rows = {2, 0, 2, 2, 1};  // row 2 four times
  std::vector<int64_t> offsets;
  for (int64_t row : rows) offsets.push_back(row * 4);
  auto value = [](const T& element) { return static_cast<float>(refLoad<T>(reinterpret_cast<const char*>(&element))); };
  std::vector<T> expected = matrix;
  for (size_t column = 0; column < 4; ++column) {
    float wide[3];
    for (size_t row = 0; row < 3; ++row) wide[row] = value(matrix[row * 4 + column]);
    for (size_t i = 0; i < rows.size(); ++i) {
      const float added = value(in[i * 4 + column]);
      wide[rows[i]] = opcode == Opcode::kScatterAdd ? wide[rows[i]] + added : added;
    }
    for (size_t row = 0; row < 3; ++row) expected[row * 4 + column] = refCast<T>(wide[row]);
  }
  const DType dtype = kernels::dtypeOf<T>();
  Instruction scatter;
  scatter.opcode = opcode;
  scatter.operands = {isa::contiguousOperand(0, dtype, {9, 4}), isa::contiguousOperand(1, dtype, {5, 4}),
                      isa::contiguousOperand(2, DType::kInt64, {5, 4})};
  scatter.operands[0].strides = {1, 1};
  scatter.operands[2].strides = {1, 0};
  ASSERT_EQ(isa::verifyInstruction(scatter, std::vector<uint64_t>{12 * sizeof(T), 20 * sizeof(T), 40}), "");
  std::vector<void*> buffers = {matrix.data(), in.data(), offsets.data()};
  kernels::execute(scatter, buffers);
  for (size_t i = 0; i < matrix.size(); ++i) {
    const char* got = reinterpret_cast<const char*>(&matrix[i]);
    const char* want = reinterpret_cast<const char*>(&expected[i]);
    EXPECT_TRUE(elementsEqual<T>(got, want)) << "element " << i << ": expected " << elementText<T>(want) << ", got "
                                             << elementText<T>(got);
  }
}

TEST(Scatter, IntoAnOutputThatNamesElementsTwice) {
  for (Opcode opcode : {Opcode::kScatter, Opcode::kScatterAdd}) {
    runScatterIntoOffsets<float>(opcode);
    runScatterIntoOffsets<Half>(opcode);
    runScatterIntoOffsets<BFloat16>(opcode);
    runScatterIntoOffsets<int32_t>(opcode);
  }
}

// execute() on an index outside [0, extent): std::out_of_range naming the index and the dimension.
std::string scatterFailure(Opcode opcode, int64_t bad, int64_t count, int64_t at, int64_t extent = 5,
                           bool wrap = false, int64_t width = 2) {
  std::vector<float> in(static_cast<size_t>(count * width), 1.0f), out(static_cast<size_t>(extent * width));
  std::vector<int64_t> index(static_cast<size_t>(count * width), 0);
  index[static_cast<size_t>(at)] = bad;
  Instruction scatter;
  scatter.opcode = opcode;
  scatter.operands = {isa::contiguousOperand(0, DType::kFloat32, {extent, width}),
                      isa::contiguousOperand(1, DType::kFloat32, {count, width}),
                      isa::contiguousOperand(2, DType::kInt64, {count, width})};
  scatter.immediates[1] = wrap ? 1 : 0;
  std::vector<void*> buffers = {out.data(), in.data(), index.data()};
  try {
    kernels::execute(scatter, buffers);
  } catch (const std::out_of_range& error) {
    return error.what();
  }
  return "no exception";
}

TEST(Scatter, AnIndexOutOfBoundsThrows) {
  for (Opcode opcode : {Opcode::kScatter, Opcode::kScatterAdd}) {
    EXPECT_EQ(scatterFailure(opcode, 5, 3, 4), "index 5 is out of bounds for dimension 0 with size 5");
    EXPECT_EQ(scatterFailure(opcode, -1, 3, 0), "index -1 is out of bounds for dimension 0 with size 5");
    EXPECT_EQ(scatterFailure(opcode, 7, 3, 0, 0), "index 7 is out of bounds for dimension 0 with size 0");
    EXPECT_EQ(scatterFailure(opcode, -6, 3, 2, 5, true), "index -6 is out of bounds for dimension 0 with size 5");
    EXPECT_EQ(scatterFailure(opcode, -5, 3, 2, 5, true), "no exception");  // wrap=1: the first row
    EXPECT_EQ(scatterFailure(opcode, std::numeric_limits<int64_t>::min(), 200000, 399999),
              "index -9223372036854775808 is out of bounds for dimension 0 with size 5");
    // From a chunk on another core (64 positions): the exception comes back to the caller.
    EXPECT_EQ(scatterFailure(opcode, 5, 4000, 4000 * 64 - 1, 5, false, 64),
              "index 5 is out of bounds for dimension 0 with size 5");
  }
}

TEST(Scatter, AnIndexOutOfBoundsFailsTheStreamUntilReported) {
  Stream stream;
  std::vector<float> in = {10, 11, 12}, out(4, 0.0f);
  std::vector<int64_t> index = {3, 4, 0};  // 4 is past the end
  Instruction scatter;
  scatter.opcode = Opcode::kScatterAdd;
  scatter.operands = {isa::contiguousOperand(0, DType::kFloat32, {4}), isa::contiguousOperand(1, DType::kFloat32, {3}),
                      isa::contiguousOperand(2, DType::kInt64, {3})};
  const std::vector<void*> buffers = {out.data(), in.data(), index.data()};
  const std::vector<uint64_t> bytes = {16, 12, 24};
  ASSERT_PTO_OK(launchInstruction(stream.get(), scatter, buffers, bytes));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, "tscatteradd")) << message;
  EXPECT_TRUE(contains(message, "index 4 is out of bounds for dimension 0 with size 4")) << message;
  index[1] = 3;
  std::fill(out.begin(), out.end(), 0.0f);
  ASSERT_PTO_OK(launchInstruction(stream.get(), scatter, buffers, bytes));
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(out, (std::vector<float>{12, 0, 0, 21}));
}

// twrapindex over `values` of T with `extent`: the wrapped indices, or the failure's message.
template <typename T>
std::string wrapIndices(const std::vector<T>& values, double extent, int64_t stride = 1) {
  const auto count = static_cast<int64_t>(values.size());
  int64_t elements = 0;
  const Operand in = view(1, kernels::dtypeOf<T>(), {count}, {stride}, 0, &elements);
  std::vector<Bytes> memory = {Bytes(values.size() * 8), bufferFor(in, elements)};
  for (int64_t i = 0; i < count; ++i) {
    writeValue(reinterpret_cast<char*>(memory[1].data()) + (in.offset + i * stride) * sizeof(T), values[i]);
  }
  Instruction instruction;
  instruction.opcode = Opcode::kWrapIndex;
  instruction.operands = {isa::contiguousOperand(0, DType::kInt64, {count}), in};
  instruction.immediates = {extent, 2};
  try {
    verifyAndRun(instruction, memory);
  } catch (const std::out_of_range& error) {
    return error.what();
  }
  std::ostringstream text;
  for (int64_t i = 0; i < count; ++i) {
    int64_t value = 0;
    std::memcpy(&value, memory[0].data() + i * 8, 8);
    text << (i ? " " : "") << value;
  }
  return text.str();
}

TEST(WrapIndex, NegativeIndicesCountFromTheEnd) {
  EXPECT_EQ(wrapIndices<int64_t>({0, 4, -1, -5, 2}, 5), "0 4 4 0 2");
  EXPECT_EQ(wrapIndices<int32_t>({-3, 1, 2}, 3, -2), "0 1 2");  // read backwards, as a flipped index is
  EXPECT_EQ(wrapIndices<uint8_t>({255, 0}, 256), "255 0");
  EXPECT_EQ(wrapIndices<int64_t>({}, 0), "");
  EXPECT_EQ(wrapIndices<int64_t>({0, 5}, 5), "index 5 is out of bounds for dimension 2 with size 5");
  EXPECT_EQ(wrapIndices<int16_t>({-6}, 5), "index -6 is out of bounds for dimension 2 with size 5");
  EXPECT_EQ(wrapIndices<int64_t>({0}, 0), "index 0 is out of bounds for dimension 2 with size 0");
  std::vector<int64_t> many(300000, -1);
  many[250000] = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(wrapIndices<int64_t>(many, 7), "index -9223372036854775808 is out of bounds for dimension 2 with size 7");
}

// tnonzero of `in` against the reference: every element in row-major order, nonzero (NaN too) ones kept.
template <typename T>
void runNonzero(const std::vector<int64_t>& shape, Layout layout, uint64_t seed) {
  SCOPED_TRACE("tnonzero " + typeName<T>() + " " + shapeText(shape) + " " + layoutName(layout));
  int64_t elements = 0;
  const Operand in = makeOperand(1, kernels::dtypeOf<T>(), shape, layout, &elements);
  Bytes input = bufferFor(in, elements);
  std::mt19937_64 rng(seed);
  fillSlots<T>(input, [&] { return rng() % 3 ? refCast<T>(0.0) : poolValue<T>(rng); });
  std::vector<int64_t> expected;
  int64_t rows = 0;
  forEachIndex(in, [&](const Index& at) {
    if (refLoad<T>(elementAt(input, in, at)) == ComputeType<T>(0)) return;  // NaN != 0: kept
    expected.insert(expected.end(), at.begin(), at.begin() + in.rank);
    ++rows;
  });
  const auto rank = static_cast<int64_t>(shape.size());
  int64_t out_elements = 0;
  // Column-major, one element in.
  const Operand out = view(0, DType::kInt64, {rows, rank}, {1, std::max<int64_t>(rows, 1)}, 1, &out_elements);
  std::vector<Bytes> memory = {bufferFor(out, out_elements), input};
  Instruction instruction;
  instruction.opcode = Opcode::kNonzero;
  instruction.operands = {out, in};
  const Bytes before = memory[0];
  verifyAndRun(instruction, memory);
  std::vector<int64_t> got;
  forEachIndex(out, [&](const Index& at) {
    int64_t value = 0;
    std::memcpy(&value, elementAt(memory[0], out, at), 8);
    got.push_back(value);
  });
  EXPECT_EQ(got, expected);
  EXPECT_TRUE(gapsUntouched(before, memory[0], out));
  // Another row count fails before anything is written.
  instruction.operands[0].shape[0] = rows + 1;
  memory[0] = Bytes(static_cast<size_t>(rows + 2) * static_cast<size_t>(rank + 1) * 8, 0xa5);
  instruction.operands[0].strides = {1, rows + 1};
  const Bytes untouched = memory[0];
  std::vector<void*> buffers = {memory[0].data(), memory[1].data()};
  EXPECT_THROW(kernels::execute(instruction, buffers), std::length_error);
  EXPECT_EQ(memory[0], untouched);
}

TEST(Nonzero, EachShapeDTypeAndLayout) {
  const std::vector<std::pair<std::vector<int64_t>, Layout>> cases = {
      {{5, 6, 7}, L::kContiguous}, {{5, 6, 7}, L::kTransposed}, {{4, 9}, L::kReversed}, {{4, 9}, L::kBroadcastOuter},
      {{3, 2, 2, 5}, L::kPadded}, {{17}, L::kReversedInner},    {{0, 4}, L::kContiguous}, {{}, L::kContiguous},
      {{600, 300}, L::kTransposed},  // 180000 elements: chunks on several cores
  };
  uint64_t seed = 7000;
  for (const auto& [shape, layout] : cases) {
    runNonzero<float>(shape, layout, seed++);
    runNonzero<Half>(shape, layout, seed++);
    runNonzero<int32_t>(shape, layout, seed++);
    runNonzero<bool>(shape, layout, seed++);
    runNonzero<double>(shape, layout, seed++);
    if (::testing::Test::HasFailure()) return;
  }
}

// ---------------------------------------------------------------------------
// Iota.
// ---------------------------------------------------------------------------

// tiota into `count` elements of T `stride` apart (negative: backwards from the buffer's end).
template <typename T>
std::vector<T> iota(double start, double step, int64_t count, int64_t stride = 1) {
  int64_t elements = 0;
  const Operand out = view(0, kernels::dtypeOf<T>(), {count}, {stride}, 1, &elements);
  std::vector<Bytes> memory = {bufferFor(out, elements + 1)};
  Instruction instruction;
  instruction.opcode = Opcode::kIota;
  instruction.operands = {out};
  instruction.immediates = {start, step};
  const Bytes before = memory[0];
  verifyAndRun(instruction, memory);
  EXPECT_TRUE(gapsUntouched(before, memory[0], out));
  std::vector<T> values;
  forEachIndex(out, [&](const Index& index) {
    T value;
    std::memcpy(&value, elementAt(memory[0], out, index), sizeof value);
    values.push_back(value);
  });
  return values;
}

TEST(Iota, Ranges) {
  EXPECT_EQ(iota<int64_t>(10, -3, 5), (std::vector<int64_t>{10, 7, 4, 1, -2}));
  EXPECT_EQ(iota<int64_t>(-4, -1, 3, -2), (std::vector<int64_t>{-4, -5, -6}));  // written backwards
  EXPECT_EQ(iota<int64_t>(0x1p40, 0x1p33, 3), (std::vector<int64_t>{int64_t{1} << 40, (int64_t{1} << 40) + (int64_t{1} << 33),
                                                                    (int64_t{1} << 40) + (int64_t{2} << 33)}));
  EXPECT_EQ(iota<int32_t>(-3, 2, 4, 3), (std::vector<int32_t>{-3, -1, 1, 3}));
  EXPECT_EQ(iota<int8_t>(5, 0, 3), (std::vector<int8_t>{5, 5, 5}));
  EXPECT_TRUE(iota<int64_t>(1, 1, 0).empty());
  EXPECT_EQ(iota<float>(0.5, 0.25, 5), (std::vector<float>{0.5f, 0.75f, 1.0f, 1.25f, 1.5f}));
  EXPECT_EQ(iota<double>(1, -0.5, 4, -1), (std::vector<double>{1, 0.5, 0, -0.5}));
  // Each element is start + i * step in double, rounded once: no drift from repeated additions.
  const auto tenths = iota<float>(1, 0.1, 100);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(tenths[i], static_cast<float>(1 + i * 0.1)) << i;
  const auto halves = iota<Half>(-1, 0.1, 21);
  for (int i = 0; i < 21; ++i) ASSERT_EQ(halves[i].bits, kernels::toHalf(static_cast<float>(-1 + i * 0.1)).bits) << i;
}

// ---------------------------------------------------------------------------
// Sorting: targsort against std::stable_sort of each line; ttopk's picks against
// the first k of that order (which of several equal values it picks is torch's
// business: tests/python/test_sort_scan.py compares it with torch.topk).
// ---------------------------------------------------------------------------

struct SortCase {
  std::vector<int64_t> shape;
  int axis;
  Layout in = Layout::kContiguous, out = Layout::kContiguous;
  int64_t k = -1;  // ttopk's count; -1: targsort

  std::vector<int64_t> outShape() const {
    std::vector<int64_t> out_shape = shape;
    if (k >= 0 && !shape.empty()) out_shape[axis] = k;
    return out_shape;
  }
};

template <typename C>
bool isNaNValue(C x) {
  if constexpr (std::is_floating_point_v<C>) return std::isnan(x);
  else return false;
}

// PyTorch's order: NaN after every number, ascending; before every number, descending.
template <typename C>
bool sortsBefore(C a, C b, bool descending) {
  const bool a_nan = isNaNValue(a), b_nan = isNaNValue(b);
  return descending ? (a_nan && !b_nan) || a > b : (!a_nan && b_nan) || a < b;
}

template <typename C>
bool sameValue(C a, C b) {
  return (isNaNValue(a) && isNaNValue(b)) || a == b;  // -0.0 == 0.0: sorting does not tell them apart
}

// `pool`: values from poolValue (ties, NaNs, infinities, signed zeros), else randomValue.
template <typename T>
void runSort(const SortCase& c, bool descending, bool pool, uint64_t seed) {
  const bool topk = c.k >= 0;
  SCOPED_TRACE(std::string(topk ? "ttopk k=" + std::to_string(c.k) : "targsort") + " " + typeName<T>() + " " +
               shapeText(c.shape) + " axis=" + std::to_string(c.axis) + (descending ? " descending" : "") + " in " +
               layoutName(c.in) + ", out " + layoutName(c.out) + (pool ? ", pooled values" : ""));
  int64_t elements[2] = {};
  const Operand out = makeOperand(0, DType::kInt64, c.outShape(), c.out, &elements[0]);
  const Operand in = makeOperand(1, kernels::dtypeOf<T>(), c.shape, c.in, &elements[1]);
  std::vector<Bytes> memory = {bufferFor(out, elements[0]), bufferFor(in, elements[1])};
  std::mt19937_64 rng(seed);
  fillSlots<T>(memory[1], [&] { return pool ? poolValue<T>(rng) : randomValue<T>(rng); });
  Instruction instruction;
  instruction.opcode = topk ? Opcode::kTopk : Opcode::kArgsort;
  instruction.operands = {out, in};
  instruction.immediates = {static_cast<double>(c.axis), descending ? 1.0 : 0.0};
  const Bytes before = memory[0];
  verifyAndRun(instruction, memory);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_TRUE(gapsUntouched(before, memory[0], out));

  const bool scalar = c.shape.empty();
  const int64_t n = scalar ? 1 : c.shape[c.axis];
  const int64_t selected = scalar ? 1 : out.shape[c.axis];
  Operand lines = out;  // one index per line: the axis collapsed
  if (!scalar) lines.shape[c.axis] = 1;
  forEachIndex(lines, [&](const Index& line) {
    if (::testing::Test::HasFailure()) return;
    std::vector<ComputeType<T>> values;
    for (int64_t i = 0; i < n; ++i) {
      Index at = line;
      if (!scalar) at[c.axis] = i;
      values.push_back(refLoad<T>(elementAt(memory[1], in, at)));
    }
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return sortsBefore(values[a], values[b], descending);
    });
    std::vector<bool> picked(static_cast<size_t>(n), false);
    for (int64_t j = 0; j < selected; ++j) {
      Index at = line;
      if (!scalar) at[c.axis] = j;
      int64_t got = 0;
      std::memcpy(&got, elementAt(memory[0], out, at), sizeof got);
      if (!topk) {
        ASSERT_EQ(got, order[j]) << "position " << j << " of line " << elementOf(lines, line);
        continue;
      }
      ASSERT_TRUE(got >= 0 && got < n && !picked[got]) << "pick " << j << " is " << got;
      picked[got] = true;
      EXPECT_TRUE(sameValue(values[got], values[order[j]]))
          << "pick " << j << " of line " << elementOf(lines, line) << " is element " << got << ", which is "
          << static_cast<double>(values[got]) << ", not " << static_cast<double>(values[order[j]]);
    }
  });
}

TEST(Sort, ArgsortEachAxisDTypeAndLayout) {
  const std::vector<SortCase> cases = {
      {{5, 6, 7}, 0},
      {{5, 6, 7}, 1, L::kTransposed, L::kPadded},
      {{5, 6, 7}, 2, L::kReversed, L::kTransposed},
      {{4, 9}, 1, L::kBroadcastInner},                // one value repeated along each line: all ties
      {{4, 9}, 0, L::kBroadcastOuter, L::kReversed},
      {{300, 3}, 0, L::kPadded},                      // long strided lines: the radix sort
      {{2, 1000}, 1, L::kReversedInner, L::kTransposed},
      {{}, 0},
      {{1}, 0},
      {{0, 4}, 1},
      {{3, 0}, 1},
  };
  uint64_t seed = 7000;
  for (const SortCase& c : cases) {
    forEachType([&]<typename T>() {
      for (bool descending : {false, true}) {
        for (bool pool : {false, true}) runSort<T>(c, descending, pool, seed++);
      }
    });
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(Sort, ArgsortLargeParallel) {
  runSort<float>({{2000, 300}, 1}, false, false, 71);  // 600000 elements, radix-sorted lines on every core
  runSort<BFloat16>({{400, 500}, 0, L::kTransposed}, true, true, 72);
  runSort<int64_t>({{20000}, 0, L::kReversed}, false, false, 73);  // one long line of 8-byte keys
}

TEST(Sort, TopkEachAxisDTypeAndK) {
  const std::vector<SortCase> cases = {
      {{5, 10, 5}, 1, L::kContiguous, L::kContiguous, 3},
      {{5, 10, 5}, 0, L::kTransposed, L::kPadded, 5},   // the whole line
      {{5, 10, 5}, 2, L::kReversed, L::kTransposed, 1},
      {{2, 1000}, 1, L::kContiguous, L::kContiguous, 5},  // k * 64 <= n: the partial sort
      {{1000, 2}, 0, L::kPadded, L::kReversed, 600},      // else nth_element and a sort
      {{4, 9}, 1, L::kBroadcastInner, L::kContiguous, 4},
      {{5, 6}, 0, L::kContiguous, L::kContiguous, 0},
      {{}, 0, L::kContiguous, L::kContiguous, 1},
      {{0, 6}, 1, L::kContiguous, L::kContiguous, 2},
  };
  uint64_t seed = 8000;
  for (const SortCase& c : cases) {
    forEachType([&]<typename T>() {
      if constexpr (!std::is_same_v<T, bool>) {
        for (bool largest : {false, true}) {
          for (bool pool : {false, true}) runSort<T>(c, largest, pool, seed++);
        }
      }
    });
    if (::testing::Test::HasFailure()) return;
  }
  runSort<float>({{3000, 200}, 1, L::kContiguous, L::kContiguous, 7}, true, false, 81);  // parallel
}

TEST(Sort, KnownOrders) {
  // NaN last ascending and first descending; -0.0 and 0.0 tie, and ties keep their order.
  const std::vector<float> in = {2.0f, kNaNF, -0.0f, 1.0f, 0.0f, -kInfF, kNaNF, 1.0f};
  auto sorted = [&](Opcode opcode, bool flag, int64_t count) {
    std::vector<int64_t> out(static_cast<size_t>(count));
    Instruction sort;
    sort.opcode = opcode;
    sort.operands = {isa::contiguousOperand(0, DType::kInt64, {count}), isa::contiguousOperand(1, DType::kFloat32, {8})};
    sort.immediates = {0, flag ? 1.0 : 0.0};
    std::vector<void*> buffers = {out.data(), const_cast<float*>(in.data())};
    kernels::execute(sort, buffers);
    return out;
  };
  EXPECT_EQ(sorted(Opcode::kArgsort, false, 8), (std::vector<int64_t>{5, 2, 4, 3, 7, 0, 1, 6}));
  EXPECT_EQ(sorted(Opcode::kArgsort, true, 8), (std::vector<int64_t>{1, 6, 0, 3, 7, 2, 4, 5}));
  // ttopk: the two NaNs, then 2.0; -inf, then either zero.
  const std::vector<int64_t> largest = sorted(Opcode::kTopk, true, 3);
  EXPECT_TRUE((largest == std::vector<int64_t>{1, 6, 0} || largest == std::vector<int64_t>{6, 1, 0}));
  const std::vector<int64_t> smallest = sorted(Opcode::kTopk, false, 2);
  EXPECT_EQ(smallest[0], 5);
  EXPECT_TRUE(smallest[1] == 2 || smallest[1] == 4) << smallest[1];
}

// ---------------------------------------------------------------------------
// Scans: tcumsum and tcumprod against a running fold in PyTorch's accumulator
// types (double for float32/float64, float for float16/bfloat16, wrapping 64-bit
// integers), bit for bit.
// ---------------------------------------------------------------------------

template <typename T>
using ScanAccumulator = std::conditional_t<std::is_integral_v<T>, uint64_t,
                                           std::conditional_t<kIsFloat<T> && sizeof(T) == 2, float, double>>;

struct ScanCase {
  std::vector<int64_t> shape;
  int axis;
  Layout in = Layout::kContiguous, out = Layout::kContiguous;
};

template <typename T>
void runScan(Opcode op, const ScanCase& c, uint64_t seed, bool in_place = false) {
  SCOPED_TRACE(std::string(isa::info(op).name) + " " + typeName<T>() + " " + shapeText(c.shape) + " axis=" +
               std::to_string(c.axis) + " in " + layoutName(c.in) + ", out " + layoutName(c.out) +
               (in_place ? ", in place" : ""));
  using Acc = ScanAccumulator<T>;
  int64_t elements[2] = {};
  const Operand out = makeOperand(0, kernels::dtypeOf<T>(), c.shape, c.out, &elements[0]);
  Operand in = makeOperand(1, kernels::dtypeOf<T>(), c.shape, c.in, &elements[1]);
  std::vector<Bytes> memory = {bufferFor(out, elements[0]), bufferFor(in, elements[1])};
  std::mt19937_64 rng(seed);
  // Products of values near 1 stay finite along long lines; sums take anything.
  fillSlots<T>(memory[1], [&] {
    return op == Opcode::kCumprod && kIsFloat<T> ? uniformValue<T>(rng, 0.5, 1.5) : reduceInput<T>(rng, true);
  });
  const Bytes input = memory[1];
  if (in_place) {
    in = out;
    memory[0] = memory[1];
  }
  Instruction instruction;
  instruction.opcode = op;
  instruction.operands = {out, in};
  instruction.immediates[0] = c.axis;
  const Bytes before = memory[0];
  verifyAndRun(instruction, memory);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_TRUE(gapsUntouched(before, memory[0], out));

  const bool scalar = c.shape.empty();
  const int64_t n = scalar ? 1 : c.shape[c.axis];
  Operand lines = out;
  if (!scalar) lines.shape[c.axis] = 1;
  const Operand& source = in_place ? out : in;
  Bytes original = input;
  forEachIndex(lines, [&](const Index& line) {
    if (::testing::Test::HasFailure()) return;
    Acc acc = op == Opcode::kCumsum ? Acc(0) : Acc(1);
    for (int64_t i = 0; i < n; ++i) {
      Index at = line;
      if (!scalar) at[c.axis] = i;
      const auto x = refLoad<T>(elementAt(original, source, at));
      Acc value;
      if constexpr (std::is_integral_v<T>) value = static_cast<uint64_t>(static_cast<int64_t>(x));
      else value = static_cast<Acc>(x);
      acc = op == Opcode::kCumsum ? acc + value : acc * value;
      T want;
      if constexpr (std::is_integral_v<T>) want = refCast<T>(static_cast<int64_t>(acc));
      else want = refCast<T>(acc);
      const char* got = elementAt(memory[0], out, at);
      ASSERT_TRUE(elementsEqual<T>(got, reinterpret_cast<const char*>(&want)))
          << "element " << i << " of line " << elementOf(lines, line) << ": expected "
          << elementText<T>(reinterpret_cast<const char*>(&want)) << ", got " << elementText<T>(got);
    }
  });
}

TEST(Scan, EveryOpcodeDTypeAndLayout) {
  const std::vector<ScanCase> cases = {
      {{5, 6, 7}, 0},                                     // blocks of neighbouring lines
      {{5, 6, 7}, 2},                                     // whole lines
      {{5, 6, 7}, 1, L::kTransposed, L::kPadded},
      {{5, 6, 7}, 2, L::kReversed, L::kTransposed},
      {{5, 6, 7}, 0, L::kBroadcastOuter, L::kReversedInner},
      {{4, 9}, 1, L::kBroadcastInner},
      {{4, 9}, 0, L::kBroadcastAll, L::kTransposed},
      {{3, 1, 4}, 1},
      {{2, 600}, 0, L::kPadded},                          // a row wider than a block of accumulators
      {{}, 0},
      {{0, 5}, 0},
      {{5, 0}, 0},
  };
  uint64_t seed = 9000;
  for (Opcode op : {Opcode::kCumsum, Opcode::kCumprod}) {
    for (const ScanCase& c : cases) {
      forEachType([&]<typename T>() {
        if constexpr (!std::is_same_v<T, bool>) runScan<T>(op, c, seed++);
      });
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(Scan, LargeParallelAndInPlace) {
  runScan<float>(Opcode::kCumsum, {{600, 700}, 0}, 91);                  // row by row, blocks on every core
  runScan<float>(Opcode::kCumsum, {{700, 600}, 1}, 92);                  // line by line on every core
  runScan<double>(Opcode::kCumprod, {{600, 700}, 0, L::kTransposed, L::kTransposed}, 93);
  runScan<Half>(Opcode::kCumsum, {{300, 400}, 1, L::kReversed, L::kPadded}, 94);
  runScan<int32_t>(Opcode::kCumsum, {{600, 700}, 0}, 95, true);
  runScan<float>(Opcode::kCumprod, {{600, 700}, 1}, 96, true);
}

TEST(Scan, KnownValues) {
  // float32 accumulates in double, as PyTorch's CPU does: the ones are not lost.
  std::vector<float> in(101, 1.0f), out(101);
  in[0] = 1e8f;
  Instruction cumsum;
  cumsum.opcode = Opcode::kCumsum;
  cumsum.operands = {isa::contiguousOperand(0, DType::kFloat32, {101}), isa::contiguousOperand(1, DType::kFloat32, {101})};
  std::vector<void*> buffers = {out.data(), in.data()};
  kernels::execute(cumsum, buffers);
  EXPECT_EQ(out.back(), 100000096.0f);
  // int8 wraps: 100 + 100 and 100 * 100.
  std::vector<int8_t> small = {100, 100}, result(2);
  Instruction scan;
  scan.opcode = Opcode::kCumsum;
  scan.operands = {isa::contiguousOperand(0, DType::kInt8, {2}), isa::contiguousOperand(1, DType::kInt8, {2})};
  buffers = {result.data(), small.data()};
  kernels::execute(scan, buffers);
  EXPECT_EQ(result, (std::vector<int8_t>{100, -56}));
  scan.opcode = Opcode::kCumprod;
  kernels::execute(scan, buffers);
  EXPECT_EQ(result, (std::vector<int8_t>{100, 16}));
}

}  // namespace
