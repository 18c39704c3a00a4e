// The random draws (tuniform, tnormal, trandint, tbernoulli, texponential): Philox's published
// answer, the distributions' moments and ranges, and the counter-based contract:
// a value depends only on key, counter and position, never on layout or cores.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numbers>
#include <string>
#include <vector>

#include "isa/program.h"
#include "runtime/sim/kernels/element_types.h"
#include "runtime/sim/kernels/execute.h"

namespace pto {
namespace {

namespace kernels = rt::sim::kernels;  // the sim driver's instruction kernels
using isa::DType;
using isa::Instruction;
using isa::Opcode;
using isa::Operand;

template <typename T>
std::vector<T> draw(Opcode opcode, std::array<double, isa::kMaxImmediates> immediates, int64_t count,
                    Operand out = {}) {
  if (out.rank == 0) out = isa::contiguousOperand(0, kernels::dtypeOf<T>(), {count});
  std::vector<char> bytes(static_cast<size_t>(count) * sizeof(T));  // raw: T may be bool
  Instruction instruction;
  instruction.opcode = opcode;
  instruction.operands = {out};
  instruction.immediates = immediates;
  const std::string error = isa::verifyInstruction(instruction, std::vector<uint64_t>{count * sizeof(T)});
  EXPECT_EQ(error, "");
  std::vector<void*> buffers = {bytes.data()};
  if (error.empty()) kernels::execute(instruction, buffers);
  std::vector<T> values(static_cast<size_t>(count));
  for (size_t i = 0; i < values.size(); ++i) {
    T value;
    std::memcpy(&value, bytes.data() + i * sizeof(T), sizeof(T));
    values[i] = value;
  }
  return values;
}

template <typename T>
std::pair<double, double> meanAndVariance(const std::vector<T>& values) {
  double sum = 0, squares = 0;
  for (const T& value : values) sum += static_cast<double>(kernels::widen(value));
  const double mean = sum / static_cast<double>(values.size());
  for (const T& value : values) {
    const double d = static_cast<double>(kernels::widen(value)) - mean;
    squares += d * d;
  }
  return {mean, squares / static_cast<double>(values.size())};
}

// float32 normals against Box-Muller in float64 on the same Philox words (read through
// a draw of whole 32-bit integers with the same key and counter): each pair's first
// word gives the radius sqrt(-2 log(1 - u)), its second the angle 2 pi u, with u the
// word's top 24 bits over 2^24 as the kernel takes it. The float32 path (Sleef's log,
// sinpi and cospi, a few roundings) stays within 1e-6 of the reference times the radius.
TEST(RandomKernels, FloatNormalsFollowBoxMullerInDouble) {
  constexpr int64_t kCount = 1 << 16;
  const auto words = draw<int64_t>(Opcode::kRandInt, {0, 4294967296.0, 5, 6, 9}, kCount);
  const auto values = draw<float>(Opcode::kNormal, {0, 1, 5, 6, 9}, kCount);
  auto unit = [&](int64_t i) { return static_cast<double>(static_cast<uint32_t>(words[i]) >> 8) * 0x1p-24; };
  for (int64_t i = 0; i < kCount; i += 2) {
    const double radius = std::sqrt(-2 * std::log(1 - unit(i)));
    const double angle = 2 * std::numbers::pi * unit(i + 1);
    const double tolerance = 1e-6 * std::max(1.0, radius);
    ASSERT_NEAR(values[i], radius * std::cos(angle), tolerance) << i;
    ASSERT_NEAR(values[i + 1], radius * std::sin(angle), tolerance) << i;
  }
}

// Random123's known answer for Philox4x32-10, key 0 and counter 0: the first
// block's words, read through a draw of whole 32-bit integers.
TEST(RandomKernels, PhiloxGivesItsPublishedAnswer) {
  const auto words = draw<int64_t>(Opcode::kRandInt, {0, 4294967296.0, 0, 0, 0}, 4);
  EXPECT_EQ(words, (std::vector<int64_t>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
}

TEST(RandomKernels, UniformCoversItsRangeEvenly) {
  const auto values = draw<float>(Opcode::kUniform, {-2, 3, 11, 12, 0}, 1 << 20);
  for (float value : values) ASSERT_TRUE(value >= -2 && value <= 3) << value;
  const auto [mean, variance] = meanAndVariance(values);
  EXPECT_NEAR(mean, 0.5, 0.01);
  EXPECT_NEAR(variance, 25.0 / 12, 0.02);
  const auto doubles = draw<double>(Opcode::kUniform, {0, 1, 11, 12, 0}, 1 << 16);
  EXPECT_NEAR(meanAndVariance(doubles).first, 0.5, 0.01);
}

TEST(RandomKernels, NormalHasItsMeanAndSpread) {
  for (int64_t count : {int64_t{1} << 20, int64_t{1001}}) {  // odd: the last pair is half used
    const auto values = draw<float>(Opcode::kNormal, {1.5, 2, 5, 6, 9}, count);
    const auto [mean, variance] = meanAndVariance(values);
    const double tolerance = count > 2000 ? 0.01 : 0.2;
    EXPECT_NEAR(mean, 1.5, 2 * tolerance);
    EXPECT_NEAR(std::sqrt(variance), 2.0, 2 * tolerance);
  }
  const auto halves = draw<kernels::BFloat16>(Opcode::kNormal, {0, 1, 5, 6, 9}, 1 << 16);
  EXPECT_NEAR(meanAndVariance(halves).second, 1.0, 0.03);
  const auto doubles = draw<double>(Opcode::kNormal, {0, 1, 5, 6, 9}, 1 << 16);
  EXPECT_NEAR(meanAndVariance(doubles).second, 1.0, 0.03);
  const auto constant = draw<float>(Opcode::kNormal, {4, 0, 5, 6, 9}, 8);
  for (float value : constant) EXPECT_EQ(value, 4.0f);
}

TEST(RandomKernels, RandIntStaysInItsRange) {
  const auto dice = draw<int8_t>(Opcode::kRandInt, {1, 7, 3, 4, 0}, 60000);
  std::vector<int> seen(7);
  for (int8_t value : dice) {
    ASSERT_TRUE(value >= 1 && value <= 6) << int{value};
    ++seen[value];
  }
  for (int face = 1; face <= 6; ++face) EXPECT_NEAR(seen[face], 10000, 600) << face;
  // Wider than 2^32: two words per value, still inside the range.
  const auto wide = draw<int64_t>(Opcode::kRandInt, {-1e15, 1e15, 3, 4, 0}, 10000);
  int negative = 0;
  for (int64_t value : wide) {
    ASSERT_TRUE(value >= -1000000000000000 && value < 1000000000000000);
    negative += value < 0;
  }
  EXPECT_NEAR(negative, 5000, 300);
  const auto floats = draw<float>(Opcode::kRandInt, {0, 16, 3, 4, 0}, 1000);
  for (float value : floats) ASSERT_TRUE(value == std::floor(value) && value >= 0 && value < 16);
}

// texponential: -1/lambd * log1p(-u) of each word's uniform (read through a draw of whole
// 32-bit words with the same key and counter), as PyTorch's CPU transforms it, and a
// word of 0 as u = 2^-24: never 0. Mean 1/lambd, variance 1/lambd^2; float64 too.
TEST(RandomKernels, ExponentialIsTheCpusTransformOfTheWords) {
  constexpr int64_t kCount = 1 << 20;
  const auto words = draw<int64_t>(Opcode::kRandInt, {0, 4294967296.0, 5, 6, 9}, kCount);
  const auto values = draw<float>(Opcode::kExponential, {2, 5, 6, 9}, kCount);
  for (int64_t i = 0; i < kCount; ++i) {
    const float unit = static_cast<float>(static_cast<uint32_t>(words[i]) >> 8) * 0x1p-24f;
    const float expected = -1.0f / 2.0f * std::log1p(-(unit == 0 ? 0x1p-24f : unit));
    ASSERT_EQ(values[i], expected) << i;
    ASSERT_GT(values[i], 0.0f) << i;
  }
  const auto [mean, variance] = meanAndVariance(values);
  EXPECT_NEAR(mean, 0.5, 0.005);
  EXPECT_NEAR(variance, 0.25, 0.01);
  const auto doubles = draw<double>(Opcode::kExponential, {0.5, 5, 6, 9}, 1 << 16);
  const auto [double_mean, double_variance] = meanAndVariance(doubles);
  EXPECT_NEAR(double_mean, 2.0, 0.05);
  EXPECT_NEAR(double_variance, 4.0, 0.3);
  for (double value : doubles) ASSERT_GT(value, 0.0);
}

TEST(RandomKernels, BernoulliHitsItsProbability) {
  const auto mask = draw<bool>(Opcode::kBernoulli, {0.3, 1, 2, 0}, 1 << 18);
  int64_t ones = 0;
  for (bool value : mask) ones += value;
  EXPECT_NEAR(static_cast<double>(ones) / (1 << 18), 0.3, 0.005);
  for (float value : draw<float>(Opcode::kBernoulli, {1, 1, 2, 0}, 100)) EXPECT_EQ(value, 1.0f);
  for (int32_t value : draw<int32_t>(Opcode::kBernoulli, {0, 1, 2, 0}, 100)) EXPECT_EQ(value, 0);
}

// Element i comes from block counter + i/4 alone: a longer draw starts with a
// shorter one, a draw from a later counter continues it, and other keys differ.
TEST(RandomKernels, ValuesDependOnKeyCounterAndPositionOnly) {
  const auto long_draw = draw<float>(Opcode::kNormal, {0, 1, 7, 8, 100}, 1 << 18);
  const auto short_draw = draw<float>(Opcode::kNormal, {0, 1, 7, 8, 100}, 999);
  EXPECT_TRUE(std::equal(short_draw.begin(), short_draw.end(), long_draw.begin()));
  const auto later = draw<float>(Opcode::kNormal, {0, 1, 7, 8, 101}, 8);
  EXPECT_TRUE(std::equal(later.begin(), later.end(), long_draw.begin() + 4));
  const auto other_key = draw<float>(Opcode::kNormal, {0, 1, 7, 9, 100}, 8);
  EXPECT_FALSE(std::equal(other_key.begin(), other_key.end(), long_draw.begin()));
}

// A transposed output receives the same values at the same row-major positions.
TEST(RandomKernels, StridedOutputsGetTheRowMajorValues) {
  const auto flat = draw<float>(Opcode::kUniform, {0, 1, 1, 1, 5}, 12);
  Operand transposed = isa::contiguousOperand(0, DType::kFloat32, {3, 4});
  transposed.strides = {1, 3};
  const auto stored = draw<float>(Opcode::kUniform, {0, 1, 1, 1, 5}, 12, transposed);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) EXPECT_EQ(stored[i + 3 * j], flat[4 * i + j]) << i << "," << j;
  }
}

}  // namespace
}  // namespace pto
