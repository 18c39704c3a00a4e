// The compiler (csrc/compiler): dead code and common subexpression elimination,
// fusion into tiled kernels and where it must stop, the memory plan (tile scratch,
// arena reuse by liveness), verification after each pass, and launching a compiled
// program on a stream against running its instructions one at a time.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/compiled_program.h"
#include "compiler/passes.h"
#include "compiler/program_launch.h"
#include "isa/program.h"
#include "kernels/execute.h"
#include "runtime/pto_runtime.h"

namespace {

using namespace pto;

isa::Program parsed(const std::string& text) {
  isa::ParseResult result = isa::parse(text);
  EXPECT_EQ(result.error, "") << text;
  return result.program;
}

// The project's origin's softmax by hand over rows x cols: max, subtract, exp, sum, divide.
std::string handSoftmax(int rows, int cols) {
  const std::string r = std::to_string(rows), c = std::to_string(cols);
  const std::string full = "[" + r + "," + c + ";" + c + ",1]@0", row = "[" + r + "," + c + ";1,0]@0";
  const std::string bytes = std::to_string(rows * cols * 4), row_bytes = std::to_string(rows * 4);
  return "buffer %0 input " + bytes + "\nbuffer %1 output " + bytes + "\nbuffer %2 temp " + row_bytes +
         "\nbuffer %3 temp " + bytes + "\nbuffer %4 temp " + bytes + "\nbuffer %5 temp " + row_bytes +
         "\ntamax %2:f32" + row + ", %0:f32" + full + "\ntsub %3:f32" + full + ", %0:f32" + full + ", %2:f32" + row +
         " alpha=1\ntexp %4:f32" + full + ", %3:f32" + full + "\ntsum %5:f32" + row + ", %4:f32" + full +
         " scale=1\ntdiv %1:f32" + full + ", %4:f32" + full + ", %5:f32" + row + "\n";
}

TEST(DeadCode, RemovesWhatNothingReadsAndKeepsWhatTheCallerSees) {
  isa::Program program = parsed(
      "buffer %0 input 16\nbuffer %1 output 16\nbuffer %2 temp 16\nbuffer %3 temp 16\n"
      "texp %2:f32[4;1]@0, %0:f32[4;1]@0\n"        // read by nothing live: dead
      "tlog %3:f32[4;1]@0, %0:f32[4;1]@0\n"        // read by the output's instruction
      "tneg %1:f32[4;1]@0, %3:f32[4;1]@0\n");
  EXPECT_EQ(compiler::eliminateDeadCode(program), 1);
  ASSERT_EQ(program.instructions.size(), 2u);
  EXPECT_EQ(isa::info(program.instructions[0].opcode).name, "tlog");
}

TEST(CommonSubexpressions, ReadersOfARepeatReadTheFirstResult) {
  isa::Program program = parsed(
      "buffer %0 input 16\nbuffer %1 output 16\nbuffer %2 temp 16\nbuffer %3 temp 16\n"
      "texp %2:f32[4;1]@0, %0:f32[4;1]@0\n"
      "texp %3:f32[4;1]@0, %0:f32[4;1]@0\n"
      "tadd %1:f32[4;1]@0, %2:f32[4;1]@0, %3:f32[4;1]@0 alpha=1\n");
  EXPECT_EQ(compiler::eliminateCommonSubexpressions(program), 1);
  ASSERT_EQ(program.instructions.size(), 2u);
  EXPECT_EQ(program.instructions[1].operands[1].buffer, 2);
  EXPECT_EQ(program.instructions[1].operands[2].buffer, 2);
}

TEST(CommonSubexpressions, AnInputWrittenInBetweenIsNotTheSameInput) {
  isa::Program program = parsed(
      "buffer %0 input 16\nbuffer %1 output 16\nbuffer %2 temp 16\nbuffer %3 temp 16\n"
      "texp %2:f32[4;1]@0, %0:f32[4;1]@0\n"
      "tneg %0:f32[4;1]@0, %0:f32[4;1]@0\n"
      "texp %3:f32[4;1]@0, %0:f32[4;1]@0\n"
      "tadd %1:f32[4;1]@0, %2:f32[4;1]@0, %3:f32[4;1]@0 alpha=1\n");
  EXPECT_EQ(compiler::eliminateCommonSubexpressions(program), 0);
}

TEST(Fusion, TheHandWrittenSoftmaxIsOneTiledKernelWithItsTemporariesInScratch) {
  const compiler::CompiledProgram compiled = compiler::compile(parsed(handSoftmax(512, 256)));
  ASSERT_EQ(compiled.kernels.size(), 1u);
  const compiler::Kernel& kernel = compiled.kernels[0];
  EXPECT_EQ(kernel.count, 5);
  EXPECT_EQ(kernel.tile_dim, 0);
  EXPECT_TRUE(kernel.parallel_tiles);
  EXPECT_GT(kernel.tileCount(), 1);
  EXPECT_LE(kernel.scratch_bytes, 192u * 1024u);  // the Unified Buffer
  EXPECT_EQ(compiled.fusedKernelCount(), 1);
  EXPECT_EQ(compiled.arena_bytes, 0u);
  for (int b = 2; b <= 5; ++b) EXPECT_EQ(compiled.placements[b].placement, compiler::Placement::kScratch) << b;
  EXPECT_EQ(compiler::verifyPlan(compiled), "");
}

TEST(Fusion, StopsWhereATileWouldReadAnotherTilesRows) {
  // The column sum reads every row of what the kernel wrote: it cannot join.
  isa::Program program = parsed(
      "buffer %0 input 1024\nbuffer %1 output 64\nbuffer %2 temp 1024\nbuffer %3 temp 1024\n"
      "texp %2:f32[16,16;16,1]@0, %0:f32[16,16;16,1]@0\n"
      "tneg %3:f32[16,16;16,1]@0, %2:f32[16,16;16,1]@0\n"
      "tsum %1:f32[16,16;0,1]@0, %3:f32[16,16;16,1]@0 scale=1\n");
  const compiler::CompiledProgram compiled = compiler::compile(program);
  ASSERT_EQ(compiled.kernels.size(), 2u);
  EXPECT_EQ(compiled.kernels[0].count, 2);
  EXPECT_EQ(compiled.kernels[1].count, 1);
  EXPECT_FALSE(compiled.kernels[1].tiled());
  EXPECT_EQ(compiled.placements[3].placement, compiler::Placement::kArena);
  // A transposed read of a tile-written buffer is another tile's rows too.
  isa::Program transposed = parsed(
      "buffer %0 input 1024\nbuffer %1 output 1024\nbuffer %2 temp 1024\n"
      "texp %2:f32[16,16;16,1]@0, %0:f32[16,16;16,1]@0\n"
      "tneg %1:f32[16,16;16,1]@0, %2:f32[16,16;1,16]@0\n");
  EXPECT_EQ(compiler::compile(transposed).fusedKernelCount(), 0);
}

TEST(CollapseDims, LeadingDimensionsMergeWhereEveryOperandAllows) {
  isa::Program program = parsed(
      "buffer %0 input 4096\nbuffer %1 output 4096\nbuffer %2 input 64\nbuffer %3 output 128\n"
      "tadd %1:f32[4,16,16;256,16,1]@0, %0:f32[4,16,16;256,16,1]@0, %2:f32[4,16,16;0,0,1]@0 alpha=1\n"
      "tsum %3:f32[4,8,16;8,1,0]@0, %0:f32[4,8,16;256,16,1]@0 scale=1\n"   // a strided input: no merge
      "tsoftmax %1:f32[4,16,16;256,16,1]@0, %0:f32[4,16,16;256,16,1]@0\n");
  EXPECT_EQ(compiler::collapseLeadingDims(program), 2);
  const isa::Operand& add = program.instructions[0].operands[0];
  ASSERT_EQ(add.rank, 2);
  EXPECT_EQ(add.shape[0], 64);
  EXPECT_EQ(add.strides[0], 16);
  EXPECT_EQ(program.instructions[0].operands[2].strides[0], 0);  // the broadcast row stays broadcast
  EXPECT_EQ(program.instructions[1].operands[0].rank, 3);
  EXPECT_EQ(program.instructions[2].operands[0].rank, 2);  // the row op keeps its rows
  EXPECT_EQ(isa::verify(program), "");
}

TEST(Fusion, AGemmTakesItsBiasAndElementwiseEpilogueButNotAReduction) {
  // out = gelu(x @ w + bias); then a row sum of it, in a kernel of its own.
  const compiler::CompiledProgram compiled = compiler::compile(parsed(
      "buffer %0 input 8192\nbuffer %1 input 4096\nbuffer %2 input 128\nbuffer %3 temp 8192\n"
      "buffer %4 output 8192\nbuffer %5 output 256\n"
      "tmov %3:f32[64,32;32,1]@0, %2:f32[64,32;0,1]@0\n"
      "tmatmul %3:f32[64,32;32,1]@0, %0:f32[64,32;32,1]@0, %1:f32[32,32;32,1]@0 alpha=1 beta=1\n"
      "tgelu %4:f32[64,32;32,1]@0, %3:f32[64,32;32,1]@0\n"
      "tsum %5:f32[64,32;1,0]@0, %4:f32[64,32;32,1]@0 scale=1\n"));
  ASSERT_EQ(compiled.kernels.size(), 2u);
  EXPECT_EQ(compiled.kernels[0].count, 3);
  EXPECT_FALSE(compiled.kernels[0].parallel_tiles);  // BLAS bands each GEMM itself
  EXPECT_EQ(compiled.placements[3].placement, compiler::Placement::kScratch);
  EXPECT_EQ(compiled.kernels[1].count, 1);
}

TEST(MemoryPlan, TemporariesShareTheArenaByLivenessOrLiveInAnOutputNotYetWritten) {
  // Sorts do not fuse, so each is a kernel and every temporary crosses kernels.
  isa::Program program = parsed(
      "buffer %0 input 64\nbuffer %1 output 128\nbuffer %2 temp 128\nbuffer %3 temp 128\nbuffer %4 temp 128\n"
      "buffer %5 temp 128\n"
      "targsort %2:i64[16;1]@0, %0:f32[16;1]@0 axis=0 descending=0\n"
      "targsort %3:i64[16;1]@0, %2:i64[16;1]@0 axis=0 descending=0\n"
      "targsort %4:i64[16;1]@0, %3:i64[16;1]@0 axis=0 descending=0\n"
      "targsort %5:i64[16;1]@0, %4:i64[16;1]@0 axis=0 descending=0\n"
      "targsort %1:i64[16;1]@0, %5:i64[16;1]@0 axis=0 descending=0\n");
  const compiler::CompiledProgram compiled = compiler::compile(program);
  const auto& placements = compiled.placements;
  // %2 (kernels 0-1) dies before the output %1 is written (kernel 4): it lives there;
  // %4 (2-3) as well, once %2 is gone; %3 and %5 share the arena, never live together.
  EXPECT_EQ(placements[2].placement, compiler::Placement::kInOutput);
  EXPECT_EQ(placements[2].host, 1);
  EXPECT_EQ(placements[4].placement, compiler::Placement::kInOutput);
  EXPECT_EQ(placements[3].placement, compiler::Placement::kArena);
  EXPECT_EQ(placements[5].placement, compiler::Placement::kArena);
  EXPECT_EQ(placements[3].offset, placements[5].offset);
  EXPECT_EQ(compiled.arena_bytes, 128u);
  EXPECT_EQ(compiler::verifyPlan(compiled), "");
  EXPECT_NE(compiler::print(compiled).find("# in output %1 @0"), std::string::npos);
}

TEST(Compile, AnInvalidProgramNamesThePassAndTheInstruction) {
  isa::Program program = parsed("buffer %0 input 16\nbuffer %1 output 16\ntexp %1:f32[8;1]@0, %0:f32[8;1]@0\n");
  try {
    compiler::compile(program);
    FAIL() << "an operand past its buffer verified";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("after parsing: instruction 0 (texp"), std::string::npos) << error.what();
  }
}

TEST(Compile, ThePrintedProgramParsesBackToTheSameInstructions) {
  const compiler::CompiledProgram compiled = compiler::compile(parsed(handSoftmax(64, 32)));
  const std::string text = compiler::print(compiled);
  EXPECT_NE(text.find("# kernel 0: 5 instructions fused"), std::string::npos) << text;
  EXPECT_EQ(parsed(text), compiled.program);
}

class ProgramLaunch : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(ptoGetDefaultStream(0, &stream_), PTO_SUCCESS); }
  ptoStream stream_ = nullptr;
};

TEST_F(ProgramLaunch, TheFusedSoftmaxMatchesItsInstructionsRunOneByOne) {
  constexpr int kRows = 300, kCols = 77;  // a last tile shorter than the others
  isa::Program program = parsed(handSoftmax(kRows, kCols));
  std::vector<float> x(kRows * kCols), fused(x.size()), reference(x.size());
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (float& v : x) v = normal(random);
  std::vector<float> row(kRows), work(x.size()), exps(x.size()), sums(kRows);
  std::vector<void*> unfused = {x.data(), reference.data(), row.data(), work.data(), exps.data(), sums.data()};
  for (const isa::Instruction& instruction : program.instructions) kernels::execute(instruction, unfused);

  auto compiled = std::make_shared<const compiler::CompiledProgram>(compiler::compile(program));
  ASSERT_EQ(compiled->fusedKernelCount(), 1);
  std::vector<void*> bound(program.buffers.size(), nullptr);
  std::vector<uint64_t> sizes(program.buffers.size(), 0);
  bound[0] = x.data(), sizes[0] = x.size() * 4;
  bound[1] = fused.data(), sizes[1] = fused.size() * 4;
  ASSERT_EQ(compiler::launchProgram(stream_, compiled, bound, sizes, nullptr), PTO_SUCCESS);
  ASSERT_EQ(ptoStreamSynchronize(stream_), PTO_SUCCESS);
  EXPECT_EQ(fused, reference);
}

TEST_F(ProgramLaunch, UnboundOrShortBuffersAreRefusedAndAFailingInstructionIsNamed) {
  auto compiled = std::make_shared<const compiler::CompiledProgram>(compiler::compile(parsed(
      "buffer %0 input 16\nbuffer %1 input 32\nbuffer %2 output 16\nbuffer %3 temp 16\n"
      "texp %3:f32[4;1]@0, %0:f32[4;1]@0\n"  // then a gather, which does not fuse: %3 is in the arena
      "tgather %2:f32[4;1]@0, %3:f32[4;1]@0, %1:i64[4;1]@0 axis=0 wrap=0\n")));
  ASSERT_GT(compiled->arena_bytes, 0u);
  std::vector<uint8_t> arena(compiled->arena_bytes);
  float x[4] = {1, 2, 3, 4}, out[4] = {};
  int64_t index[4] = {3, 2, 9, 0};  // 9 is out of range
  std::vector<void*> bound = {x, index, out, nullptr};
  std::vector<uint64_t> sizes = {16, 32, 8, 0};
  EXPECT_EQ(compiler::launchProgram(stream_, compiled, bound, sizes, arena.data()), PTO_ERROR_INVALID_VALUE);
  EXPECT_NE(std::string(ptoGetRecentErrMsg()).find("buffer %2 needs 16 bytes, got 8"), std::string::npos);
  sizes[2] = 16;
  EXPECT_EQ(compiler::launchProgram(stream_, compiled, bound, sizes, nullptr), PTO_ERROR_INVALID_VALUE);
  std::vector<void*> missing = {x, nullptr, out, nullptr};
  EXPECT_EQ(compiler::launchProgram(stream_, compiled, missing, sizes, arena.data()), PTO_ERROR_INVALID_VALUE);
  // Accepted, and failing at the sync with the instruction that failed.
  ASSERT_EQ(compiler::launchProgram(stream_, compiled, bound, sizes, arena.data()), PTO_SUCCESS);
  EXPECT_EQ(ptoStreamSynchronize(stream_), PTO_ERROR_LAUNCH_FAILED);
  EXPECT_NE(std::string(ptoGetRecentErrMsg()).find("instruction 1 (tgather)"), std::string::npos) << ptoGetRecentErrMsg();
  EXPECT_EQ(ptoStreamSynchronize(stream_), PTO_SUCCESS);  // reported once; the stream goes on
}

}  // namespace
