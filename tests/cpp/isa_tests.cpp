// The PTO instruction set (csrc/isa): the instruction table and its views, the
// dtypes, the verifier, and PTO-AS (print, parse, and a deterministic fuzz of
// the parser and verifier on mutated programs).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "isa/convolution.h"
#include "isa/program.h"

namespace {

using namespace pto::isa;

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}
bool startsWith(const std::string& text, std::string_view prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

std::vector<Opcode> allOpcodes() {
  std::vector<Opcode> opcodes;
  for (const InstructionInfo& entry : instructionTable()) opcodes.push_back(entry.opcode);
  return opcodes;
}

std::vector<DType> allDTypes() {
  std::vector<DType> dtypes;
  for (int i = 0; i < kDTypeCount; ++i) dtypes.push_back(static_cast<DType>(i));
  return dtypes;
}

// ---------------------------------------------------------------------------
// The instruction table and the dtypes.
// ---------------------------------------------------------------------------

// The table's rows as the .def states them, expanded independently of instructions.cpp.
struct DefRow {
  Opcode opcode;
  std::string_view name;
  Group group;
  int inputs;
  OutputDType output;
  std::vector<std::string_view> immediates;
  std::vector<Property> properties;
};

const std::vector<DefRow>& defRows() {
  using enum Property;
  static const std::vector<DefRow> rows = {
#define PTO_DEF_IMMEDIATES(...) std::vector<std::string_view>{__VA_ARGS__}
#define PTO_DEF_PROPERTIES(...) std::vector<Property>{__VA_ARGS__}
#define PTO_INSTRUCTION(op, name, group, inputs, dtypes, output, immediates, properties) \
  {Opcode::op, name, Group::group, inputs, OutputDType::output, PTO_DEF_IMMEDIATES immediates, \
   PTO_DEF_PROPERTIES properties},
#include "isa/instructions.def"
#undef PTO_DEF_PROPERTIES
#undef PTO_DEF_IMMEDIATES
  };
  return rows;
}

TEST(InstructionTable, OrderMatchesTheOpcodeEnum) {
  const auto table = instructionTable();
  ASSERT_EQ(table.size(), defRows().size());
  ASSERT_GT(table.size(), 0u);
  for (size_t i = 0; i < table.size(); ++i) {
    const Opcode op = static_cast<Opcode>(i);
    EXPECT_EQ(table[i].opcode, op) << "row " << i << " (" << table[i].name << ")";
    EXPECT_EQ(info(op).opcode, op) << "row " << i;
    EXPECT_EQ(&info(op), &table[i]) << "row " << i;
    EXPECT_EQ(defRows()[i].opcode, op) << "row " << i;
  }
}

TEST(InstructionTable, RowsMatchTheDefinitionFile) {
  const auto table = instructionTable();
  for (size_t i = 0; i < table.size(); ++i) {
    const DefRow& row = defRows()[i];
    const InstructionInfo& entry = table[i];
    SCOPED_TRACE(std::string(row.name));
    EXPECT_EQ(entry.name, row.name);
    EXPECT_EQ(entry.group, row.group);
    EXPECT_EQ(entry.inputs, row.inputs);
    EXPECT_EQ(entry.output, row.output);
    ASSERT_LE(row.immediates.size(), static_cast<size_t>(kMaxImmediates));
    for (int k = 0; k < kMaxImmediates; ++k) {
      const std::string_view expected = k < static_cast<int>(row.immediates.size()) ? row.immediates[k] : "";
      EXPECT_EQ(entry.immediates[k], expected) << "immediate " << k;
    }
    for (int p = 0; p < kPropertyCount; ++p) {
      const auto property = static_cast<Property>(p);
      const bool listed = std::ranges::find(row.properties, property) != row.properties.end();
      EXPECT_EQ(entry.has(property), listed) << propertyName(property);
    }
  }
}

TEST(InstructionTable, MnemonicsAreUniqueAndWellFormed) {
  std::set<std::string_view> seen;
  for (const InstructionInfo& entry : instructionTable()) {
    EXPECT_FALSE(entry.name.empty());
    EXPECT_TRUE(seen.insert(entry.name).second) << "duplicate mnemonic " << entry.name;
    EXPECT_NE(entry.name, "buffer") << "'buffer' is the PTO-AS declaration keyword";
    for (char c : entry.name) {
      EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')
          << "mnemonic " << entry.name << " is not one PTO-AS word";
    }
  }
}

TEST(InstructionTable, OpcodeByNameRoundTripsEveryMnemonic) {
  for (const InstructionInfo& entry : instructionTable()) {
    const auto found = opcodeByName(entry.name);
    ASSERT_TRUE(found.has_value()) << entry.name;
    EXPECT_EQ(*found, entry.opcode) << entry.name;
  }
  for (std::string_view unknown : {"", "TADD", "tadd ", " tadd", "buffer", "t", "tadd2", "add"}) {
    EXPECT_FALSE(opcodeByName(unknown).has_value()) << "'" << unknown << "'";
  }
}

TEST(InstructionTable, ImmediateCountMatchesTheNames) {
  for (const InstructionInfo& entry : instructionTable()) {
    SCOPED_TRACE(std::string(entry.name));
    int named = 0;
    bool gap = false;
    std::set<std::string_view> names;
    for (std::string_view immediate : entry.immediates) {
      if (immediate.empty()) {
        gap = true;
        continue;
      }
      EXPECT_FALSE(gap) << "a named immediate after an unused slot";
      EXPECT_TRUE(names.insert(immediate).second) << "duplicate immediate " << immediate;
      ++named;
    }
    EXPECT_EQ(entry.immediateCount(), named);
    EXPECT_EQ(static_cast<size_t>(entry.immediateCount()), defRows()[static_cast<size_t>(entry.opcode)].immediates.size());
  }
  EXPECT_EQ(info(Opcode::kAdd).immediateCount(), 1);
  EXPECT_EQ(info(Opcode::kAdd).immediates[0], "alpha");
  EXPECT_EQ(info(Opcode::kFill).immediateCount(), 1);
  EXPECT_EQ(info(Opcode::kFill).immediates[0], "value");
  EXPECT_EQ(info(Opcode::kMul).immediateCount(), 0);
}

TEST(InstructionTable, GroupsHaveTheirArityAndOutputRule) {
  for (const InstructionInfo& entry : instructionTable()) {
    SCOPED_TRACE(std::string(entry.name));
    switch (entry.group) {
      case Group::Unary:
        EXPECT_EQ(entry.inputs, 1);
        EXPECT_EQ(entry.output, OutputDType::Same);
        break;
      case Group::Binary:
        EXPECT_EQ(entry.inputs, 2);
        EXPECT_EQ(entry.output, OutputDType::Same);
        break;
      case Group::Ternary:
        EXPECT_EQ(entry.inputs, 3);
        EXPECT_EQ(entry.output, OutputDType::Same);
        break;
      case Group::Compare:
        EXPECT_EQ(entry.inputs, 2);
        EXPECT_EQ(entry.output, OutputDType::Bool);
        break;
      case Group::Select:
        EXPECT_EQ(entry.inputs, 3);
        EXPECT_EQ(entry.output, OutputDType::Same);
        break;
      case Group::Convert:
        EXPECT_EQ(entry.inputs, 1);
        EXPECT_NE(entry.output, OutputDType::Bool);
        break;
      case Group::Fill:
        EXPECT_EQ(entry.inputs, 0);
        break;
      case Group::Reduce:
        EXPECT_EQ(entry.inputs, 1);
        EXPECT_TRUE(entry.output == OutputDType::Same || entry.output == OutputDType::Index);
        break;
      case Group::Matmul:
        EXPECT_EQ(entry.inputs, 2);
        EXPECT_EQ(entry.output, OutputDType::Same);
        break;
      case Group::Conv:  // an image and a weight, or an output gradient and one of them
        EXPECT_EQ(entry.inputs, 2);
        EXPECT_EQ(entry.output, OutputDType::Same);
        EXPECT_EQ(entry.immediates[kConvGroups], "groups");  // where isa/convolution.h reads them
        EXPECT_EQ(entry.immediates[kConvStride], "stride0");
        EXPECT_EQ(entry.immediates[kConvPad], "pad0");
        EXPECT_EQ(entry.immediates[kConvDilation + kMaxConvSpatial - 1], "dilation2");
        EXPECT_EQ(entry.immediateCount(), entry.opcode == Opcode::kConv ? kConvBeta + 1 : kConvBeta);
        if (entry.opcode == Opcode::kConv) { EXPECT_EQ(entry.immediates[kConvBeta], "beta"); }
        break;
      case Group::Row:  // the softmaxes, and their gradients' forward output
        EXPECT_TRUE(entry.inputs == 1 || entry.inputs == 2);
        EXPECT_EQ(entry.output, OutputDType::Same);
        break;
      case Group::Norm:  // tlayernorm's weight and bias
        EXPECT_TRUE(entry.inputs >= 1 && entry.inputs <= 3);
        EXPECT_EQ(entry.output, OutputDType::Same);
        EXPECT_EQ(entry.immediates[0], "eps");
        break;
      case Group::Gather:
        EXPECT_EQ(entry.inputs, 2);
        EXPECT_EQ(entry.output, OutputDType::Same);
        break;
      case Group::Iota:
        EXPECT_EQ(entry.inputs, 0);
        EXPECT_EQ(entry.output, OutputDType::Any);
        break;
      case Group::IndexAdd:
        EXPECT_EQ(entry.inputs, 2);
        EXPECT_EQ(entry.output, OutputDType::Same);
        break;
      case Group::Triangle:
        EXPECT_EQ(entry.inputs, 1);
        EXPECT_EQ(entry.output, OutputDType::Same);
        break;
      case Group::Random:
        EXPECT_EQ(entry.inputs, 0);
        EXPECT_EQ(entry.output, OutputDType::Any);
        EXPECT_EQ(entry.immediates[entry.immediateCount() - 1], "counter");
        break;
      case Group::Sort:
        EXPECT_EQ(entry.inputs, 1);
        EXPECT_EQ(entry.output, OutputDType::Index);
        EXPECT_EQ(entry.immediates[0], "axis");
        EXPECT_EQ(entry.immediateCount(), 2);
        break;
      case Group::Scan:
        EXPECT_EQ(entry.inputs, 1);
        EXPECT_EQ(entry.output, OutputDType::Same);
        EXPECT_EQ(entry.immediates[0], "axis");
        EXPECT_EQ(entry.immediateCount(), 1);
        break;
      case Group::ScatterElements:
        EXPECT_EQ(entry.inputs, 2);
        EXPECT_EQ(entry.output, OutputDType::Same);
        break;
      case Group::Search:  // sorted lines, then the values
        EXPECT_EQ(entry.inputs, 2);
        EXPECT_EQ(entry.output, OutputDType::Index);
        EXPECT_EQ(entry.immediates[0], "right");
        EXPECT_EQ(entry.immediateCount(), 1);
        break;
      case Group::WrapIndex:
      case Group::Nonzero:
        EXPECT_EQ(entry.inputs, 1);
        EXPECT_EQ(entry.output, OutputDType::Index);
        break;
    }
    bool accepts_any = false;
    for (DType d : allDTypes()) accepts_any |= entry.dtypes.contains(d);
    EXPECT_TRUE(accepts_any);
  }
}

// The constexpr views are usable at compile time and agree with the runtime table.
static_assert(groupOf(Opcode::kAdd) == Group::Binary);
static_assert(groupOf(Opcode::kFill) == Group::Fill);
static_assert(groupOf(Opcode::kSelect) == Group::Select);
static_assert(acceptedDTypes(Opcode::kExp).contains(DType::kFloat16));
static_assert(!acceptedDTypes(Opcode::kExp).contains(DType::kInt32));
static_assert(acceptedDTypes(Opcode::kNot).contains(DType::kBool));
static_assert(!acceptedDTypes(Opcode::kNot).contains(DType::kFloat32));

TEST(InstructionTable, ConstexprViewsAgreeWithTheRuntimeTable) {
  for (const InstructionInfo& entry : instructionTable()) {
    EXPECT_EQ(groupOf(entry.opcode), entry.group) << entry.name;
    for (DType d : allDTypes()) {
      EXPECT_EQ(acceptedDTypes(entry.opcode).contains(d), entry.dtypes.contains(d))
          << entry.name << " " << dtypeName(d);
    }
  }
}

// The properties column, which the compiler's passes and the verifier read.
TEST(InstructionTable, PropertiesOfRepresentativeInstructions) {
  using enum Property;
  auto expectProperties = [](Opcode opcode, std::initializer_list<Property> expected) {
    const InstructionInfo& entry = info(opcode);
    for (int p = 0; p < kPropertyCount; ++p) {
      const auto property = static_cast<Property>(p);
      const bool wanted = std::ranges::find(expected, property) != expected.end();
      EXPECT_EQ(entry.has(property), wanted) << entry.name << " " << propertyName(property);
    }
  };
  expectProperties(Opcode::kAdd, {Elementwise, SameShape, Tileable, TypedImmediates});
  expectProperties(Opcode::kExp, {Elementwise, SameShape, Tileable});
  expectProperties(Opcode::kLt, {Elementwise, SameShape, Tileable});
  expectProperties(Opcode::kConvert, {Elementwise, SameShape, Tileable, Copy});
  expectProperties(Opcode::kFill, {Elementwise, SameShape, Tileable, TypedImmediates});
  expectProperties(Opcode::kSum, {Reduction, SameShape, Tileable});
  expectProperties(Opcode::kArgmax, {Reduction, SameShape, Tileable});
  expectProperties(Opcode::kSoftmax, {RowOp, SameShape, Tileable});
  expectProperties(Opcode::kLayerNorm, {RowOp, SameShape, Tileable});
  expectProperties(Opcode::kRowRstd, {Reduction, SameShape, Tileable});
  expectProperties(Opcode::kMatmul, {Gemm, Tileable, ReadsOutput});
  expectProperties(Opcode::kGather, {IndexInput});
  expectProperties(Opcode::kIndexAdd, {ReadsOutput, IndexInput});
  expectProperties(Opcode::kScatterAdd, {ReadsOutput, IndexInput});
  // Elementwise, but no fused kernel runs it by tiles.
  expectProperties(Opcode::kWrapIndex, {Elementwise, SameShape});
  // Their elements depend on their positions: not elementwise.
  expectProperties(Opcode::kIota, {SameShape, TypedImmediates});
  expectProperties(Opcode::kUniform, {SameShape});
  expectProperties(Opcode::kTril, {SameShape});
  expectProperties(Opcode::kCumsum, {SameShape});
  expectProperties(Opcode::kArgsort, {});
  expectProperties(Opcode::kNonzero, {});
}

// What the passes take for granted of every row.
TEST(InstructionTable, PropertiesAgreeWithEachOther) {
  std::set<std::string_view> names;
  for (int p = 0; p < kPropertyCount; ++p) EXPECT_TRUE(names.insert(propertyName(static_cast<Property>(p))).second);
  for (const InstructionInfo& entry : instructionTable()) {
    SCOPED_TRACE(std::string(entry.name));
    using enum Property;
    // A tiled kernel splits an instruction by one rule: the one its properties name.
    const int tile_rules = entry.has(Elementwise) + entry.has(Reduction) + entry.has(RowOp) + entry.has(Gemm);
    EXPECT_LE(tile_rules, 1);
    if (entry.has(Tileable)) { EXPECT_EQ(tile_rules, 1); }
    // Tiles slice every operand alike, a GEMM's aside.
    if (entry.has(Tileable) && !entry.has(Gemm)) { EXPECT_TRUE(entry.has(SameShape)); }
    if (entry.has(Gemm)) { EXPECT_FALSE(entry.has(SameShape)); }
    if (entry.has(Copy)) { EXPECT_TRUE(entry.has(Elementwise) && entry.inputs == 1); }
    if (entry.has(IndexInput)) { EXPECT_GE(entry.inputs, 2); }
    if (entry.has(TypedImmediates)) { EXPECT_GT(entry.immediateCount(), 0); }
  }
}

TEST(DTypes, NamesParseBackAndSizesAreRight) {
  int listed = 0;
#define PTO_COUNT_DTYPE(name, text, size) ++listed;
  PTO_DTYPES(PTO_COUNT_DTYPE)
#undef PTO_COUNT_DTYPE
  EXPECT_EQ(listed, kDTypeCount);

  const std::vector<std::pair<DType, size_t>> sizes = {
      {DType::kBool, 1},    {DType::kUInt8, 1},    {DType::kInt8, 1},    {DType::kInt16, 2},
      {DType::kInt32, 4},   {DType::kInt64, 8},    {DType::kFloat16, 2}, {DType::kBFloat16, 2},
      {DType::kFloat32, 4}, {DType::kFloat64, 8}};
  ASSERT_EQ(sizes.size(), static_cast<size_t>(kDTypeCount));
  std::set<std::string_view> names;
  for (auto [dtype, size] : sizes) {
    EXPECT_EQ(dtypeSize(dtype), size) << dtypeName(dtype);
    EXPECT_FALSE(dtypeName(dtype).empty());
    EXPECT_TRUE(names.insert(dtypeName(dtype)).second);
    const auto parsed = parseDType(dtypeName(dtype));
    ASSERT_TRUE(parsed.has_value()) << dtypeName(dtype);
    EXPECT_EQ(*parsed, dtype);
  }
  EXPECT_EQ(dtypeName(DType::kFloat32), "f32");
  EXPECT_EQ(dtypeName(DType::kBFloat16), "bf16");
  EXPECT_EQ(dtypeName(DType::kBool), "bool");
  for (std::string_view bad : {"", "F32", "f31", "float", "f32 ", "int", "b"}) {
    EXPECT_FALSE(parseDType(bad).has_value()) << "'" << bad << "'";
  }
}

TEST(DTypes, ClassesAndSets) {
  for (DType d : allDTypes()) {
    const bool floating = d == DType::kFloat16 || d == DType::kBFloat16 || d == DType::kFloat32 ||
                          d == DType::kFloat64;
    EXPECT_EQ(isFloating(d), floating) << dtypeName(d);
    EXPECT_EQ(isIntegral(d), !floating && d != DType::kBool) << dtypeName(d);
    EXPECT_EQ(kFloatTypes.contains(d), floating);
    EXPECT_EQ(kIntTypes.contains(d), isIntegral(d));
    EXPECT_EQ(kNumericTypes.contains(d), d != DType::kBool);
    EXPECT_TRUE(kAllTypes.contains(d));
    EXPECT_EQ(kIntegerOrBoolTypes.contains(d), !floating);
    EXPECT_FALSE(DTypeSet{}.contains(d));
  }
}

// ---------------------------------------------------------------------------
// Building programs.
// ---------------------------------------------------------------------------

Operand withStrides(Operand operand, std::initializer_list<int64_t> strides, int64_t offset = 0) {
  int d = 0;
  for (int64_t stride : strides) operand.strides[d++] = stride;
  operand.offset = offset;
  return operand;
}

Instruction makeInstruction(Opcode opcode, std::vector<Operand> operands, double immediate = 0.0) {
  Instruction instruction;
  instruction.opcode = opcode;
  instruction.operands = std::move(operands);
  if (info(opcode).immediateCount() > 0) instruction.immediates[0] = immediate;
  return instruction;
}

Program makeProgram(std::vector<uint64_t> bytes, std::vector<Instruction> instructions) {
  Program program;
  for (size_t i = 0; i < bytes.size(); ++i) {
    program.buffers.push_back({i == 0 ? BufferKind::kOutput : BufferKind::kInput, bytes[i]});
  }
  program.instructions = std::move(instructions);
  return program;
}

// The operands' dtypes of `op` on inputs of `dtype` (tcvt: converting to `convert_to`).
std::vector<DType> operandDTypes(Opcode op, DType dtype, DType convert_to = DType::kFloat16) {
  const InstructionInfo& entry = info(op);
  // Inputs: all of `dtype`, but a select's condition (bool); the output by the table's rule.
  std::vector<DType> dtypes(entry.inputs + 1, dtype);
  if (entry.group == Group::Select) dtypes[1] = DType::kBool;
  if (entry.group == Group::Gather || entry.group == Group::IndexAdd || entry.group == Group::ScatterElements) {
    dtypes[2] = DType::kInt64;  // the index
  }
  switch (entry.output) {
    case OutputDType::Same: break;
    case OutputDType::Bool: dtypes[0] = DType::kBool; break;
    case OutputDType::Index: dtypes[0] = DType::kInt64; break;
    case OutputDType::Any: dtypes[0] = entry.inputs > 0 ? convert_to : dtype; break;
  }
  return dtypes;
}

// The shapes of the operands of `op` whose output has shape [batch..., m, n]
// (tmatmul: out [..., m, n] = a [..., m, k] @ b [..., k, n]; tscatter: in and index
// k long on axis 1; tnonzero: `out` is the input's shape and the output [k, its rank];
// the others: all alike).
std::vector<std::vector<int64_t>> operandShapes(Opcode op, std::vector<int64_t> out, int64_t k, size_t operands) {
  if (groupOf(op) == Group::Iota) {  // a rank-1 output
    int64_t count = 1;
    for (int64_t size : out) count *= size;
    return {{count}};
  }
  if (groupOf(op) == Group::Conv) {  // x [2,4,5,6] * w [6,4,3,3] = y [2,6,5,6] (convImmediates), whatever `out`
    const std::vector<int64_t> x{2, 4, 5, 6}, w{6, 4, 3, 3}, y{2, 6, 5, 6};
    if (op == Opcode::kConvBackwardData) return {x, y, w};
    if (op == Opcode::kConvBackwardWeight) return {w, y, x};
    return {y, x, w};
  }
  std::vector<std::vector<int64_t>> shapes(operands, out);
  if (groupOf(op) == Group::Matmul && out.size() >= 2) {
    shapes[1].back() = k;
    shapes[2][shapes[2].size() - 2] = k;
  }
  if (groupOf(op) == Group::IndexAdd && !out.empty()) {  // index: rank 1, the input's extent on axis 1
    shapes[2] = {out.size() > 1 ? out[1] : out[0]};
  }
  if (groupOf(op) == Group::ScatterElements && out.size() > 1) shapes[1][1] = shapes[2][1] = k;
  if (groupOf(op) == Group::Nonzero) shapes[0] = {k, static_cast<int64_t>(out.size())};
  if (groupOf(op) == Group::Search && !out.empty()) shapes[1].back() = k;  // lines of k sorted elements
  return shapes;
}

Operand contiguousOf(int32_t buffer, DType dtype, const std::vector<int64_t>& shape) {
  Operand operand = contiguousOperand(buffer, dtype, {});
  operand.rank = static_cast<int32_t>(shape.size());
  int64_t stride = 1;
  for (int d = operand.rank - 1; d >= 0; --d) {
    operand.shape[d] = shape[d];
    operand.strides[d] = stride;
    stride *= shape[d];
  }
  return operand;
}

// The immediates of operandShapes' convolution: one group, stride 1, padding 1 over two
// spatial dimensions, dilation 1, and tconv's beta 1.
std::array<double, kMaxImmediates> convImmediates(Opcode op) {
  return {1, 1, 1, 1, 1, 1, 0, 1, 1, 1, op == Opcode::kConv ? 1.0 : 0.0};
}

// A valid [4,16] instruction of `op` over one buffer per operand; the last input
// broadcasts along dimension 0 (stride 0) where there are inputs.
// Parameters a random draw accepts: a distribution that makes sense, any key and counter.
std::array<double, kMaxImmediates> validRandomImmediates(Opcode op, std::mt19937& rng) {
  const double key0 = static_cast<double>(rng()), key1 = static_cast<double>(rng()), counter = rng() % 1000;
  switch (op) {
    case Opcode::kBernoulli: return {(rng() % 5) / 4.0, key0, key1, counter};
    case Opcode::kExponential: return {0.5 + rng() % 4, key0, key1, counter};
    case Opcode::kRandInt: return {-2, 3, key0, key1, counter};
    case Opcode::kNormal: return {0.5, 2, key0, key1, counter};
    default: return {-1, 1, key0, key1, counter};
  }
}

Program validProgram(Opcode op, DType dtype) {
  const std::vector<DType> dtypes = operandDTypes(op, dtype);
  const auto shapes = operandShapes(op, {4, 16}, 8, dtypes.size());
  std::vector<Operand> operands;
  std::vector<uint64_t> bytes;
  for (size_t k = 0; k < dtypes.size(); ++k) {
    Operand operand = contiguousOf(static_cast<int32_t>(k), dtypes[k], shapes[k]);
    if (k > 0 && k + 1 == dtypes.size()) operand.strides[0] = 0;
    if (k == 0 && op == Opcode::kRowRstd) operand.strides = {1, 0};  // one value per row
    operands.push_back(operand);
    int64_t elements = 1;
    for (int d = 0; d < operand.rank; ++d) elements *= operand.strides[d] == 0 ? 1 : operand.shape[d];
    bytes.push_back(elements * dtypeSize(dtypes[k]));
  }
  Instruction instruction = makeInstruction(op, operands, 1.0);
  if (groupOf(op) == Group::Conv) instruction.immediates = convImmediates(op);
  if (groupOf(op) == Group::Random) {
    std::mt19937 rng(1);
    instruction.immediates = validRandomImmediates(op, rng);
  }
  return makeProgram(bytes, {instruction});
}

// ---------------------------------------------------------------------------
// The verifier.
// ---------------------------------------------------------------------------

TEST(Verifier, ContiguousOperandAndNumel) {
  const Operand operand = contiguousOperand(3, DType::kInt16, {2, 3, 4});
  EXPECT_EQ(operand.buffer, 3);
  EXPECT_EQ(operand.dtype, DType::kInt16);
  EXPECT_EQ(operand.rank, 3);
  EXPECT_EQ(operand.shape[0], 2);
  EXPECT_EQ(operand.shape[2], 4);
  EXPECT_EQ(operand.strides[0], 12);
  EXPECT_EQ(operand.strides[1], 4);
  EXPECT_EQ(operand.strides[2], 1);
  EXPECT_EQ(operand.offset, 0);
  EXPECT_EQ(operand.numel(), 24);
  const Operand scalar = contiguousOperand(0, DType::kFloat32, {});
  EXPECT_EQ(scalar.rank, 0);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(contiguousOperand(0, DType::kFloat32, {5, 0, 2}).numel(), 0);
}

TEST(Verifier, AValidProgramOfEveryInstructionAndDTypePasses) {
  int checked = 0;
  for (const InstructionInfo& entry : instructionTable()) {
    for (DType d : allDTypes()) {
      if (!entry.dtypes.contains(d)) continue;
      const Program program = validProgram(entry.opcode, d);
      EXPECT_EQ(verify(program), "") << entry.name << " on " << dtypeName(d) << "\n" << print(program);
      ++checked;
    }
  }
  EXPECT_GT(checked, 200);
  // tcvt: every pair of dtypes.
  for (DType from : allDTypes()) {
    for (DType to : allDTypes()) {
      const Program program = makeProgram(
          {64 * dtypeSize(to), 64 * dtypeSize(from)},
          {makeInstruction(Opcode::kConvert, {contiguousOperand(0, to, {4, 16}), contiguousOperand(1, from, {4, 16})})});
      EXPECT_EQ(verify(program), "") << dtypeName(from) << " -> " << dtypeName(to);
    }
  }
  EXPECT_EQ(verify(Program{}), "");
}

TEST(Verifier, ValidLayouts) {
  // Transposed, negative strides, offsets, scalars, a broadcast scalar, size-1 dims with any stride.
  const Operand out = contiguousOperand(0, DType::kFloat32, {3, 5});
  const std::vector<Operand> inputs = {
      withStrides(contiguousOperand(1, DType::kFloat32, {3, 5}), {1, 3}),
      withStrides(contiguousOperand(1, DType::kFloat32, {3, 5}), {-5, -1}, 14),
      withStrides(contiguousOperand(1, DType::kFloat32, {3, 5}), {0, 0}, 14),
      withStrides(contiguousOperand(1, DType::kFloat32, {3, 5}), {5, -1}, 4),
  };
  for (const Operand& input : inputs) {
    EXPECT_EQ(verify(makeProgram({60, 60}, {makeInstruction(Opcode::kAbs, {out, input})})), "")
        << print(makeInstruction(Opcode::kAbs, {out, input}));
  }
  const Operand scalar = contiguousOperand(0, DType::kFloat64, {});
  EXPECT_EQ(verify(makeProgram({8}, {makeInstruction(Opcode::kFill, {scalar}, 2.0)})), "");
  Operand ones = contiguousOperand(0, DType::kFloat32, {1, 1, 4});
  ones.strides[0] = kI64Max;  // a size-1 dimension never moves
  ones.strides[1] = kI64Min;
  EXPECT_EQ(verify(makeProgram({16}, {makeInstruction(Opcode::kFill, {ones}, 2.0)})), "");
  // The exact end of the buffer is inside; one more element is not.
  const Operand tail = withStrides(contiguousOperand(0, DType::kInt64, {2}), {1}, 6);
  EXPECT_EQ(verify(makeProgram({64}, {makeInstruction(Opcode::kFill, {tail}, 1.0)})), "");
  EXPECT_NE(verify(makeProgram({63}, {makeInstruction(Opcode::kFill, {tail}, 1.0)})), "");
}

TEST(Verifier, ZeroSizeOperandsAreValid) {
  const Operand empty = contiguousOperand(0, DType::kFloat32, {3, 0, 5});
  EXPECT_EQ(verify(makeProgram({0, 0}, {makeInstruction(Opcode::kExp, {empty, withStrides(empty, {0, 0, 0})})})), "");
  // Strides and offsets of an empty operand are never followed.
  const Operand far = withStrides(contiguousOperand(1, DType::kFloat64, {0, 7}), {kI64Max, kI64Min}, kI64Max);
  const Operand out = withStrides(contiguousOperand(0, DType::kFloat64, {0, 7}), {1, 1}, kI64Min);
  EXPECT_EQ(verify(makeProgram({0, 0}, {makeInstruction(Opcode::kNeg, {out, far})})), "");
  EXPECT_EQ(verify(makeProgram({0}, {makeInstruction(Opcode::kFill, {contiguousOperand(0, DType::kBool, {0})}, 1)})), "");
}

// Checks that verify() rejects the program with a message naming the instruction.
void expectRejected(const Program& program, std::string_view mnemonic, std::string_view detail,
                    size_t index = 0) {
  const std::string error = verify(program);
  EXPECT_FALSE(error.empty()) << "accepted:\n" << print(program);
  EXPECT_TRUE(startsWith(error, "instruction " + std::to_string(index) + " (" + std::string(mnemonic) + ":") ||
              startsWith(error, "instruction " + std::to_string(index) + " (" + std::string(mnemonic) + " "))
      << error;
  EXPECT_TRUE(contains(error, detail)) << error << "\nshould mention: " << detail;
}

TEST(Verifier, ConvolutionGeometry) {
  const auto conv = [](Opcode op, std::vector<int64_t> out, std::vector<int64_t> a, std::vector<int64_t> b,
                       std::array<double, kMaxImmediates> immediates) {
    const Operand operands[3] = {contiguousOf(0, DType::kFloat32, out), contiguousOf(1, DType::kFloat32, a),
                                 contiguousOf(2, DType::kFloat32, b)};
    Instruction instruction = makeInstruction(op, {operands[0], operands[1], operands[2]});
    instruction.immediates = immediates;
    std::vector<uint64_t> bytes;
    for (const Operand& operand : operands) bytes.push_back(static_cast<uint64_t>(operand.numel()) * 4);
    return makeProgram(bytes, {instruction});
  };
  const auto same = convImmediates(Opcode::kConv);
  EXPECT_EQ(verify(conv(Opcode::kConv, {2, 6, 5, 6}, {2, 4, 5, 6}, {6, 4, 3, 3}, same)), "");
  // Stride 2 over 5: windows at 0, 2, 4 (padded); two groups of 2 input channels.
  auto strided = same;
  strided[0] = 2, strided[1] = 2;
  EXPECT_EQ(verify(conv(Opcode::kConv, {2, 6, 3, 6}, {2, 4, 5, 6}, {6, 2, 3, 3}, strided)), "");
  expectRejected(conv(Opcode::kConv, {2, 6, 4, 6}, {2, 4, 5, 6}, {6, 2, 3, 3}, strided), "tconv", "windows");
  // A transposed convolution's output_padding: x one wider than y's windows reach.
  auto unpadded = convImmediates(Opcode::kConvBackwardData);
  unpadded[1] = 2, unpadded[4] = 0, unpadded[5] = 0;
  EXPECT_EQ(verify(conv(Opcode::kConvBackwardData, {1, 4, 8, 3}, {1, 6, 3, 1}, {6, 4, 3, 3}, unpadded)), "");
  expectRejected(conv(Opcode::kConvBackwardData, {1, 4, 9, 3}, {1, 6, 3, 1}, {6, 4, 3, 3}, unpadded), "tconvbwdd",
                 "windows");
  expectRejected(conv(Opcode::kConv, {2, 6, 5, 6}, {2, 5, 5, 6}, {6, 4, 3, 3}, same), "tconv", "channels");
  expectRejected(conv(Opcode::kConvBackwardWeight, {6, 4, 3}, {2, 6, 5}, {2, 4, 5}, same), "tconvbwdw",
                 "unused");
  expectRejected(conv(Opcode::kConv, {2, 6}, {2, 4}, {6, 4}, same), "tconv", "rank");
  auto zero_stride = same;
  zero_stride[2] = 0;
  expectRejected(conv(Opcode::kConv, {2, 6, 5, 6}, {2, 4, 5, 6}, {6, 4, 3, 3}, zero_stride), "tconv", "stride1=0");
  auto fractional_groups = same;
  fractional_groups[0] = 1.5;
  expectRejected(conv(Opcode::kConv, {2, 6, 5, 6}, {2, 4, 5, 6}, {6, 4, 3, 3}, fractional_groups), "tconv",
                 "groups=1.5");
}

TEST(Verifier, RejectsAWrongOperandCount) {
  const Operand a = contiguousOperand(0, DType::kFloat32, {4});
  expectRejected(makeProgram({16}, {makeInstruction(Opcode::kAdd, {a, a})}), "tadd", "takes 3 operands");
  expectRejected(makeProgram({16}, {makeInstruction(Opcode::kAdd, {a, a, a, a})}), "tadd", "got 4");
  expectRejected(makeProgram({16}, {makeInstruction(Opcode::kFill, {a, a}, 1)}), "texpands", "takes 1 operands");
  expectRejected(makeProgram({16}, {makeInstruction(Opcode::kExp, {})}), "texp", "got 0");
  expectRejected(makeProgram({16}, {makeInstruction(Opcode::kSelect, {a, a, a})}), "tsel", "takes 4");
}

TEST(Verifier, RejectsAnUnknownBuffer) {
  const Operand out = contiguousOperand(0, DType::kFloat32, {4});
  expectRejected(makeProgram({16}, {makeInstruction(Opcode::kNeg, {out, contiguousOperand(1, DType::kFloat32, {4})})}),
                 "tneg", "buffer %1");
  expectRejected(makeProgram({16}, {makeInstruction(Opcode::kNeg, {out, contiguousOperand(-1, DType::kFloat32, {4})})}),
                 "tneg", "buffer %-1");
  expectRejected(makeProgram({}, {makeInstruction(Opcode::kFill, {out}, 0)}), "texpands", "buffer %0");
}

TEST(Verifier, RejectsAnUnknownOpcodeOrDType) {
  const Operand a = contiguousOperand(0, DType::kFloat32, {4});
  Instruction unknown;
  unknown.opcode = static_cast<Opcode>(999);
  unknown.operands = {a};
  const std::string error = verify(makeProgram({16}, {unknown}));
  EXPECT_TRUE(contains(error, "unknown opcode 999")) << error;
  Operand bad = a;
  bad.dtype = static_cast<DType>(200);
  expectRejected(makeProgram({16}, {makeInstruction(Opcode::kMove, {a, bad})}), "tmov", "dtype");
  bad.dtype = static_cast<DType>(kDTypeCount);
  expectRejected(makeProgram({16}, {makeInstruction(Opcode::kFill, {bad}, 1)}), "texpands", "dtype");
}

TEST(Verifier, RejectsOperandsOutsideTheirBuffer) {
  const Operand out = contiguousOperand(0, DType::kFloat32, {4, 4});
  // Too large an offset.
  expectRejected(makeProgram({64, 64}, {makeInstruction(Opcode::kNeg, {out, withStrides(out, {4, 1}, 1)})}), "tneg",
                 "outside buffer");
  // A buffer too small for the shape.
  expectRejected(makeProgram({64, 60}, {makeInstruction(Opcode::kNeg, {out, contiguousOperand(1, DType::kFloat32, {4, 4})})}),
                 "tneg", "outside buffer %1");
  // A negative reach: a negative stride walking before the buffer's start.
  Operand backwards = contiguousOperand(1, DType::kFloat32, {4, 4});
  backwards = withStrides(backwards, {4, -1}, 2);
  expectRejected(makeProgram({64, 64}, {makeInstruction(Opcode::kNeg, {out, backwards})}), "tneg", "elements -1 to");
  // A negative offset.
  expectRejected(makeProgram({64, 64}, {makeInstruction(Opcode::kNeg, {out, withStrides(out, {4, 1}, -1)})}), "tneg",
                 "outside");
  // The output too.
  expectRejected(makeProgram({8}, {makeInstruction(Opcode::kFill, {out}, 1)}), "texpands", "operand 0");
  // The dtype's size counts: 16 f64 do not fit 64 bytes.
  expectRejected(makeProgram({64}, {makeInstruction(Opcode::kFill, {contiguousOperand(0, DType::kFloat64, {4, 4})}, 1)}),
                 "texpands", "outside");
  // A later instruction is named by its index.
  expectRejected(makeProgram({64, 64}, {makeInstruction(Opcode::kNeg, {out, withStrides(out, {4, 1})}),
                                        makeInstruction(Opcode::kNeg, {out, withStrides(out, {4, 1}, 1)})}),
                 "tneg", "outside", 1);
}

TEST(Verifier, RejectsHugeShapesAndStridesWithoutOverflow) {
  // Every size is at least 2^32 and every stride at least 1 in magnitude, so each
  // operand reaches past a 1 GiB buffer (or before its start). Each is rejected and
  // none overflows the verifier's arithmetic.
  constexpr uint64_t kBufferBytes = uint64_t{1} << 30;
  std::vector<Operand> huge;
  for (DType dtype : {DType::kBool, DType::kFloat32, DType::kFloat64}) {
    for (int rank : {1, 2, 3, 8}) {
      for (int64_t size : {kI64Max, kI64Max / 2, int64_t{1} << 32, int64_t{3037000500}}) {
        for (int64_t stride : {kI64Max, kI64Min + 1, kI64Min, int64_t{1}, int64_t{-1}, int64_t{1} << 40}) {
          for (bool alternate : {false, true}) {
            Operand operand;
            operand.buffer = 0;
            operand.dtype = dtype;
            operand.rank = rank;
            for (int d = 0; d < rank; ++d) {
              operand.shape[d] = size;
              operand.strides[d] = alternate && d % 2 && stride != kI64Min ? -stride : stride;
            }
            for (int64_t offset : {int64_t{0}, int64_t{5}, kI64Max, kI64Min}) {
              operand.offset = offset;
              huge.push_back(operand);
            }
          }
        }
      }
    }
  }
  // Extents that cancel out: +big and -big strides.
  Operand cancel;
  cancel.buffer = 0;
  cancel.dtype = DType::kFloat64;
  cancel.rank = 2;
  cancel.shape = {kI64Max, kI64Max};
  cancel.strides = {kI64Max, kI64Min};
  cancel.offset = kI64Max;
  huge.push_back(cancel);
  for (const Operand& operand : huge) {
    const Program program = makeProgram({kBufferBytes}, {makeInstruction(Opcode::kFill, {operand}, 1)});
    const std::string error = verify(program);
    EXPECT_TRUE(startsWith(error, "instruction 0 (texpands: operand 0 ")) << error << "\n" << print(program);
  }
  // The same shapes over the largest buffer there is: still no overflow, and
  // whatever is accepted really fits.
  for (const Operand& operand : huge) {
    const std::string error =
        verify(makeProgram({std::numeric_limits<uint64_t>::max()}, {makeInstruction(Opcode::kFill, {operand}, 1)}));
    if (error.empty()) {
      // Only one dimension can fit (more would count more than 2^48 elements).
      ASSERT_EQ(operand.rank, 1) << print(makeInstruction(Opcode::kFill, {operand}, 1));
      const __int128 extent = static_cast<__int128>(operand.shape[0] - 1) * operand.strides[0];
      const __int128 low = operand.offset + std::min<__int128>(extent, 0);
      const __int128 high = operand.offset + std::max<__int128>(extent, 0);
      EXPECT_GE(low, 0);
      EXPECT_LE((high + 1) * static_cast<__int128>(dtypeSize(operand.dtype)),
                static_cast<__int128>(std::numeric_limits<uint64_t>::max()));
    }
  }
}

TEST(Verifier, RejectsMoreElementsThanAnInt64Counts) {
  // Broadcasting keeps the reach tiny while the element count overflows int64.
  Operand input;
  input.buffer = 1;
  input.rank = 3;
  input.shape = {int64_t{1} << 32, int64_t{1} << 32, 2};
  input.strides = {0, 0, 0};
  Operand out = input;
  out.buffer = 0;
  out.strides = {0, 0, 0};
  const std::string error =
      verify(makeProgram({std::numeric_limits<uint64_t>::max(), 4}, {makeInstruction(Opcode::kNeg, {out, input})}));
  EXPECT_TRUE(startsWith(error, "instruction 0 (tneg: operand 0")) << error;
  EXPECT_TRUE(contains(error, "elements")) << error;
}

TEST(Verifier, RejectsBroadcastsOfMoreThan2To48Elements) {
  // 3037000499^2 is below 2^63: a reduction over it once ran for ever.
  Operand input;
  input.buffer = 1;
  input.rank = 2;
  input.shape = {3037000499, 3037000499};
  input.strides = {0, 0};
  Operand out = input;
  out.buffer = 0;
  expectRejected(makeProgram({4, 4}, {makeInstruction(Opcode::kSum, {out, input}, 1.0)}), "tsum",
                 "more than 2^48 elements");
  input.shape = {int64_t{1} << 24, int64_t{1} << 24};
  out.shape = input.shape;
  EXPECT_EQ(verify(makeProgram({4, 4}, {makeInstruction(Opcode::kSum, {out, input}, 1.0)})), "");
}

TEST(Verifier, AReductionOverAnEmptyDimensionStillWritesItsOutput) {
  // Output [3, 16] (the empty third dimension is reduced): its identity is written to
  // 48 elements, at negative strides here, so before the buffer's start.
  const Operand in = contiguousOperand(1, DType::kFloat32, {3, 16, 0});
  Operand out = withStrides(contiguousOperand(0, DType::kFloat32, {3, 16, 0}), {-2, -4, 0});
  expectRejected(makeProgram({4096, 4096}, {makeInstruction(Opcode::kSum, {out, in}, 1.0)}), "tsum", "outside");
  out = withStrides(out, {16, 1, 0});
  EXPECT_EQ(verify(makeProgram({4096, 4096}, {makeInstruction(Opcode::kSum, {out, in}, 1.0)})), "");
}

TEST(Verifier, RejectsAnOutputThatRepeatsElements) {
  // A stride-0 output dimension of size > 1 writes one element many times (a race
  // once the kernel splits the work), as PyTorch refuses for its outputs.
  Operand out = contiguousOperand(0, DType::kFloat32, {4, 8});
  out.strides[0] = 0;
  const Operand in = contiguousOperand(1, DType::kFloat32, {4, 8});
  expectRejected(makeProgram({32, 128}, {makeInstruction(Opcode::kNeg, {out, in})}), "tneg", "output");
  expectRejected(makeProgram({32}, {makeInstruction(Opcode::kFill, {out}, 1)}), "texpands", "output");
  // A size-1 dimension of stride 0 is fine; so is an input broadcast.
  Operand one = contiguousOperand(0, DType::kFloat32, {1, 8});
  one.strides[0] = 0;
  EXPECT_EQ(verify(makeProgram({32}, {makeInstruction(Opcode::kFill, {one}, 1)})), "");
  Operand broadcast = in;
  broadcast.strides[0] = 0;
  EXPECT_EQ(verify(makeProgram({128, 32}, {makeInstruction(Opcode::kNeg, {contiguousOperand(0, DType::kFloat32, {4, 8}), broadcast})})), "");
}

TEST(Verifier, RejectsAShapeMismatch) {
  const Operand out = contiguousOperand(0, DType::kFloat32, {4, 4});
  expectRejected(makeProgram({64, 64}, {makeInstruction(Opcode::kNeg, {out, contiguousOperand(1, DType::kFloat32, {16})})}),
                 "tneg", "has shape [16] but the output has [4,4]");
  expectRejected(makeProgram({64, 64}, {makeInstruction(Opcode::kAdd, {out, out, contiguousOperand(1, DType::kFloat32, {4, 2})}, 1)}),
                 "tadd", "operand 2 has shape [4,2]");
  expectRejected(makeProgram({64, 64}, {makeInstruction(Opcode::kNeg, {out, contiguousOperand(1, DType::kFloat32, {})})}),
                 "tneg", "has shape []");
}

TEST(Verifier, RejectsADTypeTheInstructionDoesNotTake) {
  const Operand i32 = contiguousOperand(0, DType::kInt32, {4});
  expectRejected(makeProgram({16}, {makeInstruction(Opcode::kExp, {i32, i32})}), "texp", "i32, which texp does not take");
  const Operand f32 = contiguousOperand(0, DType::kFloat32, {4});
  expectRejected(makeProgram({16}, {makeInstruction(Opcode::kAnd, {f32, f32, f32})}), "tand", "f32");
  const Operand b = contiguousOperand(0, DType::kBool, {4});
  expectRejected(makeProgram({16}, {makeInstruction(Opcode::kAdd, {b, b, b}, 1)}), "tadd", "bool");
  expectRejected(makeProgram({16}, {makeInstruction(Opcode::kDiv, {i32, i32, i32})}), "tdiv", "i32");
}

TEST(Verifier, RejectsMixedDTypes) {
  const Operand f32 = contiguousOperand(0, DType::kFloat32, {4});
  const Operand f64 = contiguousOperand(1, DType::kFloat64, {4});
  const Operand i32 = contiguousOperand(1, DType::kInt32, {4});
  // Same: the inputs and the output.
  expectRejected(makeProgram({16, 32}, {makeInstruction(Opcode::kNeg, {f32, f64})}), "tneg", "but the output is f32");
  expectRejected(makeProgram({16, 32}, {makeInstruction(Opcode::kAdd, {f32, f32, f64}, 1)}), "tadd", "operand 2 is f64");
  expectRejected(makeProgram({16, 32}, {makeInstruction(Opcode::kMove, {f32, i32})}), "tmov", "keeps the dtype");
  // Compare: the output must be bool, the inputs alike.
  expectRejected(makeProgram({16, 32}, {makeInstruction(Opcode::kLt, {f32, f32, f32})}), "tcmplt", "output must be bool");
  const Operand out = contiguousOperand(0, DType::kBool, {4});
  expectRejected(makeProgram({16, 32}, {makeInstruction(Opcode::kEq, {out, f32, f64})}), "tcmpeq", "compares f32 with f64");
  // Select: a bool condition, a and b of the output's dtype.
  expectRejected(makeProgram({16, 32}, {makeInstruction(Opcode::kSelect, {f32, f32, f32, f32})}), "tsel",
                 "condition operand must be bool");
  const Operand cond = contiguousOperand(1, DType::kBool, {4});
  expectRejected(makeProgram({16, 32}, {makeInstruction(Opcode::kSelect, {f32, cond, f32, f64})}), "tsel", "operand 3 is f64");
}

TEST(Verifier, RejectsABadRankOrANegativeSize) {
  Operand nine = contiguousOperand(0, DType::kFloat32, {1, 1, 1, 1, 1, 1, 1, 1});
  nine.rank = 9;
  expectRejected(makeProgram({64}, {makeInstruction(Opcode::kFill, {nine}, 1)}), "texpands", "rank 9");
  Operand in = contiguousOperand(1, DType::kFloat32, {1, 1, 1, 1, 1, 1, 1, 1});
  in.rank = 1000;
  expectRejected(makeProgram({64, 64}, {makeInstruction(Opcode::kNeg, {contiguousOperand(0, DType::kFloat32, {1}), in})}),
                 "tneg", "rank 1000");
  nine.rank = -1;
  expectRejected(makeProgram({64}, {makeInstruction(Opcode::kFill, {nine}, 1)}), "texpands", "rank -1");
  const Operand negative = contiguousOperand(0, DType::kFloat32, {2, -3});
  expectRejected(makeProgram({64}, {makeInstruction(Opcode::kFill, {negative}, 1)}), "texpands", "negative size in [2,-3]");
  Operand zero_and_negative = contiguousOperand(0, DType::kFloat32, {0, -1});
  expectRejected(makeProgram({64}, {makeInstruction(Opcode::kFill, {zero_and_negative}, 1)}), "texpands", "negative size");
  expectRejected(makeProgram({64}, {makeInstruction(Opcode::kFill, {contiguousOperand(0, DType::kFloat32, {kI64Min})}, 1)}),
                 "texpands", "negative size");
}

TEST(Verifier, ChecksImmediatesAgainstIntegerDTypes) {
  // Immediates stored into an integer dtype must be finite and fit it (the
  // kernels convert them; an unrepresentable value would be undefined behaviour).
  auto fill = [](DType dtype, double value) {
    return makeProgram({64}, {makeInstruction(Opcode::kFill, {contiguousOperand(0, dtype, {4})}, value)});
  };
  for (double bad : {kNaN, kInf, -kInf, 1e300, 9223372036854775808.0, -9223372036854775808.0 * 2}) {
    expectRejected(fill(DType::kInt64, bad), "texpands", "value=");
    expectRejected(fill(DType::kInt32, bad), "texpands", "i32");
  }
  expectRejected(fill(DType::kInt8, 128), "texpands", "i8");
  expectRejected(fill(DType::kInt8, -129), "texpands", "i8");
  expectRejected(fill(DType::kUInt8, 256), "texpands", "u8");
  expectRejected(fill(DType::kUInt8, -256), "texpands", "u8");
  expectRejected(fill(DType::kInt32, 2147483648.0), "texpands", "i32");
  for (auto [dtype, value] : std::vector<std::pair<DType, double>>{
           {DType::kInt8, 127},      {DType::kInt8, -128},     {DType::kInt8, 127.9},  {DType::kInt8, -128.9},
           {DType::kUInt8, 255},     {DType::kUInt8, -255},    {DType::kUInt8, -1},    {DType::kInt32, 2.5},
           {DType::kInt64, -9223372036854775808.0},            {DType::kInt64, 9223372036854774784.0},
           {DType::kInt16, -32768},  {DType::kBool, kNaN},     {DType::kBool, 1e300},  {DType::kFloat16, 1e300},
           {DType::kFloat32, kNaN},  {DType::kFloat64, -kInf}, {DType::kBFloat16, -0.0}}) {
    EXPECT_EQ(verify(fill(dtype, value)), "") << dtypeName(dtype) << " " << value;
  }
  const Operand i16 = contiguousOperand(0, DType::kInt16, {4});
  expectRejected(makeProgram({64}, {makeInstruction(Opcode::kAdd, {i16, i16, i16}, 40000)}), "tadd", "alpha=");
  expectRejected(makeProgram({64}, {makeInstruction(Opcode::kSub, {i16, i16, i16}, kNaN)}), "tsub", "alpha=");
  EXPECT_EQ(verify(makeProgram({64}, {makeInstruction(Opcode::kSub, {i16, i16, i16}, -2)})), "");
  const Operand f16 = contiguousOperand(0, DType::kFloat16, {4});
  EXPECT_EQ(verify(makeProgram({64}, {makeInstruction(Opcode::kAdd, {f16, f16, f16}, kNaN)})), "");
  // Instructions without immediates ignore the unused slots.
  Instruction mul = makeInstruction(Opcode::kMul, {i16, i16, i16});
  mul.immediates = {kNaN, kInf};
  EXPECT_EQ(verify(makeProgram({64}, {mul})), "");
}

TEST(Verifier, RejectsABadGather) {
  // out [3, 4] = in [5, 4] along axis 0, by an i64 index [3, 4].
  const Operand out = contiguousOperand(0, DType::kFloat32, {3, 4});
  const Operand in = contiguousOperand(1, DType::kFloat32, {5, 4});
  const Operand index = contiguousOperand(2, DType::kInt64, {3, 4});
  auto gather = [](Operand o, Operand i, Operand x, double axis) {
    return makeProgram({1024, 1024, 1024}, {makeInstruction(Opcode::kGather, {o, i, x}, axis)});
  };
  EXPECT_EQ(verify(gather(out, in, index, 0)), "");
  EXPECT_EQ(verify(gather(out, contiguousOperand(1, DType::kFloat32, {3, 9}), index, 1)), "");  // the axis may differ
  // The index must be i64 (not i32, nor the data's dtype).
  expectRejected(gather(out, in, contiguousOperand(2, DType::kInt32, {3, 4}), 0), "tgather", "index must be i64, not i32");
  expectRejected(gather(out, in, contiguousOperand(2, DType::kFloat32, {3, 4}), 0), "tgather", "index must be i64");
  // The index has the output's shape.
  expectRejected(gather(out, in, contiguousOperand(2, DType::kInt64, {4, 3}), 0), "tgather", "operand 2 has shape [4,3]");
  // Off the axis, the input covers the output.
  expectRejected(gather(out, contiguousOperand(1, DType::kFloat32, {5, 3}), index, 0), "tgather",
                 "input [5,3] is smaller than the output [3,4] off the axis");
  expectRejected(gather(out, contiguousOperand(1, DType::kFloat32, {2, 4}), index, 1), "tgather", "smaller");
  expectRejected(gather(out, contiguousOperand(1, DType::kFloat32, {20}), index, 0), "tgather", "input rank 1");
  // The axis is a dimension: an integer in [0, rank).
  for (double axis : {2.0, -1.0, 0.5, kNaN, kInf, 1e300}) {
    expectRejected(gather(out, in, index, axis), "tgather", "axis=");
  }
  // The data's dtypes agree.
  expectRejected(gather(out, contiguousOperand(1, DType::kFloat64, {5, 4}), index, 0), "tgather", "operand 1 is f64");
  // wrap is a switch.
  for (double wrap : {1.0, 2.0, -1.0, 0.5, kNaN}) {
    Program program = gather(out, in, index, 0);
    program.instructions[0].immediates[1] = wrap;
    if (wrap == 1.0) { EXPECT_EQ(verify(program), ""); }
    else expectRejected(program, "tgather", "is neither 0 nor 1");
  }
}

TEST(Verifier, RejectsABadScatter) {
  // out [5, 4] gets in [3, 4] along axis 0, by an i64 index [3, 4].
  const Operand out = contiguousOperand(0, DType::kFloat32, {5, 4});
  const Operand in = contiguousOperand(1, DType::kFloat32, {3, 4});
  const Operand index = contiguousOperand(2, DType::kInt64, {3, 4});
  auto scatter = [](Opcode opcode, Operand o, Operand i, Operand x, double axis) {
    return makeProgram({1024, 1024, 1024}, {makeInstruction(opcode, {o, i, x}, axis)});
  };
  for (Opcode opcode : {Opcode::kScatter, Opcode::kScatterAdd, Opcode::kScatterMul, Opcode::kScatterMax,
                        Opcode::kScatterMin}) {
    const std::string_view name = info(opcode).name;
    EXPECT_EQ(verify(scatter(opcode, out, in, index, 0)), "");
    // Along the axis the input may be longer than the output; off it, no larger.
    EXPECT_EQ(verify(scatter(opcode, out, contiguousOperand(1, DType::kFloat32, {9, 2}),
                             contiguousOperand(2, DType::kInt64, {9, 2}), 0)), "");
    EXPECT_EQ(verify(scatter(opcode, contiguousOperand(0, DType::kBool, {}), contiguousOperand(1, DType::kBool, {}),
                             contiguousOperand(2, DType::kInt64, {}), 0)), "");  // scalars: index 0
    expectRejected(scatter(opcode, out, contiguousOperand(1, DType::kFloat32, {3, 5}),
                           contiguousOperand(2, DType::kInt64, {3, 5}), 0), name,
                   "input [3,5] is larger than the output [5,4] off the axis");
    // The index is i64 with the input's shape.
    expectRejected(scatter(opcode, out, in, contiguousOperand(2, DType::kInt32, {3, 4}), 0), name,
                   "index must be i64, not i32");
    expectRejected(scatter(opcode, out, in, contiguousOperand(2, DType::kInt64, {3, 3}), 0), name,
                   "the index [3,3] and the input [3,4] differ in shape");
    const Operand flat_in = contiguousOperand(1, DType::kFloat32, {12});
    expectRejected(scatter(opcode, out, flat_in, contiguousOperand(2, DType::kInt64, {12}), 0), name, "input rank 1");
    for (double axis : {2.0, -1.0, 0.5, kNaN, kInf}) {
      expectRejected(scatter(opcode, out, in, index, axis), name, "axis=");
    }
    const Operand f64_in = contiguousOperand(1, DType::kFloat64, {3, 4});
    expectRejected(scatter(opcode, out, f64_in, index, 0), name, "operand 1 is f64");
    // out is written in place: it may not repeat an element.
    expectRejected(scatter(opcode, withStrides(out, {0, 1}), in, index, 0), name, "repeats elements");
    Program wrapped = scatter(opcode, out, in, index, 0);
    wrapped.instructions[0].immediates[1] = 1;
    EXPECT_EQ(verify(wrapped), "");
    wrapped.instructions[0].immediates[1] = 3;
    expectRejected(wrapped, name, "wrap=3 is neither 0 nor 1");
  }
}

TEST(Verifier, RejectsABadWrapIndex) {
  auto wrap = [](DType from, double extent, double dimension, DType to = DType::kInt64) {
    Instruction instruction = makeInstruction(Opcode::kWrapIndex, {contiguousOperand(0, to, {6}),
                                                                   contiguousOperand(1, from, {6})});
    instruction.immediates = {extent, dimension};
    return makeProgram({48, 48}, {instruction});
  };
  EXPECT_EQ(verify(wrap(DType::kInt64, 5, 0)), "");
  EXPECT_EQ(verify(wrap(DType::kInt32, 0, 7)), "");  // an empty dimension: every index fails at run time
  EXPECT_EQ(verify(wrap(DType::kUInt8, 0x1p62, 3)), "");
  expectRejected(wrap(DType::kInt64, 5, 0, DType::kInt32), "twrapindex", "output must be i64");
  expectRejected(wrap(DType::kFloat32, 5, 0), "twrapindex", "operand 1 has dtype f32");
  expectRejected(wrap(DType::kBool, 5, 0), "twrapindex", "operand 1 has dtype bool");
  for (double extent : {-1.0, 2.5, kNaN, kInf, 0x1p63}) {
    expectRejected(wrap(DType::kInt64, extent, 0), "twrapindex", "extent=");
  }
  for (double dimension : {-1.0, 0.5, kNaN, 64.0}) {
    expectRejected(wrap(DType::kInt64, 5, dimension), "twrapindex", "dimension=");
  }
}

TEST(Verifier, RejectsANonzeroOutputNotOfOneRowPerElement) {
  auto nonzero = [](std::initializer_list<int64_t> out, std::initializer_list<int64_t> in, DType dtype = DType::kInt64) {
    return makeProgram({1024, 1024}, {makeInstruction(Opcode::kNonzero, {contiguousOperand(0, dtype, out),
                                                                          contiguousOperand(1, DType::kFloat32, in)})});
  };
  EXPECT_EQ(verify(nonzero({7, 3}, {2, 3, 4})), "");
  EXPECT_EQ(verify(nonzero({0, 2}, {5, 5})), "");
  EXPECT_EQ(verify(nonzero({1, 0}, {})), "");  // a nonzero scalar: one row of no coordinates
  expectRejected(nonzero({7, 2}, {2, 3, 4}), "tnonzero", "must be [count, 3]");
  expectRejected(nonzero({7}, {7}), "tnonzero", "must be [count, 1]");
  expectRejected(nonzero({7, 3}, {2, 3, 4}, DType::kInt32), "tnonzero", "output must be i64");
}

TEST(Verifier, RejectsASearchWhoseLinesDoNotFitItsValues) {
  auto search = [](std::initializer_list<int64_t> sorted, std::initializer_list<int64_t> values, double right = 0,
                   DType sorted_dtype = DType::kFloat32, std::initializer_list<int64_t> out = {}) {
    Instruction instruction = makeInstruction(
        Opcode::kSearchSorted, {contiguousOperand(0, DType::kInt64, out.size() ? out : values),
                                contiguousOperand(1, sorted_dtype, sorted), contiguousOperand(2, DType::kFloat32, values)});
    instruction.immediates[0] = right;
    return makeProgram({1024, 1024, 1024}, {instruction});
  };
  EXPECT_EQ(verify(search({2, 5}, {2, 7})), "");
  EXPECT_EQ(verify(search({1, 0}, {1, 3}, 1)), "");  // empty lines: every position is 0
  expectRejected(search({3, 5}, {2, 7}), "tsearchsorted", "differ before the last dimension");
  expectRejected(search({5}, {2, 7}), "tsearchsorted", "must have the values' rank 2");
  expectRejected(search({}, {}), "tsearchsorted", "at least 1");
  expectRejected(search({2, 5}, {2, 7}, 0, DType::kFloat64), "tsearchsorted", "searches f32 values in f64 lines");
  expectRejected(search({2, 5}, {2, 7}, 0, DType::kFloat32, {2, 6}), "tsearchsorted", "differ in shape");
  expectRejected(search({2, 5}, {2, 7}, 0.5), "tsearchsorted", "right=0.5 is neither 0 nor 1");
}

TEST(Verifier, RejectsAnIotaNotOfRank1) {
  auto iota = [](std::initializer_list<int64_t> shape) {
    return makeProgram({1024}, {makeInstruction(Opcode::kIota, {contiguousOperand(0, DType::kInt64, shape)}, 1)});
  };
  EXPECT_EQ(verify(iota({7})), "");
  EXPECT_EQ(verify(iota({0})), "");
  expectRejected(iota({2, 3}), "tiota", "must have rank 1, not 2");
  expectRejected(iota({}), "tiota", "rank 1, not 0");
  expectRejected(makeProgram({1024}, {makeInstruction(Opcode::kIota, {contiguousOperand(0, DType::kBool, {4})}, 1)}),
                 "tiota", "bool");
}

TEST(Verifier, RejectsIotaImmediatesAnIntegerCannotHold) {
  auto iota = [](DType dtype, double start) {
    return makeProgram({1024}, {makeInstruction(Opcode::kIota, {contiguousOperand(0, dtype, {4})}, start)});
  };
  EXPECT_EQ(verify(iota(DType::kInt64, -5.0)), "");
  EXPECT_EQ(verify(iota(DType::kFloat32, 1e300)), "");  // floats count in double
  expectRejected(iota(DType::kInt64, std::nan("")), "tiota", "does not fit i64");
  expectRejected(iota(DType::kInt32, 1e300), "tiota", "does not fit i32");
}

TEST(Verifier, RejectsRandomDrawsWithoutSense) {
  auto draw = [](Opcode op, DType dtype, std::array<double, kMaxImmediates> immediates) {
    Instruction instruction = makeInstruction(op, {contiguousOperand(0, dtype, {4, 4})});
    instruction.immediates = immediates;
    return makeProgram({1024}, {instruction});
  };
  EXPECT_EQ(verify(draw(Opcode::kUniform, DType::kBFloat16, {0, 1, 4294967295.0, 0, 9007199254740992.0})), "");
  EXPECT_EQ(verify(draw(Opcode::kBernoulli, DType::kBool, {1, 7, 7, 0})), "");
  EXPECT_EQ(verify(draw(Opcode::kRandInt, DType::kInt64, {-9223372036854775808.0, 9223372036854775808.0, 1, 2, 3})), "");
  expectRejected(draw(Opcode::kUniform, DType::kInt32, {0, 1, 1, 2, 3}), "tuniform", "cannot draw dtype i32");
  expectRejected(draw(Opcode::kUniform, DType::kFloat32, {2, 1, 1, 2, 3}), "tuniform", "low <= high");
  expectRejected(draw(Opcode::kUniform, DType::kFloat32, {0, kInf, 1, 2, 3}), "tuniform", "finite");
  expectRejected(draw(Opcode::kNormal, DType::kFloat32, {0, -1, 1, 2, 3}), "tnormal", "std >= 0");
  expectRejected(draw(Opcode::kRandInt, DType::kInt64, {3, 3, 1, 2, 3}), "trandint", "low < high");
  expectRejected(draw(Opcode::kRandInt, DType::kInt64, {0.5, 3, 1, 2, 3}), "trandint", "whole");
  expectRejected(draw(Opcode::kBernoulli, DType::kFloat32, {1.5, 1, 2, 3}), "tbernoulli", "p=1.5 is not a probability");
  expectRejected(draw(Opcode::kBernoulli, DType::kFloat32, {kNaN, 1, 2, 3}), "tbernoulli", "not a probability");
  EXPECT_EQ(verify(draw(Opcode::kExponential, DType::kFloat16, {0.25, 1, 2, 3})), "");
  for (double lambd : {0.0, -1.0, kInf, kNaN}) {
    expectRejected(draw(Opcode::kExponential, DType::kFloat32, {lambd, 1, 2, 3}), "texponential", "lambd > 0");
  }
  expectRejected(draw(Opcode::kExponential, DType::kInt32, {1, 1, 2, 3}), "texponential", "cannot draw dtype i32");
  expectRejected(draw(Opcode::kNormal, DType::kFloat32, {0, 1, -1, 2, 3}), "tnormal", "key0=-1 is not a 32-bit key word");
  expectRejected(draw(Opcode::kNormal, DType::kFloat32, {0, 1, 1, 4294967296.0, 3}), "tnormal", "key1=");
  expectRejected(draw(Opcode::kNormal, DType::kFloat32, {0, 1, 1, 2, 0.5}), "tnormal", "counter=0.5");
  expectRejected(draw(Opcode::kNormal, DType::kFloat32, {0, 1, 1, 2, 1e17}), "tnormal", "2^53");
}

TEST(Verifier, RejectsABadSort) {
  // targsort: out (i64) has in's shape; ttopk: out may be shorter on the axis.
  const Operand in = contiguousOperand(1, DType::kFloat32, {3, 5});
  auto sort = [](Opcode opcode, Operand out, Operand input, double axis, double flag) {
    Instruction instruction = makeInstruction(opcode, {out, input}, axis);
    instruction.immediates[1] = flag;
    return makeProgram({1024, 1024}, {instruction});
  };
  const Operand positions = contiguousOperand(0, DType::kInt64, {3, 5});
  EXPECT_EQ(verify(sort(Opcode::kArgsort, positions, in, 1, 0)), "");
  EXPECT_EQ(verify(sort(Opcode::kArgsort, positions, withStrides(in, {0, 1}), 0, 1)), "");  // a broadcast input
  EXPECT_EQ(verify(sort(Opcode::kTopk, contiguousOperand(0, DType::kInt64, {3, 2}), in, 1, 1)), "");
  EXPECT_EQ(verify(sort(Opcode::kTopk, contiguousOperand(0, DType::kInt64, {0, 5}), in, 0, 0)), "");  // k = 0
  EXPECT_EQ(verify(sort(Opcode::kArgsort, contiguousOperand(0, DType::kInt64, {}),
                        contiguousOperand(1, DType::kBool, {}), 0, 0)), "");  // a scalar: axis 0
  // The positions are i64; ttopk takes no bool (torch.topk does not either).
  expectRejected(sort(Opcode::kArgsort, contiguousOperand(0, DType::kInt32, {3, 5}), in, 1, 0), "targsort",
                 "output must be i64");
  expectRejected(sort(Opcode::kTopk, contiguousOperand(0, DType::kInt64, {3, 2}),
                      contiguousOperand(1, DType::kBool, {3, 5}), 1, 1), "ttopk", "bool, which ttopk does not take");
  // Shapes: targsort keeps the line's length; ttopk selects no more than it has; both agree off the axis.
  expectRejected(sort(Opcode::kArgsort, contiguousOperand(0, DType::kInt64, {3, 4}), in, 1, 0), "targsort",
                 "input [3,5] and output [3,4] differ along the axis");
  expectRejected(sort(Opcode::kTopk, contiguousOperand(0, DType::kInt64, {3, 6}), in, 1, 1), "ttopk",
                 "selects 6 of the 5 elements along the axis");
  expectRejected(sort(Opcode::kTopk, contiguousOperand(0, DType::kInt64, {2, 5}), in, 1, 1), "ttopk",
                 "differ off the axis");
  expectRejected(sort(Opcode::kTopk, contiguousOperand(0, DType::kInt64, {3, 5, 1}), in, 1, 1), "ttopk",
                 "input rank 2 differs from the output's 3");
  // The axis is a dimension; the order flag is 0 or 1.
  for (double axis : {2.0, -1.0, 0.5, kNaN, kInf}) {
    expectRejected(sort(Opcode::kArgsort, positions, in, axis, 0), "targsort", "axis=");
  }
  for (double flag : {2.0, -1.0, 0.5, kNaN}) {
    expectRejected(sort(Opcode::kArgsort, positions, in, 1, flag), "targsort", "descending=");
    expectRejected(sort(Opcode::kTopk, positions, in, 1, flag), "ttopk", "largest=");
  }
  // The output writes each position once.
  expectRejected(sort(Opcode::kArgsort, withStrides(positions, {0, 1}), in, 1, 0), "targsort", "repeats elements");
}

TEST(Verifier, RejectsABadScan) {
  const Operand out = contiguousOperand(0, DType::kInt64, {4, 6});
  auto scan = [](Opcode opcode, Operand o, Operand i, double axis) {
    return makeProgram({1024, 1024}, {makeInstruction(opcode, {o, i}, axis)});
  };
  EXPECT_EQ(verify(scan(Opcode::kCumsum, out, contiguousOperand(1, DType::kInt64, {4, 6}), 0)), "");
  EXPECT_EQ(verify(scan(Opcode::kCumprod, out, withStrides(contiguousOperand(1, DType::kInt64, {4, 6}), {0, 1}), 1)), "");
  EXPECT_EQ(verify(scan(Opcode::kCumsum, contiguousOperand(0, DType::kFloat16, {}),
                        contiguousOperand(1, DType::kFloat16, {}), 0)), "");  // a scalar: axis 0
  expectRejected(scan(Opcode::kCumsum, out, contiguousOperand(1, DType::kInt64, {6, 4}), 0), "tcumsum",
                 "operand 1 has shape [6,4]");
  expectRejected(scan(Opcode::kCumsum, out, contiguousOperand(1, DType::kInt32, {4, 6}), 0), "tcumsum",
                 "operand 1 is i32 but the output is i64");
  expectRejected(scan(Opcode::kCumprod, contiguousOperand(0, DType::kBool, {4, 6}), contiguousOperand(1, DType::kBool, {4, 6}), 0),
                 "tcumprod", "bool, which tcumprod does not take");
  for (double axis : {2.0, -1.0, 1.5, kNaN, -kInf}) {
    expectRejected(scan(Opcode::kCumsum, out, contiguousOperand(1, DType::kInt64, {4, 6}), axis), "tcumsum", "axis=");
  }
}

// ---------------------------------------------------------------------------
// PTO-AS.
// ---------------------------------------------------------------------------

TEST(PtoAs, PrintsTheDocumentedForm) {
  Program program = makeProgram({256, 256}, {});
  program.buffers[0].kind = BufferKind::kInput;
  program.buffers[1].kind = BufferKind::kOutput;
  const Operand out = contiguousOperand(1, DType::kFloat32, {4, 16});
  const Operand a = contiguousOperand(0, DType::kFloat32, {4, 16});
  const Operand b = withStrides(a, {0, 1});
  program.instructions.push_back(makeInstruction(Opcode::kAdd, {out, a, b}, 1));
  program.instructions.push_back(makeInstruction(Opcode::kFill, {withStrides(contiguousOperand(0, DType::kBFloat16, {}), {}, 3)}, -0.5));
  program.buffers.push_back({BufferKind::kTemp, 0});
  const std::string expected =
      "buffer %0 input 256\n"
      "buffer %1 output 256\n"
      "buffer %2 temp 0\n"
      "tadd %1:f32[4,16;16,1]@0, %0:f32[4,16;16,1]@0, %0:f32[4,16;0,1]@0 alpha=1\n"
      "texpands %0:bf16[;]@3 value=-0.5\n";
  EXPECT_EQ(print(program), expected);
  EXPECT_EQ(print(program.instructions[0]), "tadd %1:f32[4,16;16,1]@0, %0:f32[4,16;16,1]@0, %0:f32[4,16;0,1]@0 alpha=1");
  const ParseResult parsed = parse(expected);
  ASSERT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.program, program);
  EXPECT_EQ(verify(parsed.program), "");
}

// A random program (not necessarily valid) touching every instruction of the table.
Program randomProgram(std::mt19937& rng, int instructions_per_opcode) {
  static const std::vector<double> kImmediates = {0.1,    -0.0,  1e300, kInf,    -kInf,  0.0,    1.0,     -2.5,
                                                  5e-324, 1e-300, 1.7976931348623157e308, 123456789.125, -1e-7, 3.0};
  static const std::vector<int64_t> kNumbers = {0, 1, 2, 3, 7, -1, -5, 100, kI64Max, kI64Min, 1 << 20};
  static const std::vector<uint64_t> kBytes = {0, 1, 64, 4096, std::numeric_limits<uint64_t>::max(),
                                               uint64_t{1} << 63, uint64_t{1} << 40};
  auto pick = [&](const auto& values) { return values[rng() % values.size()]; };
  Program program;
  const int buffers = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < buffers; ++i) {
    program.buffers.push_back({static_cast<BufferKind>(rng() % 3), pick(kBytes)});
  }
  for (Opcode op : allOpcodes()) {
    const InstructionInfo& entry = info(op);
    for (int n = 0; n < instructions_per_opcode; ++n) {
      Instruction instruction;
      instruction.opcode = op;
      for (int k = 0; k <= entry.inputs; ++k) {
        Operand operand;
        operand.buffer = static_cast<int32_t>(rng() % 6);
        if (rng() % 8 == 0) operand.buffer = std::numeric_limits<int32_t>::max();
        operand.dtype = static_cast<DType>(rng() % kDTypeCount);
        operand.rank = static_cast<int32_t>(rng() % (kMaxRank + 1));
        for (int d = 0; d < operand.rank; ++d) {
          operand.shape[d] = rng() % 3 ? static_cast<int64_t>(rng() % 5) : pick(kNumbers);
          operand.strides[d] = rng() % 3 ? static_cast<int64_t>(rng() % 9) - 4 : pick(kNumbers);
        }
        operand.offset = rng() % 2 ? static_cast<int64_t>(rng() % 50) : pick(kNumbers);
        instruction.operands.push_back(operand);
      }
      for (int i = 0; i < entry.immediateCount(); ++i) instruction.immediates[i] = pick(kImmediates);
      program.instructions.push_back(instruction);
    }
  }
  return program;
}

TEST(PtoAs, RoundTripsEveryInstructionRankAndImmediate) {
  std::mt19937 rng(20240611);
  std::set<int> ranks;
  std::set<std::string_view> mnemonics;
  for (int round = 0; round < 20; ++round) {
    const Program program = randomProgram(rng, 3);
    const std::string text = print(program);
    const ParseResult parsed = parse(text);
    ASSERT_EQ(parsed.error, "") << text;
    ASSERT_EQ(parsed.program, program) << text;
    EXPECT_EQ(print(parsed.program), text);
    for (size_t i = 0; i < program.instructions.size(); ++i) {
      const Instruction& instruction = program.instructions[i];
      mnemonics.insert(info(instruction.opcode).name);
      for (const Operand& operand : instruction.operands) ranks.insert(operand.rank);
      for (int k = 0; k < kMaxImmediates; ++k) {
        // Bit-exact, -0.0 included.
        EXPECT_EQ(std::bit_cast<uint64_t>(parsed.program.instructions[i].immediates[k]),
                  std::bit_cast<uint64_t>(instruction.immediates[k]));
      }
    }
  }
  EXPECT_EQ(mnemonics.size(), instructionTable().size());
  EXPECT_EQ(ranks.size(), static_cast<size_t>(kMaxRank + 1));
}

TEST(PtoAs, ImmediatesPrintExactly) {
  const Operand out = contiguousOperand(0, DType::kFloat32, {});
  for (auto [value, text] : std::vector<std::pair<double, std::string>>{
           {0.1, "0.1"}, {-0.0, "-0"}, {1e300, "1e+300"}, {kInf, "inf"}, {-kInf, "-inf"}, {1.0, "1"}, {-2.5, "-2.5"}}) {
    const Instruction fill = makeInstruction(Opcode::kFill, {out}, value);
    EXPECT_EQ(print(fill), "texpands %0:f32[;]@0 value=" + text);
  }
  // NaN prints as nan and parses back as a NaN.
  const ParseResult parsed = parse(print(makeProgram({4}, {makeInstruction(Opcode::kFill, {out}, kNaN)})));
  ASSERT_EQ(parsed.error, "");
  EXPECT_TRUE(std::isnan(parsed.program.instructions.at(0).immediates[0]));
  const ParseResult negative_zero = parse("texpands %0:f32[;]@0 value=-0");
  ASSERT_EQ(negative_zero.error, "");
  EXPECT_TRUE(std::signbit(negative_zero.program.instructions.at(0).immediates[0]));
}

TEST(PtoAs, IgnoresCommentsBlankLinesAndSpacing) {
  const std::string plain =
      "buffer %0 input 64\n"
      "buffer %1 output 64\n"
      "tadd %1:f32[4,4;4,1]@0, %0:f32[4,4;1,4]@0, %0:f32[4,4;0,-1]@3 alpha=2\n";
  const std::string decorated =
      "# a program\n"
      "\n"
      "   \t \n"
      "buffer %0 input 64   # the input\n"
      "  buffer   %1\toutput 64\r\n"
      "#tneg nothing here\n"
      "\ttadd %1 : f32 [ 4 , 4 ; 4 , 1 ] @ 0 ,%0:f32[4,4;1,4]@0 , %0:f32[4,4;0,-1]@+3 alpha = 2#done\n"
      "# trailing comment without a newline";
  const ParseResult a = parse(plain);
  const ParseResult b = parse(decorated);
  ASSERT_EQ(a.error, "");
  ASSERT_EQ(b.error, "");
  EXPECT_EQ(a.program, b.program);
  EXPECT_EQ(print(b.program), plain);
  EXPECT_EQ(verify(b.program), "");
  // Nothing at all is the empty program.
  for (std::string_view empty : {"", "\n", "\n\n# x\n", "#", "   "}) {
    const ParseResult result = parse(empty);
    EXPECT_EQ(result.error, "");
    EXPECT_EQ(result.program, Program{});
  }
}

TEST(PtoAs, ParseErrorsNameTheLineColumnAndExpectation) {
  const std::string b0 = "buffer %0 input 64\n";
  const std::string op = "%0:f32[;]@0";
  const std::string nine = "%0:f32[1,1,1,1,1,1,1,1,1;1,1,1,1,1,1,1,1,1]@0";
  const std::vector<std::pair<std::string, std::string>> cases = {
      // Unknown mnemonic: the column of the word.
      {b0 + "  tfoo " + op, "line 2, column 3: expected an instruction or 'buffer', not 'tfoo'"},
      {"%0 input 4", "line 1, column 1: expected an instruction or 'buffer', not ''"},
      // Bad dtype.
      {"tneg %0:f33[;]@0, " + op, "line 1, column 9: expected a dtype (f32, f16, bf16, f64, i8, i16, i32, i64, u8, bool)"},
      {"tneg %0:[;]@0, " + op, "line 1, column 9: expected a dtype"},
      // Missing comma.
      {"tneg " + op + " " + op, "line 1, column 18: expected ','"},
      // Stride count != size count.
      {"tneg %0:f32[2,3;1]@0, " + op, "line 1, column 18: expected as many strides as sizes"},
      {"tneg %0:f32[2;1,1]@0, " + op, "line 1, column 18: expected as many strides as sizes"},
      // Buffers out of order.
      {"buffer %1 input 4", "line 1, column 9: expected buffer %0 (buffers are numbered in order)"},
      {b0 + b0, "line 2, column 9: expected buffer %1 (buffers are numbered in order)"},
      // Trailing junk.
      {"buffer %0 input 4 junk", "line 1, column 19: expected the end of the line"},
      {"tneg " + op + ", " + op + " x", "line 1, column 31: expected the end of the line"},
      {"tneg " + op + ", " + op + " alpha=1", "line 1, column 31: expected the end of the line"},
      // Missing immediate, wrong name, missing value.
      {"tadd " + op + ", " + op + ", " + op, "line 1, column 43: expected alpha="},
      {"tadd " + op + ", " + op + ", " + op + " beta=1", "line 1, column 44: expected alpha="},
      {"tadd " + op + ", " + op + ", " + op + " alpha=", "line 1, column 50: expected a number"},
      {"tadd " + op + ", " + op + ", " + op + " alpha 1", "line 1, column 50: expected '='"},
      {"tadd " + op + ", " + op + ", " + op + " alpha=x", "line 1, column 50: expected a number"},
      {"texpands " + op + " value=1e400", "line 1, column 28: expected a number"},
      // More than 8 dimensions.
      {"tneg " + nine + ", " + op, "line 1, column 29: expected at most 8 dimensions"},
      // Operand syntax.
      {"tneg 0:f32[;]@0, " + op, "line 1, column 6: expected '%'"},
      {"tneg %x:f32[;]@0, " + op, "line 1, column 7: expected a buffer number"},
      {"tneg %-1:f32[;]@0, " + op, "line 1, column 7: expected a buffer number"},
      {"tneg %+-1:f32[;]@0, " + op, "line 1, column 7: expected a buffer number"},
      {"tneg %2147483648:f32[;]@0, " + op, "line 1, column 7: expected a buffer number"},
      {"tneg %0f32[;]@0, " + op, "line 1, column 8: expected ':'"},
      {"tneg %0:f32;]@0, " + op, "line 1, column 12: expected '['"},
      {"tneg %0:f32[2,;1,1]@0, " + op, "line 1, column 15: expected an integer"},
      {"tneg %0:f32[99999999999999999999;1]@0, " + op, "line 1, column 13: expected an integer"},
      {"tneg %0:f32[;]0, " + op, "line 1, column 15: expected '@'"},
      {"tneg %0:f32[;]@, " + op, "line 1, column 16: expected an offset"},
      {"tneg " + op + ",", "line 1, column 18: expected '%'"},
      // Buffer declarations.
      {"buffer", "line 1, column 7: expected '%'"},
      {"buffer %0 inout 4", "line 1, column 11: expected a buffer kind (input, output, temp)"},
      {"buffer %0 input", "line 1, column 16: expected a size in bytes"},
      {"buffer %0 input -4", "line 1, column 17: expected a non-negative size in bytes"},
      {"buffer %0 input 18446744073709551616", "line 1, column 17: expected a size in bytes"},
      {"buffer %0 input +-4", "line 1, column 17: expected a size in bytes"},
      // The first error wins and counts every line.
      {"\n# c\n" + b0 + "tabs " + op + ", %0:f32[;]@0 extra\ntfoo", "line 4, column 31: expected the end of the line"},
  };
  for (const auto& [text, expected] : cases) {
    const ParseResult result = parse(text);
    EXPECT_TRUE(startsWith(result.error, expected)) << "text: " << text << "\n got: " << result.error
                                                   << "\nwant: " << expected;
  }
}

TEST(PtoAs, BufferSizesUseTheFullUnsignedRange) {
  const std::string text = "buffer %0 temp 18446744073709551615\n";
  const ParseResult parsed = parse(text);
  ASSERT_EQ(parsed.error, "");
  ASSERT_EQ(parsed.program.buffers.size(), 1u);
  EXPECT_EQ(parsed.program.buffers[0].bytes, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(parsed.program.buffers[0].kind, BufferKind::kTemp);
  EXPECT_EQ(print(parsed.program), text);
  EXPECT_EQ(parse("buffer %0 input +12").program.buffers.at(0).bytes, 12u);
}

// ---------------------------------------------------------------------------
// Fuzz: mutated printed programs and random bytes never crash the parser or
// the verifier; every parse error is well formed, and every program that
// parses prints back to text that parses to the same program.
// ---------------------------------------------------------------------------

// A valid random program: for several opcodes, operands of random rank and layout.
Program randomValidProgram(std::mt19937& rng) {
  Program program;
  const auto table = instructionTable();
  const int count = 1 + static_cast<int>(rng() % 4);
  for (int n = 0; n < count; ++n) {
    const InstructionInfo& entry = table[rng() % table.size()];
    std::vector<DType> accepted;
    for (DType d : allDTypes()) {
      if (entry.dtypes.contains(d)) accepted.push_back(d);
    }
    const DType dtype = accepted[rng() % accepted.size()];
    const std::vector<DType> dtypes = operandDTypes(entry.opcode, dtype, static_cast<DType>(rng() % kDTypeCount));
    const bool has_axis = entry.group == Group::Gather || entry.group == Group::IndexAdd || entry.group == Group::Sort ||
                          entry.group == Group::Scan || entry.group == Group::ScatterElements;
    const int rank = static_cast<int>(entry.group == Group::Matmul || entry.group == Group::Triangle ? 2 + rng() % 3
                                      : entry.group == Group::Iota ? 1
                                      : has_axis ? 2 : entry.group == Group::Search ? 1 + rng() % 4 : rng() % 5);
    std::vector<int64_t> out_shape;
    for (int d = 0; d < rank; ++d) out_shape.push_back(static_cast<int64_t>(rng() % 4));
    const auto shapes = operandShapes(entry.opcode, out_shape, static_cast<int64_t>(rng() % 4), dtypes.size());
    Instruction instruction;
    instruction.opcode = entry.opcode;
    for (size_t k = 0; k < dtypes.size(); ++k) {
      Operand operand;
      operand.buffer = static_cast<int32_t>(program.buffers.size());
      operand.dtype = dtypes[k];
      operand.rank = static_cast<int32_t>(shapes[k].size());
      std::copy(shapes[k].begin(), shapes[k].end(), operand.shape.begin());
      const auto& shape = operand.shape;
      int64_t stride = 1 + static_cast<int64_t>(rng() % 2), low = 0, high = 0;
      for (int d = operand.rank - 1; d >= 0; --d) {
        const int kind = static_cast<int>(rng() % 4);
        operand.strides[d] = (kind == 0 && k > 0) ? 0 : (kind == 1 ? -stride : stride);
        stride *= std::max<int64_t>(shape[d], 1);
        const int64_t extent = std::max<int64_t>(shape[d] - 1, 0) * operand.strides[d];
        (extent < 0 ? low : high) += extent;
      }
      operand.offset = -low + static_cast<int64_t>(rng() % 3);
      instruction.operands.push_back(operand);
      const uint64_t elements = static_cast<uint64_t>(operand.offset + high + 1);
      program.buffers.push_back({static_cast<BufferKind>(rng() % 3), elements * dtypeSize(operand.dtype)});
    }
    for (int i = 0; i < entry.immediateCount(); ++i) {
      instruction.immediates[i] = static_cast<double>(rng() % 7) - 3.0;
      if (isFloating(dtypes[0]) && rng() % 2) instruction.immediates[i] = 0.1;
    }
    if (entry.group == Group::Norm && entry.has(Property::Reduction) && instruction.operands[0].rank > 0) {
      Operand& out = instruction.operands[0];  // a row's statistic, viewed repeated along its row
      out.strides[out.rank - 1] = 0;
    }
    if (has_axis) instruction.immediates[0] = 1.0;  // operandShapes put the index on axis 1
    if (entry.group == Group::Random) instruction.immediates = validRandomImmediates(entry.opcode, rng);
    if (entry.group == Group::Sort) instruction.immediates[1] = static_cast<double>(rng() % 2);  // a 0/1 flag
    if (entry.group == Group::Gather || entry.group == Group::ScatterElements) instruction.immediates[1] = rng() % 2;
    if (entry.group == Group::WrapIndex) instruction.immediates = {static_cast<double>(rng() % 4), 1.0};
    if (entry.group == Group::Search) instruction.immediates[0] = static_cast<double>(rng() % 2);  // right: 0/1
    if (entry.group == Group::Conv) instruction.immediates = convImmediates(entry.opcode);
    program.instructions.push_back(instruction);
  }
  return program;
}

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string joinLines(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

std::string mutate(std::string text, const std::vector<std::string>& corpus, std::mt19937& rng) {
  static const std::string kAlphabet = "%:[];,@=#.-+eE \t\r\n0123456789abfinotuplmsxv_";
  static const std::vector<std::string> kTokens = {
      "buffer", "input",  "output", "temp",  "tadd", "tsel", "texpands", "tcvt", "alpha=", "value=", "f32",
      "bf16",   "bool",   "i64",    "u8",    "nan",  "inf",  "-inf",     "1e400", "9223372036854775807",
      "-9223372036854775808",       "18446744073709551615",  "%0",       "%3",   "[;]",  "@0", ",", "#"};
  const int mutations = 1 + static_cast<int>(rng() % 3);
  for (int m = 0; m < mutations; ++m) {
    std::vector<std::string> lines;
    const size_t pos = text.empty() ? 0 : rng() % (text.size() + 1);
    switch (rng() % 9) {
      case 0:  // delete a character
        if (pos < text.size()) text.erase(pos, 1);
        break;
      case 1:  // insert a character
        text.insert(pos, 1, kAlphabet[rng() % kAlphabet.size()]);
        break;
      case 2:  // replace a character
        if (pos < text.size()) text[pos] = kAlphabet[rng() % kAlphabet.size()];
        break;
      case 3:  // insert a token
        text.insert(pos, kTokens[rng() % kTokens.size()]);
        break;
      case 4:  // duplicate a line
        lines = splitLines(text);
        if (!lines.empty()) {
          const size_t i = rng() % lines.size();
          lines.insert(lines.begin() + static_cast<long>(rng() % (lines.size() + 1)), lines[i]);
          text = joinLines(lines);
        }
        break;
      case 5:  // delete a line
        lines = splitLines(text);
        if (!lines.empty()) {
          lines.erase(lines.begin() + static_cast<long>(rng() % lines.size()));
          text = joinLines(lines);
        }
        break;
      case 6:  // truncate
        text.resize(pos);
        break;
      case 7: {  // splice in a line of another program
        lines = splitLines(text);
        const std::vector<std::string> other = splitLines(corpus[rng() % corpus.size()]);
        if (!other.empty()) {
          lines.insert(lines.begin() + static_cast<long>(lines.empty() ? 0 : rng() % (lines.size() + 1)),
                       other[rng() % other.size()]);
          text = joinLines(lines);
        }
        break;
      }
      case 8: {  // swap the tails of two lines
        lines = splitLines(text);
        if (lines.size() >= 2) {
          std::string& a = lines[rng() % lines.size()];
          std::string& b = lines[rng() % lines.size()];
          const size_t ca = a.empty() ? 0 : rng() % a.size();
          const size_t cb = b.empty() ? 0 : rng() % b.size();
          const std::string tail_a = a.substr(ca), tail_b = b.substr(cb);
          a = a.substr(0, ca) + tail_b;
          b = b.substr(0, cb) + tail_a;
          text = joinLines(lines);
        }
        break;
      }
    }
  }
  return text;
}

// Parses `text`; checks the error's form, or that the program round-trips and verifies without crashing.
// Returns whether it parsed.
bool checkParse(const std::string& text) {
  const ParseResult result = parse(text);
  if (!result.error.empty()) {
    EXPECT_TRUE(startsWith(result.error, "line ") && contains(result.error, ", column ") &&
                contains(result.error, ": expected "))
        << result.error << "\nfor: " << text;
    return false;
  }
  const std::string printed = print(result.program);
  const ParseResult again = parse(printed);
  EXPECT_EQ(again.error, "") << printed;
  EXPECT_EQ(print(again.program), printed);
  const std::string error = verify(result.program);
  EXPECT_TRUE(error.empty() || startsWith(error, "instruction ")) << error;
  return true;
}

TEST(PtoAsFuzz, MutatedProgramsNeverCrash) {
  std::mt19937 rng(0x5eed);
  std::vector<std::string> corpus;
  for (int i = 0; i < 64; ++i) {
    const Program program = randomValidProgram(rng);
    ASSERT_EQ(verify(program), "") << print(program);
    const std::string text = print(program);
    const ParseResult parsed = parse(text);
    ASSERT_EQ(parsed.error, "") << text;
    ASSERT_EQ(parsed.program, program) << text;
    corpus.push_back(text);
  }
  int parsed = 0, verified = 0;
  constexpr int kIterations = 20000;
  for (int i = 0; i < kIterations; ++i) {
    const std::string text = mutate(corpus[rng() % corpus.size()], corpus, rng);
    if (checkParse(text)) {
      ++parsed;
      verified += verify(parse(text).program).empty() ? 1 : 0;
    }
    if (::testing::Test::HasFailure()) FAIL() << "stopping at iteration " << i;
  }
  // Both outcomes are exercised.
  RecordProperty("parsed", parsed);
  RecordProperty("verified", verified);
  EXPECT_GT(parsed, kIterations / 20);
  EXPECT_LT(parsed, kIterations);
  EXPECT_GT(verified, 0);
}

TEST(PtoAsFuzz, RandomBytesNeverCrash) {
  std::mt19937 rng(77);
  static const std::string kGrammar = "%:[];,@=#.-+ \n0123456789tadbufferinputf32";
  for (int i = 0; i < 4000; ++i) {
    std::string text(rng() % 96, '\0');
    const bool grammar = i % 2 == 1;
    for (char& c : text) c = grammar ? kGrammar[rng() % kGrammar.size()] : static_cast<char>(rng() % 256);
    checkParse(text);
    if (::testing::Test::HasFailure()) FAIL() << "stopping at iteration " << i;
  }
}

}  // namespace

TEST(Verifier, NormalisationRowInstructions) {
  const Operand x = contiguousOperand(1, DType::kFloat32, {4, 8});
  const Operand weight = withStrides(contiguousOperand(2, DType::kFloat32, {4, 8}), {0, 1});  // one row repeated
  const Operand missing = withStrides(contiguousOperand(3, DType::kFloat32, {4, 8}), {0, 0});  // no bias: one 0
  const Operand out = contiguousOperand(0, DType::kFloat32, {4, 8});
  EXPECT_EQ(verify(makeProgram({128, 128, 32, 4}, {makeInstruction(Opcode::kLayerNorm, {out, x, weight, missing}, 1e-5)})),
            "");
  EXPECT_EQ(verify(makeProgram({128, 128, 32}, {makeInstruction(Opcode::kRmsNorm, {out, x, weight}, 1e-5)})), "");
  EXPECT_NE(verify(makeProgram({128, 128, 32}, {makeInstruction(Opcode::kLayerNorm, {out, x, weight}, 1e-5)})), "");
  // trowrstd: one value per row, its output repeated along the last dimension only.
  const Operand rstd = withStrides(contiguousOperand(0, DType::kFloat32, {4, 8}), {1, 0});
  EXPECT_EQ(verify(makeProgram({16, 128}, {makeInstruction(Opcode::kRowRstd, {rstd, x}, 1e-5)})), "");
  const Operand column = withStrides(contiguousOperand(0, DType::kFloat32, {4, 8}), {0, 1});
  EXPECT_NE(verify(makeProgram({32, 128}, {makeInstruction(Opcode::kRowRstd, {column, x}, 1e-5)})), "");
  EXPECT_NE(verify(makeProgram({128, 128}, {makeInstruction(Opcode::kRowRstd, {out, x}, 1e-5)})), "");
}
