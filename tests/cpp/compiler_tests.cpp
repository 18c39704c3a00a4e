// The compiler (csrc/compiler): dead code and common subexpression elimination, copy forwarding,
// fusion into tiled stages and where it must stop, the memory plan (tile scratch,
// workspace reuse by liveness), verification after each pass, and a compiled
// program loaded and launched through the runtime against the same program run
// one instruction at a time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "compiler/passes.h"
#include "isa/program.h"
#include "isa/schedule.h"
#include "runtime/program.h"
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

// A target whose GEMM spreads each tile over the cores itself, as the sim's BLAS
// does: its GEMM stages run their tiles in order.
constexpr compiler::CompileOptions kGemmTilesInOrder{.gemm_tile_rows = 1024, .parallel_gemm_tiles = false};

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

TEST(CopyForwarding, ReadersOfACopyReadItsSourceAtTheCopysOffset) {
  // %2 is a copy of the second half of %0 (a clone of a slice), read through a view of its own.
  isa::Program program = parsed(
      "buffer %0 input 32\nbuffer %1 output 8\nbuffer %2 temp 16\n"
      "tmov %2:f32[2,2;2,1]@0, %0:f32[2,2;2,1]@4\n"
      "tneg %1:f32[2;1]@0, %2:f32[2;2]@1\n");
  EXPECT_EQ(compiler::forwardCopies(program), 1);
  ASSERT_EQ(program.instructions.size(), 1u);
  const isa::Operand& read = program.instructions[0].operands[1];
  EXPECT_EQ(read.buffer, 0);
  EXPECT_EQ(read.offset, 5);
  EXPECT_EQ(read.strides[0], 2);
}

TEST(CopyForwarding, ACopyStaysWhereItsSourceIsWrittenAfterItOrItsLayoutDiffers) {
  isa::Program written_after = parsed(
      "buffer %0 input 16\nbuffer %1 output 16\nbuffer %2 temp 16\n"
      "tmov %2:f32[4;1]@0, %0:f32[4;1]@0\n"
      "tneg %0:f32[4;1]@0, %0:f32[4;1]@0\n"
      "tadd %1:f32[4;1]@0, %2:f32[4;1]@0, %0:f32[4;1]@0 alpha=1\n");
  EXPECT_EQ(compiler::forwardCopies(written_after), 0);
  isa::Program transposed = parsed(
      "buffer %0 input 16\nbuffer %1 output 16\nbuffer %2 temp 16\n"
      "tmov %2:f32[2,2;2,1]@0, %0:f32[2,2;1,2]@0\n"
      "tneg %1:f32[2,2;2,1]@0, %2:f32[2,2;2,1]@0\n");
  EXPECT_EQ(compiler::forwardCopies(transposed), 0);
  isa::Program into_an_output = parsed(
      "buffer %0 input 16\nbuffer %1 output 16\nbuffer %2 output 16\n"
      "tmov %2:f32[4;1]@0, %0:f32[4;1]@0\n"
      "tneg %1:f32[4;1]@0, %2:f32[4;1]@0\n");
  EXPECT_EQ(compiler::forwardCopies(into_an_output), 0);
}

TEST(Fusion, TheHandWrittenSoftmaxIsOneTiledStageWithItsTemporariesInScratch) {
  const isa::ScheduledProgram compiled = compiler::compile(parsed(handSoftmax(512, 256)));
  ASSERT_EQ(compiled.stages.size(), 1u);
  const isa::Stage& stage = compiled.stages[0];
  EXPECT_EQ(stage.count, 5);
  EXPECT_EQ(stage.tile_dim, 0);
  EXPECT_TRUE(stage.parallel_tiles);
  EXPECT_GT(stage.tileCount(), 1);
  EXPECT_LE(stage.scratch_bytes, 192u * 1024u);  // the Unified Buffer
  EXPECT_EQ(compiled.fusedStageCount(), 1);
  EXPECT_EQ(compiled.workspace_bytes, 0u);
  for (int b = 2; b <= 5; ++b) EXPECT_EQ(compiled.placements[b].placement, isa::Placement::kScratch) << b;
  EXPECT_EQ(isa::verifySchedule(compiled), "");
}

TEST(Fusion, StopsWhereATileWouldReadAnotherTilesRows) {
  // The column sum reads every row of what the stage wrote: it cannot join.
  isa::Program program = parsed(
      "buffer %0 input 1024\nbuffer %1 output 64\nbuffer %2 temp 1024\nbuffer %3 temp 1024\n"
      "texp %2:f32[16,16;16,1]@0, %0:f32[16,16;16,1]@0\n"
      "tneg %3:f32[16,16;16,1]@0, %2:f32[16,16;16,1]@0\n"
      "tsum %1:f32[16,16;0,1]@0, %3:f32[16,16;16,1]@0 scale=1\n");
  const isa::ScheduledProgram compiled = compiler::compile(program);
  ASSERT_EQ(compiled.stages.size(), 2u);
  EXPECT_EQ(compiled.stages[0].count, 2);
  EXPECT_EQ(compiled.stages[1].count, 1);
  EXPECT_FALSE(compiled.stages[1].tiled());
  EXPECT_EQ(compiled.placements[3].placement, isa::Placement::kWorkspace);
  // A transposed read of a tile-written buffer is another tile's rows too.
  isa::Program transposed = parsed(
      "buffer %0 input 1024\nbuffer %1 output 1024\nbuffer %2 temp 1024\n"
      "texp %2:f32[16,16;16,1]@0, %0:f32[16,16;16,1]@0\n"
      "tneg %1:f32[16,16;16,1]@0, %2:f32[16,16;1,16]@0\n");
  EXPECT_EQ(compiler::compile(transposed).fusedStageCount(), 0);
}

TEST(CollapseDims, LeadingDimensionsMergeWhereEveryOperandAllows) {
  isa::Program program = parsed(
      "buffer %0 input 4096\nbuffer %1 output 4096\nbuffer %2 input 64\nbuffer %3 output 128\n"
      "tadd %1:f32[4,16,16;256,16,1]@0, %0:f32[4,16,16;256,16,1]@0, %2:f32[4,16,16;0,0,1]@0 alpha=1\n"
      "tsum %3:f32[4,8,16;8,1,0]@0, %0:f32[4,8,16;256,16,1]@0 scale=1\n"   // a strided input: no merge
      "tsoftmax %1:f32[4,16,16;256,16,1]@0, %0:f32[4,16,16;256,16,1]@0 zero_masked_rows=0\n");
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
  // out = gelu(x @ w + bias); then a row sum of it, in a stage of its own.
  const isa::ScheduledProgram compiled = compiler::compile(parsed(
      "buffer %0 input 8192\nbuffer %1 input 4096\nbuffer %2 input 128\nbuffer %3 temp 8192\n"
      "buffer %4 output 8192\nbuffer %5 output 256\n"
      "tmov %3:f32[64,32;32,1]@0, %2:f32[64,32;0,1]@0\n"
      "tmatmul %3:f32[64,32;32,1]@0, %0:f32[64,32;32,1]@0, %1:f32[32,32;32,1]@0 alpha=1 beta=1\n"
      "tgelu %4:f32[64,32;32,1]@0, %3:f32[64,32;32,1]@0\n"
      "tsum %5:f32[64,32;1,0]@0, %4:f32[64,32;32,1]@0 scale=1\n"), kGemmTilesInOrder);
  ASSERT_EQ(compiled.stages.size(), 2u);
  EXPECT_EQ(compiled.stages[0].count, 3);
  EXPECT_FALSE(compiled.stages[0].parallel_tiles);  // as the target asks
  EXPECT_EQ(compiled.placements[3].placement, isa::Placement::kScratch);
  EXPECT_EQ(compiled.stages[1].count, 1);
}

TEST(Fusion, RowsOnlyAGemmReadsAreItsPrologueInTileScratch) {
  // out = (x - rowmean(x)) @ w: the centred rows are a temporary the GEMM alone reads.
  const std::string buffers =
      "buffer %0 input 8192\nbuffer %1 input 4096\nbuffer %2 temp 256\nbuffer %3 temp 8192\n"
      "buffer %4 output 8192\nbuffer %5 output 8192\n";
  const std::string centre_then_gemm =
      "tsum %2:f32[64,32;1,0]@0, %0:f32[64,32;32,1]@0 scale=0.03125\n"
      "tsub %3:f32[64,32;32,1]@0, %0:f32[64,32;32,1]@0, %2:f32[64,32;1,0]@0 alpha=1\n"
      "tmatmul %4:f32[64,32;32,1]@0, %3:f32[64,32;32,1]@0, %1:f32[32,32;32,1]@0 alpha=1 beta=0\n";
  const isa::ScheduledProgram fused =
      compiler::compile(parsed(buffers + centre_then_gemm + "texpands %5:f32[64,32;32,1]@0 value=0\n"));
  ASSERT_EQ(fused.stages.size(), 2u);
  EXPECT_EQ(fused.stages[0].count, 3);
  EXPECT_EQ(fused.placements[2].placement, isa::Placement::kScratch);
  EXPECT_EQ(fused.placements[3].placement, isa::Placement::kScratch);
  // Read again after the GEMM, the centred rows are memory, and the GEMM a stage of its own.
  const isa::ScheduledProgram apart =
      compiler::compile(parsed(buffers + centre_then_gemm + "tneg %5:f32[64,32;32,1]@0, %3:f32[64,32;32,1]@0\n"));
  ASSERT_EQ(apart.stages.size(), 3u);
  EXPECT_EQ(apart.stages[1].count, 1);
  EXPECT_NE(apart.placements[3].placement, isa::Placement::kScratch);
}

TEST(MemoryPlan, TemporariesShareTheWorkspaceByLivenessOrLiveInAnOutputNotYetWritten) {
  // Sorts do not fuse, so each is a stage and every temporary crosses stages.
  isa::Program program = parsed(
      "buffer %0 input 64\nbuffer %1 output 128\nbuffer %2 temp 128\nbuffer %3 temp 128\nbuffer %4 temp 128\n"
      "buffer %5 temp 128\n"
      "targsort %2:i64[16;1]@0, %0:f32[16;1]@0 axis=0 descending=0\n"
      "targsort %3:i64[16;1]@0, %2:i64[16;1]@0 axis=0 descending=0\n"
      "targsort %4:i64[16;1]@0, %3:i64[16;1]@0 axis=0 descending=0\n"
      "targsort %5:i64[16;1]@0, %4:i64[16;1]@0 axis=0 descending=0\n"
      "targsort %1:i64[16;1]@0, %5:i64[16;1]@0 axis=0 descending=0\n");
  const isa::ScheduledProgram compiled = compiler::compile(program);
  const auto& placements = compiled.placements;
  // %2 (stages 0-1) dies before the output %1 is written (stage 4): it lives there;
  // %4 (2-3) as well, once %2 is gone; %3 and %5 share the workspace, never live together.
  EXPECT_EQ(placements[2].placement, isa::Placement::kInOutput);
  EXPECT_EQ(placements[2].host, 1);
  EXPECT_EQ(placements[4].placement, isa::Placement::kInOutput);
  EXPECT_EQ(placements[3].placement, isa::Placement::kWorkspace);
  EXPECT_EQ(placements[5].placement, isa::Placement::kWorkspace);
  EXPECT_EQ(placements[3].offset, placements[5].offset);
  EXPECT_EQ(compiled.workspace_bytes, 128u);
  EXPECT_EQ(isa::verifySchedule(compiled), "");
  EXPECT_NE(isa::print(compiled).find("# in output %1 @0"), std::string::npos);
}

TEST(MemoryPlan, WhatAGemmsPrologueReadsLivesAtTheEndOfTheGemmsWiderOutput) {
  // h = x @ w; out = (h - rowmean(h)) @ w2, its tiles in order: each tile reads its rows of h
  // before it writes out's, whose rows are wider, so h fits at out's end and needs no workspace.
  auto program = [](int out_cols) {
    const std::string n = std::to_string(out_cols), bytes = std::to_string(64 * out_cols * 4);
    return "buffer %0 input 8192\nbuffer %1 input 4096\nbuffer %2 input " + std::to_string(32 * out_cols * 4) +
           "\nbuffer %3 temp 8192\nbuffer %4 temp 256\nbuffer %5 temp 8192\nbuffer %6 output " + bytes + "\n"
           "tmatmul %3:f32[64,32;32,1]@0, %0:f32[64,32;32,1]@0, %1:f32[32,32;32,1]@0 alpha=1 beta=0\n"
           "tsum %4:f32[64,32;1,0]@0, %3:f32[64,32;32,1]@0 scale=0.03125\n"
           "tsub %5:f32[64,32;32,1]@0, %3:f32[64,32;32,1]@0, %4:f32[64,32;1,0]@0 alpha=1\n"
           "tmatmul %6:f32[64," + n + ";" + n + ",1]@0, %5:f32[64,32;32,1]@0, %2:f32[32," + n + ";" + n + ",1]@0 alpha=1 beta=0\n";
  };
  const isa::ScheduledProgram wide = compiler::compile(parsed(program(64)), kGemmTilesInOrder);
  ASSERT_EQ(wide.stages.size(), 2u);
  EXPECT_EQ(wide.placements[3].placement, isa::Placement::kInOutput);
  EXPECT_EQ(wide.placements[3].host, 6);
  EXPECT_EQ(wide.placements[3].offset, 64u * 64 * 4 - 8192);
  EXPECT_EQ(wide.workspace_bytes, 0u);
  // Narrower rows of out: a tile would write over rows of h that later tiles read.
  const isa::ScheduledProgram narrow = compiler::compile(parsed(program(16)), kGemmTilesInOrder);
  EXPECT_EQ(narrow.placements[3].placement, isa::Placement::kWorkspace);
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

// A target with a smaller Unified Buffer gets smaller tiles; without fusion,
// every instruction is a stage of its own.
TEST(Compile, OptionsBoundTheTileScratchOrTurnFusionOff) {
  const isa::Program program = parsed(handSoftmax(512, 256));
  const isa::ScheduledProgram roomy = compiler::compile(program);
  const isa::ScheduledProgram tight = compiler::compile(program, {.tile_memory_bytes = 32 * 1024});
  ASSERT_EQ(roomy.stages.size(), 1u);
  ASSERT_EQ(tight.stages.size(), 1u);
  EXPECT_LE(tight.stages[0].scratch_bytes, 32u * 1024u);
  EXPECT_GT(tight.stages[0].tileCount(), roomy.stages[0].tileCount());
  EXPECT_EQ(isa::verifySchedule(tight), "");

  const isa::ScheduledProgram unfused = compiler::compile(program, {.fuse = false});
  EXPECT_EQ(unfused.stages.size(), 5u);
  EXPECT_EQ(unfused.fusedStageCount(), 0);
  for (const isa::Stage& stage : unfused.stages) EXPECT_EQ(stage.count, 1);
  EXPECT_EQ(isa::verifySchedule(unfused), "");
}

// The schedule follows the target's tuning, given as options (a device's
// attributes), never the host that compiles: an elementwise stage's tiles take the
// tile budget over their rows' elements, a GEMM stage's the target's GEMM rows,
// run in parallel or in order as the target says.
TEST(Compile, TheTargetsTuningSizesTheTilesAndOrdersTheGemmTiles) {
  const std::string rows_of_64 = "f32[1024,64;64,1]@0";
  const isa::Program elementwise = parsed(
      "buffer %0 input 262144\nbuffer %1 input 262144\nbuffer %2 temp 262144\nbuffer %3 output 262144\n"
      "tmul %2:" + rows_of_64 + ", %0:" + rows_of_64 + ", %1:" + rows_of_64 + "\n"
      "trelu %3:" + rows_of_64 + ", %2:" + rows_of_64 + "\n");
  const isa::ScheduledProgram small = compiler::compile(elementwise, {.tile_elements = 2048});
  const isa::ScheduledProgram large = compiler::compile(elementwise, {.tile_elements = 8192});
  ASSERT_EQ(small.stages.size(), 1u);
  ASSERT_EQ(large.stages.size(), 1u);
  EXPECT_EQ(small.stages[0].tile_rows, 2048 / 64);
  EXPECT_EQ(large.stages[0].tile_rows, 8192 / 64);
  EXPECT_TRUE(small.stages[0].parallel_tiles);
  EXPECT_EQ(isa::verifySchedule(small), "");
  EXPECT_EQ(isa::verifySchedule(large), "");

  // out = relu(x @ w), the epilogue fused into the GEMM's stage.
  const isa::Program gemm = parsed(
      "buffer %0 input 65536\nbuffer %1 input 8192\nbuffer %2 temp 32768\nbuffer %3 output 32768\n"
      "tmatmul %2:f32[256,32;32,1]@0, %0:f32[256,64;64,1]@0, %1:f32[64,32;32,1]@0 alpha=1 beta=0\n"
      "trelu %3:f32[256,32;32,1]@0, %2:f32[256,32;32,1]@0\n");
  const isa::ScheduledProgram parallel =
      compiler::compile(gemm, {.gemm_tile_rows = 64, .parallel_gemm_tiles = true});
  const isa::ScheduledProgram in_order =
      compiler::compile(gemm, {.gemm_tile_rows = 128, .parallel_gemm_tiles = false});
  ASSERT_EQ(parallel.stages.size(), 1u);
  ASSERT_EQ(in_order.stages.size(), 1u);
  EXPECT_NE(isa::print(parallel).find("# stage 0: 2 instructions fused, tiles of 64 along dim 0 of [256], 4 tiles\n"),
            std::string::npos) << isa::print(parallel);
  EXPECT_NE(isa::print(in_order).find("tiles of 128 along dim 0 of [256], 2 tiles in order\n"), std::string::npos)
      << isa::print(in_order);
  EXPECT_EQ(isa::verifySchedule(parallel), "");
  EXPECT_EQ(isa::verifySchedule(in_order), "");
}

TEST(Compile, ThePrintedProgramParsesBackToTheSameInstructions) {
  const isa::ScheduledProgram compiled = compiler::compile(parsed(handSoftmax(64, 32)));
  const std::string text = isa::print(compiled);
  EXPECT_EQ(text.rfind("# 1 stages (1 fused), workspace 0 bytes\n", 0), 0u) << text;
  EXPECT_NE(text.find("# stage 0: 5 instructions fused"), std::string::npos) << text;
  EXPECT_EQ(parsed(text), compiled.program);
}

// x * 2 + 1 as a compiled graph lowers it: the scalars' fills, and what is computed
// from them alone, run once at load into the program's constants; a temporary that a
// launch also writes stays a workspace one.
const char* kScaledPlusOne =
    "buffer %0 temp 4\nbuffer %1 temp 64\nbuffer %2 input 64\nbuffer %3 temp 4\nbuffer %4 output 64\n"
    "buffer %5 temp 4\nbuffer %6 temp 64\n"
    "texpands %0:f32[;]@0 value=2\n"
    "texpands %5:f32[;]@0 value=0.5\n"
    "tadd %3:f32[;]@0, %5:f32[;]@0, %5:f32[;]@0 alpha=1\n"  // 1, from constants alone
    "texpands %6:f32[16;1]@0 value=0\n"                       // then written from the input as well
    "tmul %1:f32[16;1]@0, %2:f32[16;1]@0, %0:f32[16;0]@0\n"
    "tmax %6:f32[16;1]@0, %6:f32[16;1]@0, %2:f32[16;1]@0\n"
    "tadd %4:f32[16;1]@0, %1:f32[16;1]@0, %3:f32[16;0]@0 alpha=1\n"
    "tadd %4:f32[16;1]@0, %4:f32[16;1]@0, %6:f32[16;1]@0 alpha=0\n";

TEST(Compile, StagesOfConstantsRunAtLoadIntoThePrograms) {
  const isa::ScheduledProgram compiled = compiler::compile(parsed(kScaledPlusOne));
  const auto at_load = [&](int32_t instruction) {
    for (const isa::Stage& stage : compiled.stages) {
      if (instruction >= stage.first && instruction < stage.first + stage.count) return stage.at_load;
    }
    return false;
  };
  EXPECT_TRUE(at_load(0) && at_load(1) && at_load(2)) << isa::print(compiled);
  EXPECT_FALSE(at_load(3) || at_load(4) || at_load(5) || at_load(6)) << isa::print(compiled);
  for (int b : {0, 3, 5}) EXPECT_EQ(compiled.placements[b].placement, isa::Placement::kConstant) << b;
  EXPECT_NE(compiled.placements[6].placement, isa::Placement::kConstant);
  EXPECT_EQ(compiled.constant_bytes, 3u * 64);
  EXPECT_EQ(isa::verifySchedule(compiled), "");
  const std::string text = isa::print(compiled);
  EXPECT_NE(text.find("3 at load), workspace"), std::string::npos) << text;
  EXPECT_NE(text.find("constants 192 bytes\n"), std::string::npos) << text;
  EXPECT_NE(text.find("buffer %3 temp 4  # constant @"), std::string::npos) << text;
  EXPECT_EQ(parsed(text), compiled.program);
}

TEST(VerifySchedule, RefusesConstantsALaunchWritesAndAtLoadStagesThatTouchOtherBuffers) {
  const isa::ScheduledProgram compiled = compiler::compile(parsed(kScaledPlusOne));
  isa::ScheduledProgram launch_touches = compiled;
  for (isa::Stage& stage : launch_touches.stages) stage.at_load = true;
  EXPECT_NE(isa::verifySchedule(launch_touches).find("is written at load only but is not a constant"), std::string::npos);
  isa::ScheduledProgram not_written = compiled;
  for (isa::Stage& stage : not_written.stages) stage.at_load = false;
  EXPECT_NE(isa::verifySchedule(not_written).find("is a constant that is not written at load only"), std::string::npos);
  isa::ScheduledProgram overlapping = compiled;
  overlapping.placements[3].offset = overlapping.placements[0].offset;
  EXPECT_NE(isa::verifySchedule(overlapping).find("overlap"), std::string::npos);
  isa::ScheduledProgram overrun = compiled;
  overrun.constant_bytes = 64;
  EXPECT_NE(isa::verifySchedule(overrun).find("overruns the program's constants"), std::string::npos);
}

// A scheduled program goes to the device through the runtime, as the torch glue
// sends it: loaded as a handle, launched on a stream with device buffers bound.
class ProgramLaunch : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(ptoGetDefaultStream(0, &stream_), PTO_SUCCESS); }
  void TearDown() override {
    for (ptoProgram program : programs_) EXPECT_EQ(ptoProgramRelease(program), PTO_SUCCESS);
    for (void* memory : device_memory_) EXPECT_EQ(ptoFree(memory), PTO_SUCCESS);
  }

  ptoProgram load(isa::ScheduledProgram scheduled) {
    ptoProgram program = nullptr;
    EXPECT_EQ(rt::loadProgram(std::make_shared<const isa::ScheduledProgram>(std::move(scheduled)), &program),
              PTO_SUCCESS) << ptoGetRecentErrMsg();
    if (program != nullptr) programs_.push_back(program);
    return program;
  }

  // Device memory of `bytes` (at least one), released at the end of the test.
  void* deviceMemory(size_t bytes) {
    void* memory = nullptr;
    EXPECT_EQ(ptoMalloc(&memory, std::max<size_t>(bytes, 1)), PTO_SUCCESS);
    device_memory_.push_back(memory);
    return memory;
  }

  template <typename T>
  void* upload(const std::vector<T>& values) {
    void* memory = deviceMemory(values.size() * sizeof(T));
    EXPECT_EQ(ptoMemcpy(memory, values.data(), values.size() * sizeof(T), PTO_MEMCPY_HOST_TO_DEVICE), PTO_SUCCESS);
    return memory;
  }

  template <typename T>
  std::vector<T> download(const void* memory, size_t count) {
    std::vector<T> values(count);
    EXPECT_EQ(ptoMemcpy(values.data(), memory, count * sizeof(T), PTO_MEMCPY_DEVICE_TO_HOST), PTO_SUCCESS);
    return values;
  }

  // Launches `program` with its first two buffers bound to `in` and `out` (the
  // others temporaries) and a workspace of the size the program asks for.
  ptoError launchInOut(ptoProgram program, size_t buffer_count, void* in, void* out, uint64_t bytes) {
    std::vector<void*> bound(buffer_count, nullptr);
    std::vector<uint64_t> sizes(buffer_count, 0);
    bound[0] = in, sizes[0] = bytes;
    bound[1] = out, sizes[1] = bytes;
    size_t workspace_bytes = 0;
    EXPECT_EQ(ptoProgramGetWorkspaceSize(program, &workspace_bytes), PTO_SUCCESS);
    void* workspace = workspace_bytes > 0 ? deviceMemory(workspace_bytes) : nullptr;
    return ptoProgramLaunch(program, stream_, bound.data(), sizes.data(), buffer_count, workspace);
  }

  ptoStream stream_ = nullptr;
  std::vector<ptoProgram> programs_;
  std::vector<void*> device_memory_;
};

TEST_F(ProgramLaunch, TheFusedSoftmaxMatchesItsInstructionsRunOneByOne) {
  constexpr int kRows = 300, kCols = 77;  // a last tile shorter than the others
  const isa::Program program = parsed(handSoftmax(kRows, kCols));
  std::vector<float> x(kRows * kCols);
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (float& v : x) v = normal(random);
  const uint64_t bytes = x.size() * sizeof(float);

  // The reference: the same program unfused, each instruction a stage of its own
  // and every temporary in the workspace.
  const ptoProgram one_by_one = load(isa::scheduleInOrder(program));
  const isa::ScheduledProgram compiled = compiler::compile(program);
  ASSERT_EQ(compiled.fusedStageCount(), 1);
  EXPECT_EQ(compiled.workspace_bytes, 0u);  // the temporaries live in tile scratch
  const ptoProgram fused = load(compiled);
  ASSERT_TRUE(one_by_one != nullptr && fused != nullptr);

  void* in = upload(x);
  void* reference = deviceMemory(bytes);
  void* out = deviceMemory(bytes);
  ASSERT_EQ(launchInOut(one_by_one, program.buffers.size(), in, reference, bytes), PTO_SUCCESS) << ptoGetRecentErrMsg();
  ASSERT_EQ(launchInOut(fused, program.buffers.size(), in, out, bytes), PTO_SUCCESS) << ptoGetRecentErrMsg();
  ASSERT_EQ(ptoStreamSynchronize(stream_), PTO_SUCCESS) << ptoGetRecentErrMsg();
  EXPECT_EQ(download<float>(out, x.size()), download<float>(reference, x.size()));
}

// While profiling, the driver records the launch as one program activity and the
// fused stage as one activity inside it, named by its instructions.
TEST_F(ProgramLaunch, AFusedStageIsProfiledAsOneActivityNamingItsInstructions) {
  constexpr int kRows = 512, kCols = 256;
  constexpr uint64_t kBytes = kRows * kCols * 4;
  const isa::Program program = parsed(handSoftmax(kRows, kCols));
  const isa::ScheduledProgram compiled = compiler::compile(program);
  ASSERT_EQ(compiled.stages.size(), 1u);
  const int64_t tiles = compiled.stages[0].tileCount();
  ASSERT_GT(tiles, 1);
  const ptoProgram fused = load(compiled);
  ASSERT_NE(fused, nullptr);
  void* in = upload(std::vector<float>(kRows * kCols, 1.0f));
  void* out = deviceMemory(kBytes);
  std::vector<ptoActivity> activities(8);
  size_t count = 0;
  ASSERT_EQ(ptoProfilerFlush(activities.data(), activities.size(), &count), PTO_SUCCESS);  // drop older ones
  ASSERT_EQ(ptoProfilerStart(), PTO_SUCCESS);
  ASSERT_EQ(launchInOut(fused, program.buffers.size(), in, out, kBytes), PTO_SUCCESS) << ptoGetRecentErrMsg();
  ASSERT_EQ(ptoStreamSynchronize(stream_), PTO_SUCCESS);
  ASSERT_EQ(ptoProfilerStop(), PTO_SUCCESS);
  ASSERT_EQ(ptoProfilerFlush(activities.data(), activities.size(), &count), PTO_SUCCESS);
  // The launch call (on this thread), the program and its one stage (on the stream).
  ASSERT_EQ(count, 3u);
  const auto of_kind = [&](ptoActivityKind kind) {
    return std::find_if(activities.begin(), activities.begin() + count,
                        [&](const ptoActivity& a) { return a.kind == kind; });
  };
  ASSERT_NE(of_kind(PTO_ACTIVITY_LAUNCH), activities.begin() + count);
  ASSERT_NE(of_kind(PTO_ACTIVITY_STAGE), activities.begin() + count);
  ASSERT_NE(of_kind(PTO_ACTIVITY_PROGRAM), activities.begin() + count);
  const ptoActivity& stage = *of_kind(PTO_ACTIVITY_STAGE);
  const ptoActivity& launch = *of_kind(PTO_ACTIVITY_PROGRAM);
  EXPECT_STREQ(launch.name, "program");
  EXPECT_STREQ(launch.detail, "5 instructions in 1 stages");
  EXPECT_STREQ(stage.name, "fused:tamax+tsub+texp+tsum+tdiv");
  EXPECT_EQ(std::string(stage.detail), "f32[512,256] <- f32[512,256], " + std::to_string(tiles) + " tiles");
  // What reaches memory: the input, read by tamax and tsub, and the output; the
  // temporaries stay in tile scratch.
  EXPECT_EQ(stage.bytes, 3 * kBytes);
  EXPECT_EQ(stage.stream, launch.stream);
  EXPECT_GE(stage.start_ns, launch.start_ns);
  EXPECT_LE(stage.end_ns, launch.end_ns);
  EXPECT_EQ(download<float>(out, kRows * kCols), std::vector<float>(kRows * kCols, 1.0f / kCols));
}

TEST_F(ProgramLaunch, UnboundOrShortBuffersAreRefusedAndAFailingInstructionIsNamed) {
  isa::ScheduledProgram compiled = compiler::compile(parsed(
      "buffer %0 input 16\nbuffer %1 input 32\nbuffer %2 output 16\nbuffer %3 temp 16\n"
      "texp %3:f32[4;1]@0, %0:f32[4;1]@0\n"  // then a gather, which does not fuse: %3 is in the workspace
      "tgather %2:f32[4;1]@0, %3:f32[4;1]@0, %1:i64[4;1]@0 axis=0 wrap=0\n"));
  ASSERT_EQ(compiled.placements[3].placement, isa::Placement::kWorkspace);
  ASSERT_GT(compiled.workspace_bytes, 0u);
  const uint64_t workspace_bytes = compiled.workspace_bytes;
  const ptoProgram program = load(std::move(compiled));
  ASSERT_NE(program, nullptr);
  size_t asked = 0;
  ASSERT_EQ(ptoProgramGetWorkspaceSize(program, &asked), PTO_SUCCESS);
  EXPECT_EQ(asked, workspace_bytes);

  void* workspace = deviceMemory(workspace_bytes);
  void* x = upload(std::vector<float>{1, 2, 3, 4});
  void* index = upload(std::vector<int64_t>{3, 2, 9, 0});  // 9 is out of range
  void* out = deviceMemory(16);
  std::vector<void*> bound = {x, index, out, nullptr};  // the temporary's entry is ignored
  std::vector<uint64_t> sizes = {16, 32, 8, 0};
  EXPECT_EQ(ptoProgramLaunch(program, stream_, bound.data(), sizes.data(), 4, workspace), PTO_ERROR_INVALID_VALUE);
  EXPECT_NE(std::string(ptoGetRecentErrMsg()).find("buffer %2 needs 16 bytes, got 8"), std::string::npos)
      << ptoGetRecentErrMsg();
  sizes[2] = 16;
  EXPECT_EQ(ptoProgramLaunch(program, stream_, bound.data(), sizes.data(), 4, nullptr), PTO_ERROR_INVALID_VALUE);
  EXPECT_NE(std::string(ptoGetRecentErrMsg()).find("workspace"), std::string::npos) << ptoGetRecentErrMsg();
  std::vector<void*> missing = {x, nullptr, out, nullptr};
  EXPECT_EQ(ptoProgramLaunch(program, stream_, missing.data(), sizes.data(), 4, workspace), PTO_ERROR_INVALID_VALUE);
  EXPECT_NE(std::string(ptoGetRecentErrMsg()).find("buffer %1 is not bound"), std::string::npos)
      << ptoGetRecentErrMsg();
  // Accepted, and failing at the sync with the instruction that failed.
  ASSERT_EQ(ptoProgramLaunch(program, stream_, bound.data(), sizes.data(), 4, workspace), PTO_SUCCESS);
  EXPECT_EQ(ptoStreamSynchronize(stream_), PTO_ERROR_LAUNCH_FAILED);
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_NE(message.find("asynchronous program failed on pto:0"), std::string::npos) << message;
  EXPECT_NE(message.find("instruction 1 (tgather): index 9 is out of bounds"), std::string::npos) << message;
  EXPECT_EQ(ptoStreamSynchronize(stream_), PTO_SUCCESS);  // reported once; the stream goes on
}

TEST_F(ProgramLaunch, ConstantsComputedAtLoadServeEveryLaunchWithoutAWorkspace) {
  isa::ScheduledProgram compiled = compiler::compile(parsed(
      "buffer %0 input 64\nbuffer %1 output 64\nbuffer %2 temp 4\nbuffer %3 temp 4\n"
      "texpands %2:f32[;]@0 value=2\n"
      "texpands %3:f32[;]@0 value=1\n"
      "tmul %1:f32[16;1]@0, %0:f32[16;1]@0, %2:f32[16;0]@0\n"
      "tadd %1:f32[16;1]@0, %1:f32[16;1]@0, %3:f32[16;0]@0 alpha=1\n"));
  ASSERT_EQ(compiled.workspace_bytes, 0u);
  const ptoProgram program = load(std::move(compiled));
  ASSERT_NE(program, nullptr);
  std::vector<float> x(16), expected(16);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i) - 7.5f, expected[i] = x[i] * 2 + 1;
  void* in = upload(x);
  for (int launch = 0; launch < 3; ++launch) {
    void* out = deviceMemory(64);
    ASSERT_EQ(launchInOut(program, 4, in, out, 64), PTO_SUCCESS) << ptoGetRecentErrMsg();
    ASSERT_EQ(ptoStreamSynchronize(stream_), PTO_SUCCESS) << ptoGetRecentErrMsg();
    EXPECT_EQ(download<float>(out, 16), expected) << "launch " << launch;
  }
}

TEST_F(ProgramLaunch, AConstantThatCannotBeComputedFailsTheLoadNamingItsInstruction) {
  isa::ScheduledProgram compiled = compiler::compile(parsed(
      "buffer %0 temp 8\nbuffer %1 temp 16\nbuffer %2 temp 16\nbuffer %3 input 16\nbuffer %4 output 16\n"
      "texpands %0:i64[;]@0 value=9\n"  // an index out of range of what it gathers from
      "texpands %1:f32[4;1]@0 value=1\n"
      "tgather %2:f32[4;1]@0, %1:f32[4;1]@0, %0:i64[4;0]@0 axis=0 wrap=0\n"
      "tadd %4:f32[4;1]@0, %3:f32[4;1]@0, %2:f32[4;1]@0 alpha=1\n"));
  ASSERT_EQ(compiled.placements[2].placement, isa::Placement::kConstant) << isa::print(compiled);
  ptoProgram program = nullptr;
  EXPECT_EQ(rt::loadProgram(std::make_shared<const isa::ScheduledProgram>(std::move(compiled)), &program),
            PTO_ERROR_INVALID_VALUE);
  EXPECT_EQ(program, nullptr);
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_NE(message.find("computing the program's constants: instruction 2 (tgather): index 9 is out of bounds"),
            std::string::npos) << message;
}

}  // namespace
