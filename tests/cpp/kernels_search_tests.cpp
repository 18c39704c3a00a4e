// tsearchsorted against std::partition_point over each sorted line: lines of every
// numeric dtype holding ties, signed zeros and infinities; values that are NaN, equal
// to an element, beyond either end; lines shared by every value (stride 0), one line
// per row of values, transposed, reversed and padded layouts; empty lines; lines long
// enough to be searched with prefetches; and enough values to split over the cores. (How an unsorted line or one holding NaN answers is
// PyTorch's halving, checked against the CPU's results by tests/python.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "isa/program.h"
#include "kernels_test_support.h"
#include "runtime/sim/kernels/element_types.h"

namespace {

using namespace pto;
using namespace pto_test;  // DType, Operand, Half, BFloat16, ComputeType and the reference's helpers
namespace kernels = rt::sim::kernels;
using isa::Instruction;
using isa::Opcode;
using Index = std::array<int64_t, isa::kMaxRank>;
using L = Layout;

struct SearchCase {
  std::vector<int64_t> values_shape;  // the output's too
  int64_t length;                     // of each sorted line
  bool shared_line;                   // one line for every value (stride 0), else one per row of values
  Layout values_layout, lines_layout;
};

// A sorted line of T: values from T's pool and a few random ones, so that lines hold
// ties, signed zeros and infinities (no NaN: a line holding one is not sorted).
template <typename T>
std::vector<ComputeType<T>> sortedLine(std::mt19937_64& rng, int64_t length) {
  std::vector<ComputeType<T>> line;
  while (static_cast<int64_t>(line.size()) < length) {
    const T value = rng() % 2 ? poolValue<T>(rng) : randomValue<T>(rng);
    const ComputeType<T> widened = kernels::widen(value);
    if (widened == widened) line.push_back(widened);
  }
  std::sort(line.begin(), line.end());
  return line;
}

template <typename T>
void runSearch(const SearchCase& c, bool right, uint64_t seed) {
  SCOPED_TRACE("tsearchsorted " + typeName<T>() + " right=" + std::to_string(right) + " lines of " +
               std::to_string(c.length) + (c.shared_line ? " shared" : " per row") + ", values " +
               layoutName(c.values_layout) + ", lines " + layoutName(c.lines_layout));
  const DType dtype = kernels::dtypeOf<T>();
  const int rank = static_cast<int>(c.values_shape.size());
  std::vector<int64_t> lines_shape(c.values_shape);
  lines_shape.back() = c.length;
  if (c.shared_line) {
    for (int d = 0; d + 1 < rank; ++d) lines_shape[d] = 1;
  }
  int64_t out_elements = 0, lines_elements = 0, values_elements = 0;
  const Operand out = makeOperand(0, DType::kInt64, c.values_shape, L::kContiguous, &out_elements);
  Operand lines = makeOperand(1, dtype, lines_shape, c.lines_layout, &lines_elements);
  const Operand values = makeOperand(2, dtype, c.values_shape, c.values_layout, &values_elements);
  std::vector<Bytes> memory = {Bytes(static_cast<size_t>(out_elements) * 8, 0xa5),
                               Bytes(static_cast<size_t>(std::max<int64_t>(lines_elements, 1)) * sizeof(T), 0xa5),
                               Bytes(static_cast<size_t>(values_elements) * sizeof(T), 0xa5)};
  std::mt19937_64 rng(seed);
  // Each line's elements in order, and its values: pool and random ones, some equal to a line's elements.
  const auto row_of = [&](const Index& at) {
    int64_t row = 0;
    for (int d = 0; d + 1 < rank; ++d) row = row * lines_shape[d] + (c.shared_line ? 0 : at[d]);
    return static_cast<size_t>(row);
  };
  int64_t rows = 1;
  for (int d = 0; d + 1 < rank; ++d) rows *= lines_shape[d];
  std::vector<std::vector<ComputeType<T>>> sorted;
  for (int64_t row = 0; row < rows; ++row) sorted.push_back(sortedLine<T>(rng, c.length));
  forEachIndex(lines, [&](const Index& at) {
    const ComputeType<T> element = sorted[row_of(at)][static_cast<size_t>(at[rank - 1])];
    writeValue(reinterpret_cast<char*>(memory[1].data()) + elementOf(lines, at) * sizeof(T), refCast<T>(element));
  });
  const auto line_of = [&](const Index& at) -> const std::vector<ComputeType<T>>& { return sorted[row_of(at)]; };
  forEachIndex(values, [&](const Index& at) {
    const auto& line = line_of(at);
    const T value = rng() % 3 == 0 && !line.empty() ? refCast<T>(line[rng() % line.size()])
                                                    : (rng() % 2 ? poolValue<T>(rng) : randomValue<T>(rng));
    writeValue(reinterpret_cast<char*>(memory[2].data()) + elementOf(values, at) * sizeof(T), value);
  });
  if (c.shared_line) {  // one line seen at every row of values
    for (int d = 0; d + 1 < rank; ++d) {
      lines.shape[d] = c.values_shape[d];
      lines.strides[d] = 0;
    }
  }
  Instruction instruction;
  instruction.opcode = Opcode::kSearchSorted;
  instruction.operands = {out, lines, values};
  instruction.immediates[0] = right ? 1.0 : 0.0;
  verifyAndRun(instruction, memory);
  int mismatches = 0;
  forEachIndex(out, [&](const Index& at) {
    const auto& line = line_of(at);
    const ComputeType<T> value = refLoad<T>(reinterpret_cast<const char*>(memory[2].data()) + elementOf(values, at) * sizeof(T));
    const auto before = [&](ComputeType<T> element) { return right ? !(element > value) : !(element >= value); };
    const int64_t want = std::partition_point(line.begin(), line.end(), before) - line.begin();
    int64_t got = 0;
    std::memcpy(&got, memory[0].data() + elementOf(out, at) * 8, 8);
    if (got != want && ++mismatches <= 5) {
      ADD_FAILURE() << "value " << elementText<T>(reinterpret_cast<const char*>(memory[2].data()) +
                                                  elementOf(values, at) * sizeof(T))
                    << ": position " << got << ", want " << want;
    }
  });
  EXPECT_EQ(mismatches, 0);
}

TEST(SearchSorted, EveryDTypeLayoutAndSide) {
  const std::vector<SearchCase> cases = {
      {{40}, 17, true, L::kContiguous, L::kContiguous},
      {{6, 9}, 5, true, L::kTransposed, L::kContiguous},
      {{6, 9}, 8, false, L::kContiguous, L::kContiguous},
      {{5, 7}, 12, false, L::kReversed, L::kTransposed},
      {{2, 3, 11}, 4, false, L::kPadded, L::kReversedInner},
      {{3, 4}, 1, false, L::kBroadcastOuter, L::kPadded},
      {{4, 6}, 0, false, L::kContiguous, L::kContiguous},  // empty lines: every position 0
      {{0, 5}, 3, false, L::kContiguous, L::kContiguous},
      {{300, 700}, 1000, true, L::kTransposed, L::kContiguous},  // 210000 searches: over the cores
      {{500, 300}, 64, false, L::kContiguous, L::kContiguous},
      {{3000}, 400000, true, L::kContiguous, L::kReversedInner},  // a line beyond the L2: prefetched
  };
  uint64_t seed = 9100;
  for (const SearchCase& c : cases) {
    for (bool right : {false, true}) {
      runSearch<float>(c, right, seed++);
      runSearch<double>(c, right, seed++);
      runSearch<Half>(c, right, seed++);
      runSearch<BFloat16>(c, right, seed++);
      runSearch<int64_t>(c, right, seed++);
      runSearch<int32_t>(c, right, seed++);
      runSearch<uint8_t>(c, right, seed++);
      runSearch<int8_t>(c, right, seed++);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

}  // namespace
