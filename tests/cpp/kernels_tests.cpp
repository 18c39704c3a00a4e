// The elementwise kernels' layouts (csrc/runtime/sim/kernels): every family against a
// naive N-d reference loop written here, for each dtype an instruction takes and for
// contiguous, transposed, broadcast, scalar, reversed, padded (unmergeable), empty and
// large (parallel) layouts. The loop computes each element through the per-op
// functions of elementwise_ops.h, which the kernels' scalar paths call too, so it
// checks where elements go, not their values: elementwise_reference_tests.cpp checks
// the arithmetic against formulas written apart from the kernels. Also the
// float16/bfloat16 conversions of half.h and the strided loop's dimension merging and
// work split.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "isa/program.h"
#include "runtime/sim/host_caches.h"
#include "runtime/sim/kernels/element_types.h"
#include "runtime/sim/kernels/elementwise_ops.h"
#include "runtime/sim/kernels/execute.h"
#include "runtime/sim/kernels/stream_copy.h"
#include "runtime/sim/kernels/half.h"
#include "runtime/sim/kernels/strided_loop.h"
#include "kernels_test_support.h"

namespace {

using namespace pto;
namespace kernels = rt::sim::kernels;  // the sim driver's instruction kernels
using isa::DType;
using isa::Group;
using isa::Instruction;
using isa::Opcode;
using isa::Operand;
using kernels::BFloat16;
using kernels::ComputeType;
using kernels::Half;
using namespace pto_test;  // the reference, operands and random values (kernels_test_support.h)

constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr float kNaNF = std::numeric_limits<float>::quiet_NaN();

// ---------------------------------------------------------------------------
// half.h
// ---------------------------------------------------------------------------

uint16_t halfBits(float value) { return kernels::toHalf(value).bits; }
uint16_t bf16Bits(float value) { return kernels::toBFloat16(value).bits; }
float fromHalf(uint16_t bits) { return kernels::toFloat(Half{bits}); }
float fromBF16(uint16_t bits) { return kernels::toFloat(BFloat16{bits}); }

TEST(Half, ToHalfKnownBitPatterns) {
  EXPECT_EQ(halfBits(1.0f), 0x3c00);
  EXPECT_EQ(halfBits(-2.0f), 0xc000);
  EXPECT_EQ(halfBits(0.5f), 0x3800);
  EXPECT_EQ(halfBits(65504.0f), 0x7bff);             // the largest half
  EXPECT_EQ(halfBits(65519.99609375f), 0x7bff);      // just below the midpoint to infinity
  EXPECT_EQ(halfBits(65520.0f), 0x7c00);             // the midpoint: ties to even, which is infinity
  EXPECT_EQ(halfBits(-65520.0f), 0xfc00);
  EXPECT_EQ(halfBits(65536.0f), 0x7c00);
  EXPECT_EQ(halfBits(1e30f), 0x7c00);
  EXPECT_EQ(halfBits(kInfF), 0x7c00);
  EXPECT_EQ(halfBits(-kInfF), 0xfc00);
  EXPECT_EQ(halfBits(0x1p-14f), 0x0400);             // the smallest normal
  EXPECT_EQ(halfBits(0x1p-24f), 0x0001);             // the smallest subnormal
  EXPECT_EQ(halfBits(-0x1p-24f), 0x8001);
  EXPECT_EQ(halfBits(0x1p-25f), 0x0000);             // half of it: ties to even (0)
  EXPECT_EQ(halfBits(-0x1p-25f), 0x8000);
  EXPECT_EQ(halfBits(0x1.000002p-25f), 0x0001);      // just above half: rounds up
  EXPECT_EQ(halfBits(0x3p-25f), 0x0002);             // 1.5 ulp: ties to even (2)
  EXPECT_EQ(halfBits(1023 * 0x1p-24f), 0x03ff);      // the largest subnormal
  EXPECT_EQ(halfBits(0x1p-14f - 0x1p-25f), 0x0400);  // tie between 0x3ff and 0x400: even
  EXPECT_EQ(halfBits(1e-10f), 0x0000);
  EXPECT_EQ(halfBits(1.0f + 0x1p-11f), 0x3c00);      // tie: to even (down)
  EXPECT_EQ(halfBits(1.0f + 0x3p-11f), 0x3c02);      // tie: to even (up)
  EXPECT_EQ(halfBits(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  EXPECT_EQ(halfBits(2049.0f), 0x6800);              // 2048: tie to even
  EXPECT_EQ(halfBits(2051.0f), 0x6802);              // 2052
  EXPECT_EQ(halfBits(0.0f), 0x0000);
  EXPECT_EQ(halfBits(-0.0f), 0x8000);
  EXPECT_TRUE(halfIsNaN(halfBits(kNaNF)));
  EXPECT_TRUE(halfIsNaN(halfBits(-kNaNF)));
  EXPECT_TRUE(halfIsNaN(halfBits(std::bit_cast<float>(0x7f800001u))));  // a payload only in the low bits
  EXPECT_EQ(halfBits(-kNaNF) & 0x8000, 0x8000);      // the sign survives
}

TEST(Half, ToFloatKnownBitPatterns) {
  EXPECT_EQ(fromHalf(0x3c00), 1.0f);
  EXPECT_EQ(fromHalf(0xc000), -2.0f);
  EXPECT_EQ(fromHalf(0x7bff), 65504.0f);
  EXPECT_EQ(fromHalf(0x0001), 0x1p-24f);
  EXPECT_EQ(fromHalf(0x8001), -0x1p-24f);
  EXPECT_EQ(fromHalf(0x03ff), 1023 * 0x1p-24f);
  EXPECT_EQ(fromHalf(0x0400), 0x1p-14f);
  EXPECT_EQ(fromHalf(0x7c00), kInfF);
  EXPECT_EQ(fromHalf(0xfc00), -kInfF);
  EXPECT_TRUE(std::isnan(fromHalf(0x7e00)));
  EXPECT_TRUE(std::isnan(fromHalf(0x7c01)));
  EXPECT_TRUE(std::isnan(fromHalf(0xfe00)));
  EXPECT_EQ(std::bit_cast<uint32_t>(fromHalf(0x0000)), 0u);
  EXPECT_EQ(std::bit_cast<uint32_t>(fromHalf(0x8000)), 0x80000000u);  // -0.0
}

TEST(Half, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = fromHalf(h);
    if (halfIsNaN(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << bits;
      ASSERT_TRUE(halfIsNaN(halfBits(f))) << std::hex << bits;
    } else {
      ASSERT_EQ(halfBits(f), h) << std::hex << bits;
    }
  }
}

#if defined(__FLT16_MAX__)
TEST(Half, ToHalfMatchesTheCompilersFloat16) {
  // _Float16 conversions round to nearest even in hardware or libgcc: an independent reference.
  std::mt19937 rng(16);
  auto check = [](uint32_t bits) {
    const float f = std::bit_cast<float>(bits);
    const auto expected = std::bit_cast<uint16_t>(static_cast<_Float16>(f));
    const uint16_t actual = halfBits(f);
    if (std::isnan(f)) return halfIsNaN(actual);
    return actual == expected;
  };
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t bits = rng();
    ASSERT_TRUE(check(bits)) << std::hex << bits;
  }
  // Every float around each half's rounding midpoints.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const uint32_t mid = std::bit_cast<uint32_t>((fromHalf(static_cast<uint16_t>(h)) + fromHalf(static_cast<uint16_t>(h + 1))) / 2);
    for (uint32_t bits = mid - 2; bits <= mid + 2; ++bits) {
      ASSERT_TRUE(check(bits)) << std::hex << bits;
      ASSERT_TRUE(check(bits | 0x80000000u)) << std::hex << bits;
    }
  }
}
#endif

// Round to nearest even on the float's bits, written independently of half.h.
uint16_t referenceBF16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t upper = bits >> 16, lower = bits & 0xffffu;
  if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u))) return static_cast<uint16_t>(upper + 1);
  return static_cast<uint16_t>(upper);
}

TEST(BFloat16, KnownBitPatternsAndRounding) {
  EXPECT_EQ(bf16Bits(1.0f), 0x3f80);
  EXPECT_EQ(bf16Bits(-2.0f), 0xc000);
  EXPECT_EQ(bf16Bits(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie: to even (down)
  EXPECT_EQ(bf16Bits(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie: to even (up)
  EXPECT_EQ(bf16Bits(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(bf16Bits(std::bit_cast<float>(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(bf16Bits(std::numeric_limits<float>::max()), 0x7f80);  // rounds to infinity
  EXPECT_EQ(bf16Bits(kInfF), 0x7f80);
  EXPECT_EQ(bf16Bits(-kInfF), 0xff80);
  EXPECT_EQ(bf16Bits(-0.0f), 0x8000);
  EXPECT_EQ(bf16Bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_TRUE(bf16IsNaN(bf16Bits(kNaNF)));
  EXPECT_TRUE(bf16IsNaN(bf16Bits(-kNaNF)));
  EXPECT_TRUE(bf16IsNaN(bf16Bits(std::bit_cast<float>(0x7f800001u))));  // not infinity
  EXPECT_TRUE(bf16IsNaN(bf16Bits(std::bit_cast<float>(0xffffffffu))));  // not a carry into the sign
  EXPECT_EQ(fromBF16(0x3f80), 1.0f);
  EXPECT_EQ(fromBF16(0xff80), -kInfF);
  EXPECT_TRUE(std::isnan(fromBF16(0x7fc0)));
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    if (bf16IsNaN(b)) {
      ASSERT_TRUE(bf16IsNaN(bf16Bits(fromBF16(b))));
    } else {
      ASSERT_EQ(bf16Bits(fromBF16(b)), b) << std::hex << bits;
    }
  }
  std::mt19937 rng(32);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t bits = rng();
    const float f = std::bit_cast<float>(bits);
    if (std::isnan(f)) {
      ASSERT_TRUE(bf16IsNaN(bf16Bits(f))) << std::hex << bits;
    } else {
      ASSERT_EQ(bf16Bits(f), referenceBF16(f)) << std::hex << bits;
    }
  }
}


// One test case: an instruction over one buffer per operand, with random inputs.
struct Harness {
  Opcode opcode = Opcode::kMove;
  std::array<double, isa::kMaxImmediates> immediates{};
  std::vector<DType> dtypes;  // output first
  // Writes a random valid element of operand k (k >= 1) at p.
  std::function<void(int k, std::mt19937_64& rng, char* p)> random_input;
  // Computes the output element at p[0] from the inputs at p[1..].
  std::function<void(const std::array<char*, 4>& p)> reference;
  // Whether two output elements agree.
  bool (*equal)(const char*, const char*) = nullptr;
  std::string (*text)(const char*) = nullptr;
  std::string label;
};

void runCase(const Harness& h, const std::vector<int64_t>& shape, const std::vector<Layout>& layouts, uint64_t seed) {
  ASSERT_EQ(layouts.size(), h.dtypes.size());
  std::ostringstream description;
  description << h.label << " [";
  for (size_t d = 0; d < shape.size(); ++d) description << (d ? "," : "") << shape[d];
  description << "]";
  for (Layout layout : layouts) description << " " << layoutName(layout);
  SCOPED_TRACE(description.str());

  Instruction instruction;
  instruction.opcode = h.opcode;
  instruction.immediates = h.immediates;
  std::vector<std::vector<unsigned char>> memory;
  std::vector<uint64_t> bytes;
  for (size_t k = 0; k < h.dtypes.size(); ++k) {
    int64_t elements = 0;
    instruction.operands.push_back(makeOperand(static_cast<int32_t>(k), h.dtypes[k], shape, layouts[k], &elements));
    const size_t size = isa::dtypeSize(h.dtypes[k]);
    memory.emplace_back(static_cast<size_t>(std::max<int64_t>(elements, 1)) * size, 0xa5);  // the output's sentinel
    bytes.push_back(memory.back().size());
  }
  ASSERT_EQ(isa::verifyInstruction(instruction, bytes), "") << isa::print(instruction);
  std::mt19937_64 rng(seed);
  for (size_t k = 1; k < h.dtypes.size(); ++k) {
    const size_t size = isa::dtypeSize(h.dtypes[k]);
    for (size_t at = 0; at < memory[k].size(); at += size) {
      h.random_input(static_cast<int>(k), rng, reinterpret_cast<char*>(memory[k].data() + at));
    }
  }
  std::vector<unsigned char> expected = memory[0];
  const Operand& out = instruction.operands[0];
  const size_t out_size = isa::dtypeSize(out.dtype);
  forEachIndex(out, [&](const std::array<int64_t, isa::kMaxRank>& index) {
    std::array<char*, 4> p{};
    p[0] = reinterpret_cast<char*>(expected.data()) + elementOf(out, index) * static_cast<int64_t>(out_size);
    for (size_t k = 1; k < instruction.operands.size(); ++k) {
      const Operand& operand = instruction.operands[k];
      p[k] = reinterpret_cast<char*>(memory[k].data()) +
             elementOf(operand, index) * static_cast<int64_t>(isa::dtypeSize(operand.dtype));
    }
    h.reference(p);
  });

  std::vector<void*> buffers;
  for (auto& m : memory) buffers.push_back(m.data());
  kernels::execute(instruction, buffers);

  // Elements agree; the bytes between them are untouched.
  std::vector<bool> is_element(expected.size() / out_size, false);
  forEachIndex(out, [&](const std::array<int64_t, isa::kMaxRank>& index) { is_element[elementOf(out, index)] = true; });
  for (size_t e = 0; e < is_element.size(); ++e) {
    const char* want = reinterpret_cast<const char*>(expected.data() + e * out_size);
    const char* got = reinterpret_cast<const char*>(memory[0].data() + e * out_size);
    const bool same = is_element[e] ? h.equal(want, got) : std::memcmp(want, got, out_size) == 0;
    if (!same) {
      ADD_FAILURE() << (is_element[e] ? "element" : "untouched gap") << " at buffer element " << e
                    << ": expected " << h.text(want) << ", got " << h.text(got) << "\n"
                    << isa::print(instruction);
      return;
    }
  }
}


// Fills a harness's output comparison for type T.
template <typename T>
void setOutputType(Harness& h) {
  h.equal = &elementsEqual<T>;
  h.text = &elementText<T>;
}

// The instructions whose floating-point results come from vector math libraries
// (Sleef's functions, MKL's erf and erfc, the inline forms): a contiguous row takes
// the vector form, the reference the scalar one (Sleef's or libm's), so they agree
// within the functions' accuracy, not bit for bit.
constexpr bool computedByVectorMath(Opcode op) {
  switch (op) {
    case Opcode::kExp: case Opcode::kExp2: case Opcode::kExpm1: case Opcode::kLog: case Opcode::kLog2:
    case Opcode::kLog1p: case Opcode::kSin: case Opcode::kCos: case Opcode::kTan: case Opcode::kTanh:
    case Opcode::kErf: case Opcode::kErfc: case Opcode::kLog10: case Opcode::kAsin: case Opcode::kAcos:
    case Opcode::kAtan: case Opcode::kSinh: case Opcode::kCosh: case Opcode::kAsinh: case Opcode::kAcosh:
    case Opcode::kAtanh: case Opcode::kLgamma: case Opcode::kSigmoid: case Opcode::kSilu: case Opcode::kGelu: case Opcode::kGeluTanh:
    case Opcode::kPow: case Opcode::kGeluGrad: case Opcode::kGeluTanhGrad: case Opcode::kSiluGrad:
    case Opcode::kHypot: case Opcode::kElu: case Opcode::kSoftplus: case Opcode::kLogSigmoid:
    case Opcode::kLogAddExp: case Opcode::kLogAddExp2: case Opcode::kLogSigmoidGrad: case Opcode::kEluGrad:
    case Opcode::kSoftplusGrad: case Opcode::kMish: case Opcode::kMishGrad:
      return true;
    default:
      return false;
  }
}

template <Opcode op, typename T>
void setMathOutputType(Harness& h) {
  setOutputType<T>(h);
  if constexpr (kIsFloat<T> && computedByVectorMath(op)) h.equal = &elementsClose<T>;
}

// ---------------------------------------------------------------------------
// The cases every family runs.
// ---------------------------------------------------------------------------

struct ShapeCase {
  std::vector<int64_t> shape;
  std::vector<Layout> layouts;  // for the output, then each input (the last one repeats)
};

std::vector<Layout> layoutsFor(const ShapeCase& c, size_t operands) {
  std::vector<Layout> layouts = c.layouts;
  while (layouts.size() < operands) layouts.push_back(c.layouts.back());
  layouts.resize(operands);
  return layouts;
}

using L = Layout;

// Small cases: every layout, both inner fast paths, rank 0 and 8, size-1 and empty dims.
const std::vector<ShapeCase>& smallCases() {
  static const std::vector<ShapeCase> cases = {
      {{3, 5, 7}, {L::kContiguous, L::kContiguous}},
      {{3, 5, 7}, {L::kTransposed, L::kContiguous}},
      {{3, 5, 7}, {L::kContiguous, L::kContiguous, L::kBroadcastInner}},  // binary: b a scalar per row
      {{3, 5, 7}, {L::kContiguous, L::kBroadcastInner, L::kContiguous}},  // binary: a a scalar per row
      {{3, 5, 7}, {L::kContiguous, L::kBroadcastOuter}},
      {{3, 5, 7}, {L::kContiguous, L::kBroadcastAll, L::kContiguous, L::kBroadcastOuter}},
      {{}, {L::kContiguous, L::kContiguous}},
      {{}, {L::kContiguous, L::kBroadcastAll}},
      {{3, 5, 7}, {L::kContiguous, L::kReversed}},
      {{4, 6}, {L::kReversedInner, L::kTransposed, L::kReversed}},
      {{3, 5, 7}, {L::kPadded, L::kPadded, L::kTransposed}},
      {{2, 3, 4}, {L::kReversed, L::kPadded, L::kBroadcastInner, L::kReversedInner}},
      {{3, 0, 7}, {L::kContiguous, L::kContiguous}},
      {{0}, {L::kTransposed, L::kBroadcastAll}},
      {{1, 4, 1, 5}, {L::kContiguous, L::kBroadcastInner}},
      {{1, 1, 1}, {L::kPadded, L::kReversed}},
      {{37}, {L::kContiguous, L::kReversedInner, L::kContiguous}},
      {{2, 1, 2, 3, 1, 2, 2, 2}, {L::kTransposed, L::kReversed, L::kContiguous}},
      {{2, 2, 2, 2, 2, 2, 2, 3}, {L::kPadded, L::kContiguous, L::kBroadcastOuter}},
  };
  return cases;
}

// Large cases: over 2 * 32768 elements (kernels' parallel grain), so the work
// splits over the device's cores, in chunks that start and end inside rows.
const std::vector<ShapeCase>& largeCases() {
  static const std::vector<ShapeCase> cases = {
      {{300000}, {L::kContiguous, L::kContiguous, L::kBroadcastAll}},
      {{3, 300, 101}, {L::kContiguous, L::kTransposed, L::kReversedInner}},
      {{331, 229}, {L::kTransposed, L::kContiguous, L::kBroadcastOuter, L::kReversed}},
  };
  return cases;
}

void runCases(const Harness& h, const std::vector<ShapeCase>& cases, uint64_t seed) {
  for (const ShapeCase& c : cases) {
    runCase(h, c.shape, layoutsFor(c, h.dtypes.size()), seed++);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Calls fn.template operator()<Opcode::op>() for every opcode of `group` in the table.
template <Group group, typename Fn>
void forEachOpcode(Fn&& fn) {
#define PTO_INSTRUCTION(op, name, grp, inputs, dtypes, output, immediates, properties) \
  if constexpr (Group::grp == group) fn.template operator()<Opcode::op>();
#include "isa/instructions.def"
}

template <Opcode op, typename T>
constexpr bool accepts() {
  return isa::acceptedDTypes(op).contains(kernels::dtypeOf<T>());
}

// ---------------------------------------------------------------------------
// Unary.
// ---------------------------------------------------------------------------

template <Opcode op, typename T>
Harness unaryHarness() {
  using C = ComputeType<T>;
  Harness h;
  h.opcode = op;
  h.dtypes = {kernels::dtypeOf<T>(), kernels::dtypeOf<T>()};
  h.random_input = [](int, std::mt19937_64& rng, char* p) { writeValue(p, randomValue<T>(rng)); };
  h.reference = [](const std::array<char*, 4>& p) {
    refStore<T>(p[0], kernels::unaryOp<op, C>(refLoad<T>(p[1])));
  };
  setMathOutputType<op, T>(h);
  h.label = std::string(isa::info(op).name) + " " + typeName<T>();
  return h;
}

TEST(Kernels, UnaryEveryOpcodeAndDType) {
  int combinations = 0;
  forEachOpcode<Group::Unary>([&]<Opcode op>() {
    forEachType([&]<typename T>() {
      if constexpr (accepts<op, T>()) {
        runCases(unaryHarness<op, T>(), smallCases(), 1000 + combinations);
        ++combinations;
      }
    });
  });
  EXPECT_GT(combinations, 100);
}

TEST(Kernels, UnaryLarge) {
  runCases(unaryHarness<Opcode::kNeg, int8_t>(), largeCases(), 1);
  runCases(unaryHarness<Opcode::kExp, Half>(), largeCases(), 3);
  runCases(unaryHarness<Opcode::kSigmoid, double>(), largeCases(), 4);
}

TEST(Kernels, UnaryKnownValues) {
  // Wrap-around and the sign/relu/round conventions, on fixed inputs.
  const std::vector<int8_t> in = {-128, -1, 0, 1, 127};
  std::vector<int8_t> out(in.size());
  Instruction instruction;
  instruction.opcode = Opcode::kAbs;
  instruction.operands = {isa::contiguousOperand(0, DType::kInt8, {5}), isa::contiguousOperand(1, DType::kInt8, {5})};
  std::vector<void*> buffers = {out.data(), const_cast<int8_t*>(in.data())};
  kernels::execute(instruction, buffers);
  EXPECT_EQ(out, (std::vector<int8_t>{-128, 1, 0, 1, 127}));  // abs(-128) wraps, as in PyTorch
  instruction.opcode = Opcode::kNeg;
  kernels::execute(instruction, buffers);
  EXPECT_EQ(out, (std::vector<int8_t>{-128, 1, 0, -1, -127}));

  const std::vector<float> fin = {-2.5f, -0.5f, 0.5f, 1.5f, 2.5f, -0.0f, kNaNF};
  std::vector<float> fout(fin.size());
  instruction.operands = {isa::contiguousOperand(0, DType::kFloat32, {7}), isa::contiguousOperand(1, DType::kFloat32, {7})};
  buffers = {fout.data(), const_cast<float*>(fin.data())};
  instruction.opcode = Opcode::kRound;
  kernels::execute(instruction, buffers);
  EXPECT_EQ(fout[0], -2.0f);  // half to even
  EXPECT_EQ(fout[1], -0.0f);
  EXPECT_EQ(fout[3], 2.0f);
  EXPECT_EQ(fout[4], 2.0f);
  EXPECT_TRUE(std::isnan(fout[6]));
  instruction.opcode = Opcode::kSign;
  kernels::execute(instruction, buffers);
  EXPECT_EQ(fout, (std::vector<float>{-1, -1, 1, 1, 1, 0, 0}));
  instruction.opcode = Opcode::kRelu;
  kernels::execute(instruction, buffers);
  EXPECT_EQ(fout[0], 0.0f);
  EXPECT_EQ(fout[4], 2.5f);
  EXPECT_TRUE(std::isnan(fout[6]));  // NaN propagates
}

// ---------------------------------------------------------------------------
// Binary.
// ---------------------------------------------------------------------------

template <Opcode op, typename T>
Harness binaryHarness(double alpha) {
  using C = ComputeType<T>;
  Harness h;
  h.opcode = op;
  const bool has_alpha = isa::info(op).immediateCount() > 0;
  h.immediates[0] = has_alpha ? alpha : 0.0;
  h.dtypes = {kernels::dtypeOf<T>(), kernels::dtypeOf<T>(), kernels::dtypeOf<T>()};
  constexpr bool integer_division = !kIsFloat<T> && (op == Opcode::kFmod || op == Opcode::kRemainder ||
                                                     op == Opcode::kFloorDiv || op == Opcode::kTruncDiv);
  // The gradients whose factor of grad has roots (gelu's at -0.75, silu's at -1.28,
  // mish's at -1.19) cancel there, so their results are far smaller than the terms the
  // vector and scalar forms round: elementsClose's relative tolerance cannot hold then,
  // only its absolute floor, for grads of ordinary size (elementwise_reference_tests
  // bounds these forms near their roots too).
  constexpr bool cancelling_gradient = op == Opcode::kGeluGrad || op == Opcode::kGeluTanhGrad ||
                                       op == Opcode::kSiluGrad || op == Opcode::kMishGrad;
  h.random_input = [](int operand, std::mt19937_64& rng, char* p) {
    T value = randomValue<T>(rng);
    if constexpr (integer_division) {
      if (operand == 2 && value == T(0)) value = T(1);  // zero fails the kernel
    }
    if constexpr (cancelling_gradient && kIsFloat<T>) {
      if (operand == 1) value = refCast<T>(std::uniform_real_distribution<double>(-4.0, 4.0)(rng));
    }
    writeValue(p, value);
  };
  const C scale = refCast<C>(has_alpha ? alpha : 1.0);
  // float16/bfloat16 add/sub round alpha * b to the storage type first (as PyTorch's CPU kernels).
  constexpr bool prescaled = !std::is_same_v<C, T> && (op == Opcode::kAdd || op == Opcode::kSub);
  h.reference = [scale](const std::array<char*, 4>& p) {
    C b = refLoad<T>(p[2]);
    C alpha = scale;
    if constexpr (prescaled) {
      if (scale != C(1)) {
        const T rounded = refCast<T>(scale * b);
        b = refLoad<T>(reinterpret_cast<const char*>(&rounded));
      }
      alpha = C(1);
    }
    kernels::Immediates<C> immediates{};
    immediates[0] = alpha;
    refStore<T>(p[0], kernels::binaryOp<op, C, T>(refLoad<T>(p[1]), b, immediates));
  };
  setMathOutputType<op, T>(h);
  h.label = std::string(isa::info(op).name) + " " + typeName<T>() + (has_alpha ? " alpha=" + std::to_string(alpha) : "");
  return h;
}

TEST(Kernels, BinaryEveryOpcodeAndDType) {
  int combinations = 0;
  forEachOpcode<Group::Binary>([&]<Opcode op>() {
    forEachType([&]<typename T>() {
      if constexpr (accepts<op, T>()) {
        std::vector<double> alphas = {1.0};
        if constexpr (op == Opcode::kAdd || op == Opcode::kSub) {
          if constexpr (kIsFloat<T>) alphas = {1.0, 0.5, -2.0, 0.3};
          else alphas = {1.0, 3.0, -1.0, 2.9};  // truncated toward zero; -1 wraps for u8
        } else if (isa::info(op).immediateCount() > 0) {
          alphas = {0.0, 1.5, 2.0};  // another immediate (trelugrad's threshold)
        }
        for (double alpha : alphas) {
          runCases(binaryHarness<op, T>(alpha), smallCases(), 5000 + combinations);
          ++combinations;
        }
      }
    });
  });
  EXPECT_GT(combinations, 60);
}

TEST(Kernels, BinaryLarge) {
  runCases(binaryHarness<Opcode::kSub, uint8_t>(-1.0), largeCases(), 12);
  runCases(binaryHarness<Opcode::kAdd, BFloat16>(0.3), largeCases(), 13);
  runCases(binaryHarness<Opcode::kMax, double>(1.0), largeCases(), 14);
}

// Python's // and %, C's trunc division and fmod, on the signs' four cases, the
// lowest value over -1 (wraps, never traps) and a zero divisor (fails the kernel).
TEST(Kernels, IntegerDivisionsKnownValues) {
  const std::vector<int8_t> a = {7, -7, 7, -7, -128, -128, 6};
  const std::vector<int8_t> b = {2, 2, -2, -2, -1, 3, 3};
  auto run = [&](Opcode op, const std::vector<int8_t>& divisors) {
    std::vector<int8_t> lhs = a, rhs = divisors, out(a.size());
    const auto n = static_cast<int64_t>(a.size());
    Instruction instruction;
    instruction.opcode = op;
    instruction.operands = {isa::contiguousOperand(0, DType::kInt8, {n}), isa::contiguousOperand(1, DType::kInt8, {n}),
                            isa::contiguousOperand(2, DType::kInt8, {n})};
    std::vector<void*> buffers = {out.data(), lhs.data(), rhs.data()};
    kernels::execute(instruction, buffers);
    return out;
  };
  EXPECT_EQ(run(Opcode::kFloorDiv, b), (std::vector<int8_t>{3, -4, -4, 3, -128, -43, 2}));
  EXPECT_EQ(run(Opcode::kTruncDiv, b), (std::vector<int8_t>{3, -3, -3, 3, -128, -42, 2}));
  EXPECT_EQ(run(Opcode::kRemainder, b), (std::vector<int8_t>{1, 1, -1, -1, 0, 1, 0}));
  EXPECT_EQ(run(Opcode::kFmod, b), (std::vector<int8_t>{1, -1, 1, -1, 0, -2, 0}));
  std::vector<int8_t> zero = b;
  zero[3] = 0;
  EXPECT_THROW(run(Opcode::kFloorDiv, zero), std::domain_error);
}

TEST(Kernels, BinaryKnownValues) {
  // int8 wraps; u8 with alpha -1 wraps too (a + 255 * b).
  const std::vector<int8_t> a = {127, -128, 100, 5};
  const std::vector<int8_t> b = {1, -1, 100, -7};
  std::vector<int8_t> out(4);
  Instruction add;
  add.opcode = Opcode::kAdd;
  add.operands = {isa::contiguousOperand(0, DType::kInt8, {4}), isa::contiguousOperand(1, DType::kInt8, {4}),
                  isa::contiguousOperand(2, DType::kInt8, {4})};
  add.immediates[0] = 2;
  std::vector<void*> buffers = {out.data(), const_cast<int8_t*>(a.data()), const_cast<int8_t*>(b.data())};
  ASSERT_EQ(isa::verifyInstruction(add, std::vector<uint64_t>{4, 4, 4}), "");
  kernels::execute(add, buffers);
  EXPECT_EQ(out, (std::vector<int8_t>{-127, 126, 44, -9}));

  const std::vector<uint8_t> ua = {10, 0, 255}, ub = {3, 1, 255};
  std::vector<uint8_t> uout(3);
  Instruction sub;
  sub.opcode = Opcode::kSub;
  sub.operands = {isa::contiguousOperand(0, DType::kUInt8, {3}), isa::contiguousOperand(1, DType::kUInt8, {3}),
                  isa::contiguousOperand(2, DType::kUInt8, {3})};
  sub.immediates[0] = -1;  // a - (-1) * b = a + b
  ASSERT_EQ(isa::verifyInstruction(sub, std::vector<uint64_t>{3, 3, 3}), "");
  buffers = {uout.data(), const_cast<uint8_t*>(ua.data()), const_cast<uint8_t*>(ub.data())};
  kernels::execute(sub, buffers);
  EXPECT_EQ(uout, (std::vector<uint8_t>{13, 1, 254}));

  // max/min propagate NaN.
  const std::vector<float> fa = {1, kNaNF, 3}, fb = {kNaNF, 2, 4};
  std::vector<float> fout(3);
  Instruction max;
  max.opcode = Opcode::kMax;
  max.operands = {isa::contiguousOperand(0, DType::kFloat32, {3}), isa::contiguousOperand(1, DType::kFloat32, {3}),
                  isa::contiguousOperand(2, DType::kFloat32, {3})};
  buffers = {fout.data(), const_cast<float*>(fa.data()), const_cast<float*>(fb.data())};
  kernels::execute(max, buffers);
  EXPECT_TRUE(std::isnan(fout[0]));
  EXPECT_TRUE(std::isnan(fout[1]));
  EXPECT_EQ(fout[2], 4.0f);
}

// ---------------------------------------------------------------------------
// Ternary.
// ---------------------------------------------------------------------------

template <Opcode op, typename T>
Harness ternaryHarness(double value) {
  using C = ComputeType<T>;
  Harness h;
  h.opcode = op;
  h.immediates[0] = value;
  h.dtypes = {kernels::dtypeOf<T>(), kernels::dtypeOf<T>(), kernels::dtypeOf<T>(), kernels::dtypeOf<T>()};
  h.random_input = [](int, std::mt19937_64& rng, char* p) { writeValue(p, randomValue<T>(rng)); };
  const C scale = refCast<C>(value);
  h.reference = [scale](const std::array<char*, 4>& p) {
    refStore<T>(p[0], kernels::ternaryOp<op, C>(refLoad<T>(p[1]), refLoad<T>(p[2]), refLoad<T>(p[3]), scale));
  };
  setOutputType<T>(h);
  h.label = std::string(isa::info(op).name) + " " + typeName<T>() + " value=" + std::to_string(value);
  return h;
}

// Every layout pairing of smallCases (broadcast inputs, reversed, padded, rank 0 and
// 8) with contiguous and broadcast rows on each input; float16/bfloat16 rounded once.
TEST(Kernels, TernaryEveryOpcodeAndDType) {
  const std::vector<ShapeCase> mixed_broadcasts = {
      {{4, 9}, {L::kContiguous, L::kBroadcastAll, L::kContiguous, L::kBroadcastInner}},
      {{4, 37}, {L::kContiguous, L::kContiguous, L::kBroadcastOuter, L::kBroadcastAll}},
      {{3, 70}, {L::kPadded, L::kBroadcastOuter, L::kBroadcastAll, L::kContiguous}},
  };
  int combinations = 0;
  forEachOpcode<Group::Ternary>([&]<Opcode op>() {
    forEachType([&]<typename T>() {
      if constexpr (accepts<op, T>()) {
        std::vector<double> values = kIsFloat<T> ? std::vector<double>{1.0, -0.5, 0.3}
                                                 : std::vector<double>{1.0, 3.0, -2.0};
        if (isa::info(op).immediateCount() == 0) values = {0.0};  // tclamp, tlerpw: no value to vary
        for (double value : values) {
          runCases(ternaryHarness<op, T>(value), smallCases(), 20000 + combinations);
          runCases(ternaryHarness<op, T>(value), mixed_broadcasts, 21000 + combinations);
          ++combinations;
        }
      }
    });
  });
  // taddcmul: 5 integer and 4 float dtypes, 3 values each; taddcdiv: the floats; tclamp: all 9
  // once; tlerpw: the floats once
  EXPECT_EQ(combinations, 3 * 9 + 3 * 4 + 9 + 4);
}

TEST(Kernels, TernaryLarge) {
  runCases(ternaryHarness<Opcode::kAddcmul, float>(0.25), largeCases(), 41);
  runCases(ternaryHarness<Opcode::kAddcdiv, BFloat16>(-3.0), largeCases(), 42);
  runCases(ternaryHarness<Opcode::kAddcmul, int32_t>(5.0), largeCases(), 43);
}

// ---------------------------------------------------------------------------
// Compare.
// ---------------------------------------------------------------------------

template <Opcode op, typename T>
Harness compareHarness() {
  Harness h;
  h.opcode = op;
  h.dtypes = {DType::kBool, kernels::dtypeOf<T>(), kernels::dtypeOf<T>()};
  h.random_input = [](int, std::mt19937_64& rng, char* p) { writeValue(p, poolValue<T>(rng)); };
  h.reference = [](const std::array<char*, 4>& p) {
    refStore<bool>(p[0], kernels::compareOp<op>(refLoad<T>(p[1]), refLoad<T>(p[2])));
  };
  setOutputType<bool>(h);
  h.label = std::string(isa::info(op).name) + " " + typeName<T>();
  return h;
}

TEST(Kernels, CompareEveryOpcodeAndDType) {
  int combinations = 0;
  forEachOpcode<Group::Compare>([&]<Opcode op>() {
    forEachType([&]<typename T>() {
      if constexpr (accepts<op, T>()) {
        runCases(compareHarness<op, T>(), smallCases(), 9000 + combinations);
        ++combinations;
      }
    });
  });
  EXPECT_EQ(combinations, 60);
}

TEST(Kernels, CompareLarge) {
  runCases(compareHarness<Opcode::kLt, float>(), largeCases(), 21);
  runCases(compareHarness<Opcode::kEq, Half>(), largeCases(), 22);
}

TEST(Kernels, CompareKnownValues) {
  const std::vector<float> a = {1, kNaNF, -0.0f, 2}, b = {1, kNaNF, 0.0f, 3};
  bool out[4] = {};
  Instruction cmp;
  cmp.operands = {isa::contiguousOperand(0, DType::kBool, {4}), isa::contiguousOperand(1, DType::kFloat32, {4}),
                  isa::contiguousOperand(2, DType::kFloat32, {4})};
  std::vector<void*> buffers = {out, const_cast<float*>(a.data()), const_cast<float*>(b.data())};
  cmp.opcode = Opcode::kEq;
  kernels::execute(cmp, buffers);
  EXPECT_TRUE(out[0]);
  EXPECT_FALSE(out[1]);  // NaN != NaN
  EXPECT_TRUE(out[2]);   // -0 == 0
  EXPECT_FALSE(out[3]);
  cmp.opcode = Opcode::kNe;
  kernels::execute(cmp, buffers);
  EXPECT_TRUE(out[1]);
  cmp.opcode = Opcode::kLe;
  kernels::execute(cmp, buffers);
  EXPECT_FALSE(out[1]);
  EXPECT_TRUE(out[3]);
}

// ---------------------------------------------------------------------------
// Select.
// ---------------------------------------------------------------------------

template <typename T>
Harness selectHarness() {
  Harness h;
  h.opcode = Opcode::kSelect;
  h.dtypes = {kernels::dtypeOf<T>(), DType::kBool, kernels::dtypeOf<T>(), kernels::dtypeOf<T>()};
  h.random_input = [](int k, std::mt19937_64& rng, char* p) {
    if (k == 1) writeValue(p, (rng() & 1) != 0);
    else writeValue(p, randomValue<T>(rng));
  };
  h.reference = [](const std::array<char*, 4>& p) {
    bool condition;
    std::memcpy(&condition, p[1], 1);
    std::memcpy(p[0], condition ? p[2] : p[3], sizeof(T));  // the element itself, bit for bit
  };
  setOutputType<T>(h);
  h.equal = [](const char* a, const char* b) { return std::memcmp(a, b, sizeof(T)) == 0; };
  h.label = "tsel " + typeName<T>();
  return h;
}

TEST(Kernels, SelectEveryDTypeWithBroadcastConditions) {
  // The condition broadcast along the outer dimension, the inner one, everywhere.
  const std::vector<ShapeCase> broadcast_conditions = {
      {{4, 9}, {L::kContiguous, L::kBroadcastOuter, L::kContiguous, L::kContiguous}},
      {{4, 9}, {L::kTransposed, L::kBroadcastInner, L::kReversed, L::kBroadcastAll}},
      {{4, 9}, {L::kContiguous, L::kBroadcastAll, L::kContiguous, L::kPadded}},
      {{2, 3, 5}, {L::kPadded, L::kBroadcastOuter, L::kBroadcastInner, L::kTransposed}},
  };
  int combinations = 0;
  forEachType([&]<typename T>() {
    runCases(selectHarness<T>(), smallCases(), 12000 + combinations);
    runCases(selectHarness<T>(), broadcast_conditions, 13000 + combinations);
    ++combinations;
  });
  EXPECT_EQ(combinations, 10);
}

TEST(Kernels, SelectLarge) {
  runCases(selectHarness<float>(), largeCases(), 31);
  runCases(selectHarness<int8_t>(), largeCases(), 32);
}

// ---------------------------------------------------------------------------
// Convert and move.
// ---------------------------------------------------------------------------

// A source value whose conversion to To is defined: floats into integer types
// stay in range (as PyTorch requires), with fractions to truncate.
template <typename To, typename From>
From convertSource(std::mt19937_64& rng) {
  if constexpr (kIsFloat<From> && std::is_integral_v<To> && !std::is_same_v<To, bool>) {
    const double limit = std::is_same_v<To, uint8_t> ? 255.0 : std::is_same_v<To, int8_t> ? 127.0 : 30000.0;
    double value = std::uniform_real_distribution<double>(-limit, limit)(rng);
    if (rng() % 4 == 0) value = std::trunc(value) + (rng() % 2 ? 0.5 : -0.5);
    if (rng() % 10 == 0) value = rng() % 2 ? 0.0 : -0.0;
    From source = refCast<From>(value);
    // Rounding to the source type may step out of range (bfloat16: 127.5 -> 128).
    if (std::abs(static_cast<double>(refLoad<From>(reinterpret_cast<const char*>(&source)))) >= limit) source = refCast<From>(1.5);
    return source;
  } else {
    return randomValue<From>(rng);
  }
}

template <Opcode op, typename To, typename From>
Harness convertHarness() {
  Harness h;
  h.opcode = op;
  h.dtypes = {kernels::dtypeOf<To>(), kernels::dtypeOf<From>()};
  h.random_input = [](int, std::mt19937_64& rng, char* p) { writeValue(p, convertSource<To, From>(rng)); };
  h.reference = [](const std::array<char*, 4>& p) { refStore<To>(p[0], refLoad<From>(p[1])); };
  setOutputType<To>(h);
  h.label = std::string(isa::info(op).name) + " " + typeName<From>() + " -> " + typeName<To>();
  return h;
}

TEST(Kernels, ConvertEveryPairOfDTypes) {
  int combinations = 0;
  forEachType([&]<typename To>() {
    forEachType([&]<typename From>() {
      runCases(convertHarness<Opcode::kConvert, To, From>(), smallCases(), 15000 + combinations);
      ++combinations;
    });
    runCases(convertHarness<Opcode::kMove, To, To>(), smallCases(), 17000 + combinations);
  });
  EXPECT_EQ(combinations, 100);
}

TEST(Kernels, ConvertLarge) {
  runCases(convertHarness<Opcode::kConvert, Half, int64_t>(), largeCases(), 41);
  runCases(convertHarness<Opcode::kConvert, uint8_t, double>(), largeCases(), 43);
  runCases(convertHarness<Opcode::kConvert, bool, BFloat16>(), largeCases(), 45);
}

// tmov moves elements bit for bit, whatever they hold (NaN payloads, signalling NaNs), on every path.
template <typename T>
Harness moveBitsHarness() {
  Harness h = convertHarness<Opcode::kMove, T, T>();
  h.random_input = [](int, std::mt19937_64& rng, char* p) {
    const uint64_t bits = rng() % 4 ? rng() : (rng() % 2 ? 0x7ff0000000000001ull : 0xffffffffffffffffull);
    uint64_t narrow = bits;
    if constexpr (sizeof(T) == 4) narrow = rng() % 4 ? bits : (rng() % 2 ? 0x7f800001u : 0xffbfffffu);
    if constexpr (sizeof(T) == 2) narrow = rng() % 4 ? bits : (rng() % 2 ? 0x7c01u : 0xff81u);
    std::memcpy(p, &narrow, sizeof(T));  // little-endian: the low bytes
  };
  h.reference = [](const std::array<char*, 4>& p) { std::memcpy(p[0], p[1], sizeof(T)); };
  h.equal = [](const char* a, const char* b) { return std::memcmp(a, b, sizeof(T)) == 0; };
  h.label = "tmov bits " + typeName<T>();
  return h;
}

TEST(Kernels, MoveIsBitExact) {
  int combinations = 0;
  forEachType([&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) {  // a bool byte is 0 or 1
      runCases(moveBitsHarness<T>(), smallCases(), 30000 + combinations);
      ++combinations;
    }
  });
  runCases(moveBitsHarness<Half>(), largeCases(), 61);
}

// Converts `in` (contiguous) with tcvt and returns the result (std::vector<bool> has no data(),
// hence the byte buffers).
template <typename To, typename From>
std::vector<To> convert(const std::vector<From>& in) {
  const auto n = static_cast<int64_t>(in.size());
  std::vector<unsigned char> source(in.size() * sizeof(From)), target(in.size() * sizeof(To));
  for (size_t i = 0; i < in.size(); ++i) {
    const From value = in[i];
    std::memcpy(source.data() + i * sizeof(From), &value, sizeof(From));
  }
  Instruction instruction;
  instruction.opcode = Opcode::kConvert;
  instruction.operands = {isa::contiguousOperand(0, kernels::dtypeOf<To>(), {n}),
                          isa::contiguousOperand(1, kernels::dtypeOf<From>(), {n})};
  std::vector<void*> buffers = {target.data(), source.data()};
  kernels::execute(instruction, buffers);
  std::vector<To> out;
  for (size_t i = 0; i < in.size(); ++i) {
    To value;
    std::memcpy(&value, target.data() + i * sizeof(To), sizeof(To));
    out.push_back(value);
  }
  return out;
}

template <typename T>
std::vector<uint16_t> bitsOf(const std::vector<T>& values) {
  std::vector<uint16_t> bits;
  for (T value : values) bits.push_back(value.bits);
  return bits;
}

TEST(Kernels, ConvertKnownValues) {
  // float -> int truncates toward zero.
  EXPECT_EQ((convert<int32_t, float>({2.7f, -2.7f, -0.5f, 0.5f, -0.0f, 1e9f, -2147483648.0f})),
            (std::vector<int32_t>{2, -2, 0, 0, 0, 1000000000, std::numeric_limits<int32_t>::min()}));
  EXPECT_EQ((convert<int64_t, double>({-1e18, 3.999})), (std::vector<int64_t>{-1000000000000000000, 3}));
  EXPECT_EQ((convert<int8_t, Half>({Half{0x3e00}, Half{0xbe00}})), (std::vector<int8_t>{1, -1}));  // +-1.5
  // float -> uint8 goes through int64, as in PyTorch: negatives wrap.
  EXPECT_EQ((convert<uint8_t, float>({-1.0f, -1.5f, 255.9f, 3.2f})), (std::vector<uint8_t>{255, 255, 255, 3}));
  // float -> bool: nonzero, NaN included; -0 is zero.
  const std::vector<bool> truth = {false, false, true, true, true, true};
  const auto b = convert<bool, float>({0.0f, -0.0f, kNaNF, 0.1f, -kInfF, 1e-45f});
  EXPECT_EQ(std::vector<bool>(b.begin(), b.end()), truth);
  const auto bh = convert<bool, Half>({Half{0x0000}, Half{0x8000}, Half{0x7e00}, Half{0x0001}, Half{0xfc00}, Half{0x3c00}});
  EXPECT_EQ(std::vector<bool>(bh.begin(), bh.end()), truth);
  // bool -> float.
  EXPECT_EQ((convert<float, bool>({true, false})), (std::vector<float>{1.0f, 0.0f}));
  EXPECT_EQ((bitsOf(convert<Half, bool>({true, false}))), (std::vector<uint16_t>{0x3c00, 0x0000}));
  // int64 -> float16: through float, rounding to nearest even; beyond 65504 infinity.
  EXPECT_EQ((bitsOf(convert<Half, int64_t>({1, -3, 2049, 2051, 65504, 65519, 65520, int64_t{1} << 40,
                                            std::numeric_limits<int64_t>::min()}))),
            (std::vector<uint16_t>{0x3c00, 0xc200, 0x6800, 0x6802, 0x7bff, 0x7bff, 0x7c00, 0x7c00, 0xfc00}));
  // double -> float16 -> double keeps what float16 holds.
  EXPECT_EQ((bitsOf(convert<Half, double>({0.1, -0.0, 1e300}))), (std::vector<uint16_t>{0x2e66, 0x8000, 0x7c00}));
  // int wrap-around: i32 -> i8 keeps the low byte.
  EXPECT_EQ((convert<int8_t, int32_t>({300, -129, 128})), (std::vector<int8_t>{44, 127, -128}));
  EXPECT_EQ((convert<uint8_t, int64_t>({-1, 256})), (std::vector<uint8_t>{255, 0}));
  // bfloat16 <-> float16.
  EXPECT_EQ((bitsOf(convert<BFloat16, Half>({Half{0x3c00}, Half{0x7bff}}))), (std::vector<uint16_t>{0x3f80, 0x4780}));
}

// ---------------------------------------------------------------------------
// Fill.
// ---------------------------------------------------------------------------

template <typename T>
Harness fillHarness(double value) {
  Harness h;
  h.opcode = Opcode::kFill;
  h.immediates[0] = value;
  h.dtypes = {kernels::dtypeOf<T>()};
  h.random_input = [](int, std::mt19937_64&, char*) {};
  h.reference = [value](const std::array<char*, 4>& p) { refStore<T>(p[0], value); };
  setOutputType<T>(h);
  h.equal = [](const char* a, const char* b) { return std::memcmp(a, b, sizeof(T)) == 0; };  // NaN bits too
  h.label = "texpands " + typeName<T>() + " value=" + std::to_string(value);
  return h;
}

TEST(Kernels, FillEveryDTypeWithImmediates) {
  int combinations = 0;
  forEachType([&]<typename T>() {
    std::vector<double> values = {0.0, 1.0, 2.5, -3.75, -0.0, 100.0, 127.0};
    if constexpr (kIsFloat<T>) {
      values.insert(values.end(), {0.1, 65520.0, 1e300, -std::numeric_limits<double>::infinity(),
                                   std::numeric_limits<double>::quiet_NaN(), 1e-8});
    } else if constexpr (std::is_same_v<T, bool>) {
      values.insert(values.end(), {std::numeric_limits<double>::quiet_NaN(), 1e300, 1e-300});
    } else if constexpr (std::is_same_v<T, uint8_t>) {
      values.insert(values.end(), {-1.0, -255.0, 255.0});  // negatives wrap, as PyTorch allows
    } else if constexpr (std::is_same_v<T, int64_t>) {
      values.insert(values.end(), {-9223372036854775808.0, 9223372036854774784.0});  // the double range's ends
    } else {
      values.insert(values.end(), {-128.0, static_cast<double>(std::numeric_limits<T>::max())});
    }
    for (double value : values) {
      runCases(fillHarness<T>(value), smallCases(), 20000 + combinations);
      ++combinations;
    }
  });
  EXPECT_GT(combinations, 90);
}

TEST(Kernels, FillLarge) {
  runCases(fillHarness<int64_t>(-7.9), largeCases(), 51);
  runCases(fillHarness<Half>(0.1), largeCases(), 52);
}

TEST(Kernels, FillKnownValues) {
  std::vector<int32_t> out(3, 9);
  Instruction fill;
  fill.opcode = Opcode::kFill;
  fill.operands = {isa::contiguousOperand(0, DType::kInt32, {3})};
  fill.immediates[0] = -2.9;
  std::vector<void*> buffers = {out.data()};
  kernels::execute(fill, buffers);
  EXPECT_EQ(out, (std::vector<int32_t>{-2, -2, -2}));
  std::vector<uint8_t> bytes(2);
  fill.operands = {isa::contiguousOperand(0, DType::kUInt8, {2})};
  fill.immediates[0] = -1;
  ASSERT_EQ(isa::verifyInstruction(fill, std::vector<uint64_t>{2}), "");
  buffers = {bytes.data()};
  kernels::execute(fill, buffers);
  EXPECT_EQ(bytes, (std::vector<uint8_t>{255, 255}));
}

// An empty operand may lie anywhere (its offset is never followed).
TEST(Kernels, EmptyOperandsTouchNothing) {
  Instruction neg;
  neg.opcode = Opcode::kNeg;
  Operand out = isa::contiguousOperand(0, DType::kFloat64, {4, 0});
  Operand in = out;
  in.buffer = 1;
  in.offset = std::numeric_limits<int64_t>::max();
  in.strides = {std::numeric_limits<int64_t>::min(), 1};
  out.offset = std::numeric_limits<int64_t>::min();
  neg.operands = {out, in};
  ASSERT_EQ(isa::verifyInstruction(neg, std::vector<uint64_t>{0, 0}), "");
  std::vector<void*> buffers = {nullptr, nullptr};
  kernels::execute(neg, buffers);  // must not touch memory (nor overflow computing addresses)
}

// ---------------------------------------------------------------------------
// The strided loop.
// ---------------------------------------------------------------------------

TEST(StridedLoop, MergesWhatEveryOperandAllows) {
  char memory[4096];
  std::vector<void*> buffers = {memory, memory};
  auto loopOf = [&](std::vector<Operand> operands) { return kernels::makeLoop(operands, buffers); };
  // Contiguous: one row.
  kernels::StridedLoop loop = loopOf({isa::contiguousOperand(0, DType::kFloat32, {3, 5, 7}),
                                      isa::contiguousOperand(1, DType::kInt16, {3, 5, 7})});
  EXPECT_EQ(loop.rank, 1);
  EXPECT_EQ(loop.shape[0], 105);
  EXPECT_EQ(loop.innerStride(0), 4);
  EXPECT_EQ(loop.innerStride(1), 2);
  EXPECT_EQ(loop.numel(), 105);
  // A transposed input keeps the dimensions apart; the output's order wins.
  int64_t elements = 0;
  loop = loopOf({isa::contiguousOperand(0, DType::kFloat32, {3, 5}),
                 makeOperand(1, DType::kFloat32, {3, 5}, Layout::kTransposed, &elements)});
  EXPECT_EQ(loop.rank, 2);
  EXPECT_EQ(loop.shape[0], 3);
  EXPECT_EQ(loop.shape[1], 5);
  EXPECT_EQ(loop.innerStride(0), 4);
  EXPECT_EQ(loop.innerStride(1), 12);
  // Size-1 dimensions vanish; an all-ones shape is a single element.
  loop = loopOf({isa::contiguousOperand(0, DType::kFloat32, {1, 4, 1, 5}),
                 makeOperand(1, DType::kFloat32, {1, 4, 1, 5}, Layout::kPadded, &elements)});
  EXPECT_EQ(loop.numel(), 20);
  EXPECT_EQ(loop.rank, 2);
  loop = loopOf({isa::contiguousOperand(0, DType::kFloat32, {1, 1}), isa::contiguousOperand(1, DType::kFloat32, {1, 1})});
  EXPECT_EQ(loop.rank, 0);
  EXPECT_EQ(loop.numel(), 1);
  EXPECT_EQ(loop.innerSize(), 1);
  // An empty shape has nothing to do.
  loop = loopOf({isa::contiguousOperand(0, DType::kFloat32, {3, 0}), isa::contiguousOperand(1, DType::kFloat32, {3, 0})});
  EXPECT_EQ(loop.numel(), 0);
  // Broadcast inputs merge with the output where their zeros line up.
  Operand broadcast = isa::contiguousOperand(1, DType::kFloat32, {6, 8});
  broadcast.strides = {0, 0};
  loop = loopOf({isa::contiguousOperand(0, DType::kFloat32, {6, 8}), broadcast});
  EXPECT_EQ(loop.rank, 1);
  EXPECT_EQ(loop.innerStride(1), 0);
  // Offsets move the bases.
  Operand shifted = isa::contiguousOperand(1, DType::kFloat64, {2});
  shifted.offset = 5;
  loop = loopOf({isa::contiguousOperand(0, DType::kFloat32, {2}), shifted});
  EXPECT_EQ(loop.base[1], memory + 40);
}

TEST(StridedLoop, ForEachRowVisitsEveryElementOnce) {
  // Row-split parallel chunks: each element exactly once, from however many threads.
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{3, 300, 101}, {300001}, {7, 20001}, {5, 3}}) {
    int64_t elements = 0;
    const Operand out = makeOperand(0, DType::kInt8, shape, Layout::kTransposed, &elements);
    static_assert(sizeof(std::atomic<uint8_t>) == 1);
    std::vector<std::atomic<uint8_t>> visits(static_cast<size_t>(elements));
    char* base = reinterpret_cast<char*>(&visits[0]);
    std::vector<void*> buffers = {base};
    const kernels::StridedLoop loop = kernels::makeLoop(std::vector<Operand>{out}, buffers);
    std::atomic<int64_t> rows{0};
    kernels::forEachRow(loop, [&](const std::array<char*, kernels::kMaxOperands>& p, int64_t n) {
      ASSERT_GT(n, 0);
      ++rows;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t offset = (p[0] - base) + i * loop.innerStride(0);
        visits[static_cast<size_t>(offset)].fetch_add(1, std::memory_order_relaxed);
      }
    });
    for (size_t e = 0; e < visits.size(); ++e) ASSERT_EQ(visits[e].load(), 1) << "element " << e;
    EXPECT_GE(rows.load(), loop.numel() / loop.innerSize());
  }
}

}  // namespace

TEST(Kernels, RmsNormAndLayerNormRows) {
  // Two rows of 19 (a vector body and a tail on every target); the weight repeats one row.
  constexpr int64_t kLength = 19;
  std::vector<float> in(2 * kLength), weight(kLength), out(2 * kLength), zero = {0.0f};
  for (int64_t i = 0; i < 2 * kLength; ++i) in[i] = static_cast<float>(i % 7) - 2.5f + (i >= kLength ? 100.0f : 0.0f);
  for (int64_t i = 0; i < kLength; ++i) weight[i] = 0.5f + 0.1f * static_cast<float>(i);
  Operand repeated = isa::contiguousOperand(2, DType::kFloat32, {2, kLength});
  repeated.strides = {0, 1};
  Operand none = isa::contiguousOperand(3, DType::kFloat32, {2, kLength});
  none.strides = {0, 0};
  Instruction instruction;
  instruction.opcode = Opcode::kRmsNorm;
  instruction.operands = {isa::contiguousOperand(0, DType::kFloat32, {2, kLength}),
                          isa::contiguousOperand(1, DType::kFloat32, {2, kLength}), repeated};
  instruction.immediates[0] = 1e-6;
  std::vector<void*> buffers = {out.data(), in.data(), weight.data(), zero.data()};
  kernels::execute(instruction, buffers);
  for (int64_t row = 0; row < 2; ++row) {
    const float* x = in.data() + row * kLength;
    double squares = 0;
    for (int64_t i = 0; i < kLength; ++i) squares += double(x[i]) * x[i];
    const double rms = 1.0 / std::sqrt(squares / kLength + 1e-6);
    for (int64_t i = 0; i < kLength; ++i) EXPECT_NEAR(out[row * kLength + i], x[i] * rms * weight[i], 1e-5) << row;
  }
  instruction.opcode = Opcode::kLayerNorm;
  instruction.operands.push_back(none);  // no bias: one 0 repeated
  kernels::execute(instruction, buffers);
  for (int64_t row = 0; row < 2; ++row) {  // the second row's mean is 100: no cancellation
    const float* x = in.data() + row * kLength;
    double sum = 0, deviations = 0;
    for (int64_t i = 0; i < kLength; ++i) sum += x[i];
    const double mean = sum / kLength;
    for (int64_t i = 0; i < kLength; ++i) deviations += (x[i] - mean) * (x[i] - mean);
    const double rstd = 1.0 / std::sqrt(deviations / kLength + 1e-6);
    for (int64_t i = 0; i < kLength; ++i) {
      EXPECT_NEAR(out[row * kLength + i], (x[i] - mean) * rstd * weight[i], 1e-5) << row;
    }
  }
}

// Every length up to five vectors of the widest target and beyond, from and to every
// offset within a vector: the memcpy'd head and tail around the streamed vectors meet.
TEST(Kernels, StreamCopyCopiesEveryLengthAtEveryAlignment) {
  std::vector<uint8_t> source(600), target(600);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t length : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{255}, size_t{256},
                        size_t{257}, size_t{320}, size_t{333}, size_t{500}}) {
    for (size_t from = 0; from < 64; from += 7) {
      for (size_t to = 0; to < 64; to += 5) {
        std::fill(target.begin(), target.end(), uint8_t{0xee});
        pto::rt::sim::kernels::streamCopy(target.data() + to, source.data() + from, length);
        for (size_t i = 0; i < target.size(); ++i) {
          const uint8_t expected = i >= to && i < to + length ? source[from + i - to] : uint8_t{0xee};
          ASSERT_EQ(target[i], expected) << "length " << length << ", from " << from << ", to " << to << ", byte " << i;
        }
      }
    }
  }
}

// Outputs larger than half the host's last-level cache are computed a block at a time
// and streamed out (kernels/stream_store-inl.h): rows whose starts fall at every
// alignment (padded), one long row split over the cores, and a broadcast scalar per
// row, against the reference. double: the fewest elements past the threshold.
TEST(Kernels, StreamedOutputsMatchTheReference) {
  constexpr int64_t kColumns = 100003;  // not a multiple of a block or a vector
  const int64_t rows = rt::sim::hostCaches().last_level_bytes / 2 / (kColumns * 8) + 1;
  ASSERT_TRUE(kernels::streamsOutput(rows * kColumns * 8));
  runCases(binaryHarness<Opcode::kAdd, double>(0.5), {{{rows, kColumns}, {L::kPadded, L::kContiguous, L::kBroadcastAll}}},
           51);
  runCases(unaryHarness<Opcode::kExp, double>(), {{{rows * kColumns}, {L::kContiguous, L::kContiguous}}}, 52);
  runCases(ternaryHarness<Opcode::kAddcmul, double>(0.25),
           {{{rows, kColumns}, {L::kContiguous, L::kPadded, L::kBroadcastInner, L::kContiguous}}}, 53);
}
