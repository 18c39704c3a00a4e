// The recipes (csrc/recipes): the table covers every lowered row of
// aten_instructions.def, the view rules match aten's, and the steps a recipe gives
// are a program the ISA's verifier accepts, for the ops whose recipes branch.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "isa/program.h"
#include "recipes/aten_instructions.h"
#include "recipes/recipe.h"

namespace {

using namespace pto;
using isa::DType;
using isa::Opcode;
using recipes::Arguments;
using recipes::View;

View contiguous(int32_t buffer, DType dtype, std::vector<int64_t> shape) {
  return {buffer, dtype, shape, recipes::contiguousStrides(shape), 0};
}

// The recipe's steps as a program: each buffer as large as its views reach.
isa::Program programOf(const recipes::Recipe& recipe, int32_t results_from) {
  isa::Program program;
  const size_t buffers = static_cast<size_t>(recipe.callerBuffers()) + recipe.temporaries().size();
  program.buffers.resize(buffers);
  for (size_t b = 0; b < buffers; ++b) {
    const auto index = static_cast<int32_t>(b);
    program.buffers[b].kind = index >= recipe.callerBuffers() ? isa::BufferKind::kTemp
                              : index >= results_from          ? isa::BufferKind::kOutput
                                                               : isa::BufferKind::kInput;
  }
  for (const recipes::Step& step : recipe.steps()) {
    isa::Instruction instruction;
    instruction.opcode = step.opcode;
    instruction.immediates = step.immediates;
    for (const View& view : step.operands) {
      isa::Operand operand;
      operand.buffer = view.buffer;
      operand.dtype = view.dtype;
      operand.rank = static_cast<int32_t>(view.rank());
      int64_t last = view.offset;
      for (int64_t d = 0; d < view.rank(); ++d) {
        operand.shape[d] = view.shape[d];
        operand.strides[d] = view.strides[d];
        last += (view.shape[d] - 1) * view.strides[d];
      }
      operand.offset = view.offset;
      uint64_t& bytes = program.buffers[static_cast<size_t>(view.buffer)].bytes;
      bytes = std::max<uint64_t>(bytes, static_cast<uint64_t>(last + 1) * isa::dtypeSize(view.dtype));
      instruction.operands.push_back(operand);
    }
    program.instructions.push_back(instruction);
  }
  return program;
}

std::vector<Opcode> opcodesOf(const recipes::Recipe& recipe) {
  std::vector<Opcode> opcodes;
  for (const recipes::Step& step : recipe.steps()) opcodes.push_back(step.opcode);
  return opcodes;
}

TEST(Recipes, EveryLoweredRowOfTheAtenTableHasItsRecipe) {
  for (const recipes::AtenInstruction& row : recipes::kAtenInstructions) {
    const std::string op = "aten::" + std::string(row.op);
    if (row.form == "Unary" || row.form == "Gradient") { EXPECT_NE(recipes::find(op), nullptr) << op; }
    if (row.form == "Binary" || row.form == "Compare") {
      EXPECT_NE(recipes::find(op + ".Tensor"), nullptr) << op;
      EXPECT_NE(recipes::find(op + ".Scalar"), nullptr) << op;
    }
  }
  EXPECT_EQ(recipes::find("aten::no_such_op"), nullptr);
  EXPECT_THROW(recipes::build("aten::no_such_op", {}, 0), std::invalid_argument);
}

TEST(Recipes, ViewAsFollowsAtensViewRule) {
  const View x = contiguous(0, DType::kFloat32, {2, 3, 4});
  EXPECT_EQ(recipes::viewAs(x, {6, 4})->strides, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(recipes::viewAs(x, {2, 12})->strides, (std::vector<int64_t>{12, 1}));
  EXPECT_EQ(recipes::viewAs(x, {2, 3, 2, 2})->strides, (std::vector<int64_t>{12, 4, 2, 1}));
  const View transposed = recipes::permute(x, {0, 2, 1});  // [2, 4, 3], strides 12, 1, 4
  EXPECT_FALSE(recipes::viewAs(transposed, {2, 12}).has_value());
  EXPECT_EQ(recipes::viewAs(transposed, {8, 3}), std::nullopt);
  EXPECT_EQ(recipes::viewAs(recipes::sliced(x, 0, 1, 2), {12})->offset, 12);
}

TEST(Recipes, AReductionsResultIsSpreadOverTheInput) {
  const std::vector<int64_t> input{2, 3, 4};
  const View squeezed = contiguous(1, DType::kFloat32, {2, 4});
  EXPECT_EQ(recipes::spread(squeezed, input, {1}).strides, (std::vector<int64_t>{4, 0, 1}));
  const View kept = contiguous(1, DType::kFloat32, {2, 1, 4});
  EXPECT_EQ(recipes::spread(kept, input, {1}).strides, (std::vector<int64_t>{4, 0, 1}));
}

Arguments layerNormArguments(DType dtype, DType parameters) {
  return Arguments({{"input", contiguous(0, dtype, {4, 8})},
                    {"normalized_shape", std::vector<int64_t>{8}},
                    {"weight", contiguous(1, parameters, {8})},
                    {"bias", contiguous(2, parameters, {8})},
                    {"eps", 1e-5}},
                   {contiguous(3, dtype, {4, 8}), contiguous(4, dtype, {4, 1}), contiguous(5, dtype, {4, 1})});
}

TEST(Recipes, LayerNormIsThreeRowInstructionsWhereTheDTypesAgree) {
  const recipes::Recipe r = recipes::build("aten::native_layer_norm", layerNormArguments(DType::kFloat32, DType::kFloat32), 6);
  EXPECT_EQ(opcodesOf(r), (std::vector<Opcode>{Opcode::kLayerNorm, Opcode::kSum, Opcode::kRowRstd}));
  EXPECT_EQ(isa::verify(programOf(r, 3)), "");
}

TEST(Recipes, LayerNormOfFloat16WithFloat32ParametersComputesInFloat32) {
  const recipes::Recipe r = recipes::build("aten::native_layer_norm", layerNormArguments(DType::kFloat16, DType::kFloat32), 6);
  const std::vector<Opcode> opcodes = opcodesOf(r);
  EXPECT_EQ(opcodes.front(), Opcode::kConvert);  // the input to float32
  EXPECT_EQ(std::count(opcodes.begin(), opcodes.end(), Opcode::kConvert), 4);  // in; out, mean, rstd back
  EXPECT_EQ(isa::verify(programOf(r, 3)), "");
}

TEST(Recipes, SoftmaxOfIntegersDoesNotApply) {
  const Arguments args({{"self", contiguous(0, DType::kInt64, {2, 3})}, {"dim", int64_t{1}}, {"half_to_float", false}},
                       {contiguous(1, DType::kInt64, {2, 3})});
  EXPECT_THROW(recipes::build("aten::_softmax", args, 2), recipes::NotApplicable);
}

TEST(Recipes, SoftmaxAlongAnInnerDimMovesItLast) {
  const Arguments args({{"self", contiguous(0, DType::kFloat32, {2, 3, 4})}, {"dim", int64_t{1}}, {"half_to_float", false}},
                       {contiguous(1, DType::kFloat32, {2, 3, 4})});
  const recipes::Recipe r = recipes::build("aten::_softmax", args, 2);
  ASSERT_EQ(r.steps().size(), 1u);
  EXPECT_EQ(r.steps()[0].operands[1].shape, (std::vector<int64_t>{2, 4, 3}));
  EXPECT_EQ(r.steps()[0].operands[1].strides, (std::vector<int64_t>{12, 1, 4}));
}

TEST(Recipes, AScalarOperandIsAConstantFill) {
  const Arguments args({{"self", contiguous(0, DType::kFloat32, {5})}, {"other", 2.5}, {"alpha", int64_t{3}}},
                       {contiguous(1, DType::kFloat32, {5})});
  const recipes::Recipe r = recipes::build("aten::add.Scalar", args, 2);
  ASSERT_EQ(r.steps().size(), 2u);
  EXPECT_TRUE(r.steps()[0].constant);
  EXPECT_EQ(r.steps()[0].immediates[0], 2.5);
  EXPECT_EQ(r.steps()[1].opcode, Opcode::kAdd);
  EXPECT_EQ(r.steps()[1].immediates[0], 3.0);
  EXPECT_EQ(r.steps()[1].operands[2].strides, (std::vector<int64_t>{0}));
  EXPECT_EQ(isa::verify(programOf(r, 1)), "");
}

TEST(Recipes, VarMeanWritesBothResults) {
  const Arguments args({{"self", contiguous(0, DType::kFloat32, {3, 4})}, {"dim", std::vector<int64_t>{1}},
                        {"correction", int64_t{1}}, {"keepdim", false}},
                       {contiguous(1, DType::kFloat32, {3}), contiguous(2, DType::kFloat32, {3})});
  const recipes::Recipe r = recipes::build("aten::var_mean.correction", args, 3);
  EXPECT_EQ(opcodesOf(r), (std::vector<Opcode>{Opcode::kSum, Opcode::kSub, Opcode::kMul, Opcode::kSum}));
  EXPECT_EQ(r.steps().back().operands[0].buffer, 1);
  EXPECT_DOUBLE_EQ(r.steps().back().immediates[0], 1.0 / 3.0);
  EXPECT_EQ(isa::verify(programOf(r, 1)), "");
}

}  // namespace
