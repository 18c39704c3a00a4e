#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>

#include "convolution.h"
#include "program.h"

namespace pto::isa {
namespace {

template <typename... Parts>
std::string describe(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

std::string shapeText(const Operand& operand) { return "[" + dimsText(operand.shape, operand.rank) + "]"; }

bool sameShape(const Operand& a, const Operand& b) {
  if (a.rank != b.rank) return false;
  for (int d = 0; d < a.rank; ++d) {
    if (a.shape[d] != b.shape[d]) return false;
  }
  return true;
}

// An element index for messages: exact within int64, else only its side.
std::string elementText(__int128 index) {
  if (index > INT64_MAX) return "beyond 2^63";
  if (index < INT64_MIN) return "below -2^63";
  return std::to_string(static_cast<long long>(index));
}

// The operand's lowest and highest element index relative to its buffer start,
// in 128-bit arithmetic so that absurd shapes or strides cannot overflow: one
// extent is below 2^126, but eight of them, or the highest index times the
// dtype's size, are not, so each extent saturates at 2^80 (far past any buffer,
// which holds fewer than 2^64 bytes).
// `reduction_output`: the operand is a reduction's output, whose stride-0
// dimensions are the reduced ones; when one of them is empty the reduction
// still writes its identity to every element of the other dimensions.
struct ElementRange {
  bool empty = true;
  __int128 low = 0, high = 0;  // the lowest and highest element the operand reaches
};

ElementRange elementRange(const Operand& operand, bool reduction_output) {
  for (int d = 0; d < operand.rank; ++d) {
    if (operand.shape[d] == 0 && !(reduction_output && operand.strides[d] == 0)) return {};
  }
  constexpr __int128 kSaturation = static_cast<__int128>(1) << 80;
  ElementRange range{false, operand.offset, operand.offset};
  for (int d = 0; d < operand.rank; ++d) {
    __int128 extent = static_cast<__int128>(operand.shape[d] - 1) * operand.strides[d];
    extent = extent > kSaturation ? kSaturation : extent < -kSaturation ? -kSaturation : extent;
    (extent < 0 ? range.low : range.high) += extent;
  }
  return range;
}

std::string checkBounds(const Operand& operand, uint64_t buffer_bytes, bool reduction_output) {
  const ElementRange range = elementRange(operand, reduction_output);
  if (range.empty) return "";
  const auto size = static_cast<__int128>(dtypeSize(operand.dtype));
  if (range.low < 0 || (range.high + 1) * size > static_cast<__int128>(buffer_bytes)) {
    return describe("reaches outside buffer %", operand.buffer, " (", buffer_bytes,
                    " bytes): elements ", elementText(range.low), " to ", elementText(range.high));
  }
  return "";
}

std::string checkOperand(const Operand& operand, std::span<const uint64_t> buffer_bytes, bool reduction_output) {
  if (operand.buffer < 0 || operand.buffer >= static_cast<int32_t>(buffer_bytes.size())) {
    return describe("refers to buffer %", operand.buffer, ", but the program has ",
                    buffer_bytes.size());
  }
  if (operand.rank < 0 || operand.rank > kMaxRank) {
    return describe("has rank ", operand.rank, " (at most ", kMaxRank, ")");
  }
  if (static_cast<unsigned>(operand.dtype) >= static_cast<unsigned>(kDTypeCount)) {
    return describe("has unknown dtype ", static_cast<unsigned>(operand.dtype));
  }
  for (int d = 0; d < operand.rank; ++d) {
    if (operand.shape[d] < 0) return describe("has a negative size in ", shapeText(operand));
  }
  // Broadcast strides let the element count grow past any memory while the
  // operand stays in bounds. No device addresses more than 2^48 bytes, and an
  // instruction iterating over more elements than that would run for days (or
  // overflow the kernels' int64 counters), so such an operand is refused.
  constexpr int64_t kMaxElements = int64_t{1} << 48;
  int64_t count = 1;
  for (int d = 0; d < operand.rank; ++d) {
    if (operand.shape[d] == 0) {
      count = 0;
      break;
    }
  }
  for (int d = 0; d < operand.rank && count != 0; ++d) {
    if (__builtin_mul_overflow(count, operand.shape[d], &count) || count > kMaxElements) {
      return describe("has more than 2^48 elements: ", shapeText(operand));
    }
  }
  return checkBounds(operand, buffer_bytes[operand.buffer], reduction_output);
}

std::string checkDTypes(const InstructionInfo& entry, const Instruction& instruction) {
  const Operand& out = instruction.operands[0];
  for (int i = 1; i <= entry.inputs; ++i) {
    const DType input = instruction.operands[i].dtype;
    if (entry.has(Property::IndexInput) && i == entry.inputs) continue;
    const bool is_condition = entry.group == Group::Select && i == 1;
    if (is_condition) {
      if (input != DType::kBool) return describe("condition operand must be bool, not ", dtypeName(input));
      continue;
    }
    if (!entry.dtypes.contains(input)) {
      return describe("operand ", i, " has dtype ", dtypeName(input), ", which ", entry.name,
                      " does not take");
    }
    const bool needs_same = entry.output == OutputDType::Same;
    if (needs_same && input != out.dtype) {
      return describe("operand ", i, " is ", dtypeName(input), " but the output is ",
                      dtypeName(out.dtype), "; ", entry.name, " keeps the dtype");
    }
    if (entry.output == OutputDType::Bool && input != instruction.operands[1].dtype) {
      return describe("compares ", dtypeName(instruction.operands[1].dtype), " with ",
                      dtypeName(input));
    }
  }
  if (entry.output == OutputDType::Index && out.dtype != DType::kInt64) {
    return describe("output must be i64 (indices), not ", dtypeName(out.dtype));
  }
  if (entry.output == OutputDType::Bool && out.dtype != DType::kBool) {
    return describe("output must be bool, not ", dtypeName(out.dtype));
  }
  if (entry.group == Group::Fill && !entry.dtypes.contains(out.dtype)) {
    return describe("cannot fill dtype ", dtypeName(out.dtype));
  }
  if (entry.group == Group::Iota && !entry.dtypes.contains(out.dtype)) {  // no inputs to check it by
    return describe("cannot count in dtype ", dtypeName(out.dtype));
  }
  if (entry.group == Group::Random && !entry.dtypes.contains(out.dtype)) {
    return describe("cannot draw dtype ", dtypeName(out.dtype));
  }
  return "";
}

// The immediates the kernels convert to the output's dtype (tadd/tsub's alpha,
// texpands' value) must be representable there once truncated toward zero:
// converting a NaN, an infinity or an out-of-range double to an integer type is
// undefined behaviour. Unsigned types also take negatives down to -max, which
// wrap (two's complement), as PyTorch allows for its integer scalars.
std::string checkImmediates(const InstructionInfo& entry, const Instruction& instruction) {
  if (!entry.has(Property::TypedImmediates)) return "";
  const DType dtype = instruction.operands[0].dtype;
  if (!isIntegral(dtype)) return "";
  double low = 0, high = 0;  // the truncated value's exclusive bounds
  switch (dtype) {
    case DType::kUInt8: low = -256.0, high = 256.0; break;
    case DType::kInt8: low = -129.0, high = 128.0; break;
    case DType::kInt16: low = -32769.0, high = 32768.0; break;
    case DType::kInt32: low = -2147483649.0, high = 2147483648.0; break;
    default: low = -9223372036854775808.0, high = 9223372036854775808.0; break;
  }
  for (int i = 0; i < entry.immediateCount(); ++i) {
    const double value = instruction.immediates[i];
    const double whole = value < 0 ? -std::floor(-value) : std::floor(value);  // NaN stays NaN
    const bool fits = dtype == DType::kInt64 ? whole >= low && whole < high : whole > low && whole < high;
    if (!fits) {
      return describe(entry.immediates[i], "=", value, " does not fit ", dtypeName(dtype));
    }
  }
  return "";
}

bool isWhole(double value) { return std::isfinite(value) && value == std::floor(value); }

// A draw's Philox key is two 32-bit words and its counter a block number below
// 2^53 (exact in a double); the distribution's parameters must make sense.
std::string checkRandom(const Instruction& instruction) {
  const Opcode opcode = instruction.opcode;
  const auto& imm = instruction.immediates;
  const int key = info(opcode).immediateCount() - 3;  // a draw's last three: key0, key1, counter
  for (int i = key; i < key + 2; ++i) {
    if (!isWhole(imm[i]) || imm[i] < 0 || imm[i] >= 4294967296.0) {
      return describe(info(opcode).immediates[i], "=", imm[i], " is not a 32-bit key word");
    }
  }
  const double counter = imm[key + 2];
  if (!isWhole(counter) || counter < 0 || counter > 9007199254740992.0) {
    return describe("counter=", counter, " is not a block number in [0, 2^53]");
  }
  switch (opcode) {
    case Opcode::kUniform:
      if (!(std::isfinite(imm[0]) && std::isfinite(imm[1]) && imm[0] <= imm[1])) {
        return describe("needs finite low <= high, not low=", imm[0], " high=", imm[1]);
      }
      return "";
    case Opcode::kNormal:
      if (!(std::isfinite(imm[0]) && std::isfinite(imm[1]) && imm[1] >= 0)) {
        return describe("needs a finite mean and std >= 0, not mean=", imm[0], " std=", imm[1]);
      }
      return "";
    case Opcode::kExponential:
      if (!(std::isfinite(imm[0]) && imm[0] > 0)) return describe("needs a finite lambd > 0, not lambd=", imm[0]);
      return "";
    case Opcode::kRandInt: {
      constexpr double kTwo63 = 9223372036854775808.0;
      if (!(isWhole(imm[0]) && isWhole(imm[1]) && imm[0] < imm[1] && imm[0] >= -kTwo63 && imm[1] <= kTwo63)) {
        return describe("needs whole low < high in [-2^63, 2^63], not low=", imm[0], " high=", imm[1]);
      }
      return "";
    }
    default:
      if (!(imm[0] >= 0 && imm[0] <= 1)) return describe("p=", imm[0], " is not a probability");
      return "";
  }
}

// tgather's and tscatter's second immediate is a switch.
std::string checkWrap(const Instruction& instruction) {
  const double wrap = instruction.immediates[1];
  return wrap == 0 || wrap == 1 ? "" : describe("wrap=", wrap, " is neither 0 nor 1");
}

// out and index share a shape; in has their rank and covers them off the axis.
std::string checkGather(const Instruction& instruction) {
  const Operand& out = instruction.operands[0];
  const Operand& in = instruction.operands[1];
  const Operand& index = instruction.operands[2];
  const double axis = instruction.immediates[0];
  if (!sameShape(index, out)) {
    return describe("operand 2 has shape ", shapeText(index), " but the output has ", shapeText(out));
  }
  if (index.dtype != DType::kInt64) return describe("the index must be i64, not ", dtypeName(index.dtype));
  if (in.rank != out.rank) return describe("input rank ", in.rank, " differs from the output's ", out.rank);
  if (!(axis >= 0 && axis < std::max(out.rank, 1) && axis == static_cast<int>(axis))) {
    return describe("axis=", axis, " is not a dimension of rank ", out.rank);
  }
  if (std::string error = checkWrap(instruction); !error.empty()) return error;
  for (int d = 0; d < out.rank; ++d) {
    if (d != static_cast<int>(axis) && in.shape[d] < out.shape[d]) {
      return describe("input ", shapeText(in), " is smaller than the output ", shapeText(out), " off the axis");
    }
  }
  return "";
}

// out and in agree off the axis; index is rank 1 with in's extent on the axis.
std::string checkScatter(const Instruction& instruction) {
  const Operand& out = instruction.operands[0];
  const Operand& in = instruction.operands[1];
  const Operand& index = instruction.operands[2];
  const double axis = instruction.immediates[0];
  if (index.dtype != DType::kInt64) return describe("the index must be i64, not ", dtypeName(index.dtype));
  if (in.rank != out.rank || out.rank < 1) return describe("input ", shapeText(in), " and output ", shapeText(out),
                                                           " need one rank of at least 1");
  if (!(axis >= 0 && axis < out.rank && axis == static_cast<int>(axis))) {
    return describe("axis=", axis, " is not a dimension of rank ", out.rank);
  }
  const int a = static_cast<int>(axis);
  if (index.rank != 1 || index.shape[0] != in.shape[a]) {
    return describe("the index ", shapeText(index), " must be rank 1 with the input's ", in.shape[a], " entries");
  }
  for (int d = 0; d < out.rank; ++d) {
    if (d != a && in.shape[d] != out.shape[d]) {
      return describe("input ", shapeText(in), " and output ", shapeText(out), " differ off the axis");
    }
  }
  return "";
}

// An axis immediate names a dimension: an integer in [0, rank), or 0 for a scalar.
std::string checkAxis(double axis, int rank) {
  if (!(axis >= 0 && axis < std::max(rank, 1) && axis == static_cast<int>(axis))) {
    return describe("axis=", axis, " is not a dimension of rank ", rank);
  }
  return "";
}

// in has out's rank and shape, except that ttopk's out may be shorter on the axis;
// the order flag (descending, largest) is 0 or 1.
std::string checkSort(const InstructionInfo& entry, const Instruction& instruction) {
  const Operand& out = instruction.operands[0];
  const Operand& in = instruction.operands[1];
  if (in.rank != out.rank) return describe("input rank ", in.rank, " differs from the output's ", out.rank);
  if (std::string error = checkAxis(instruction.immediates[0], out.rank); !error.empty()) return error;
  const double flag = instruction.immediates[1];
  if (flag != 0 && flag != 1) return describe(entry.immediates[1], "=", flag, " is neither 0 nor 1");
  const int axis = static_cast<int>(instruction.immediates[0]);
  for (int d = 0; d < out.rank; ++d) {
    if (d == axis && entry.opcode == Opcode::kTopk) {
      if (out.shape[d] > in.shape[d]) {
        return describe("selects ", out.shape[d], " of the ", in.shape[d], " elements along the axis: output ",
                        shapeText(out), ", input ", shapeText(in));
      }
    } else if (out.shape[d] != in.shape[d]) {
      return describe("input ", shapeText(in), " and output ", shapeText(out), " differ",
                      d == axis ? " along the axis" : " off the axis");
    }
  }
  return "";
}

// tgather's mirror: index has in's shape; out has their rank and covers them off the axis.
std::string checkScatterElements(const Instruction& instruction) {
  const Operand& out = instruction.operands[0];
  const Operand& in = instruction.operands[1];
  const Operand& index = instruction.operands[2];
  const double axis = instruction.immediates[0];
  if (index.dtype != DType::kInt64) return describe("the index must be i64, not ", dtypeName(index.dtype));
  if (!sameShape(index, in)) {
    return describe("the index ", shapeText(index), " and the input ", shapeText(in), " differ in shape");
  }
  if (in.rank != out.rank) return describe("input rank ", in.rank, " differs from the output's ", out.rank);
  if (!(axis >= 0 && axis < std::max(out.rank, 1) && axis == static_cast<int>(axis))) {
    return describe("axis=", axis, " is not a dimension of rank ", out.rank);
  }
  if (std::string error = checkWrap(instruction); !error.empty()) return error;
  for (int d = 0; d < out.rank; ++d) {
    if (d != static_cast<int>(axis) && in.shape[d] > out.shape[d]) {
      return describe("input ", shapeText(in), " is larger than the output ", shapeText(out), " off the axis");
    }
  }
  return "";
}

// twrapindex: the extent is a count and the dimension a dimension (it names it in messages).
std::string checkWrapIndex(const Instruction& instruction) {
  const double extent = instruction.immediates[0], dimension = instruction.immediates[1];
  if (!(extent >= 0 && extent < 9223372036854775808.0 && extent == std::floor(extent))) {
    return describe("extent=", extent, " is not a size");
  }
  if (!(dimension >= 0 && dimension < kMaxRank && dimension == std::floor(dimension))) {
    return describe("dimension=", dimension, " is not a dimension of rank ", kMaxRank, " or less");
  }
  return "";
}

// tsearchsorted: values of out's shape, sorted lines of their dtype and rank, one line
// per position before the last dimension; right a 0/1 flag.
std::string checkSearch(const Instruction& instruction) {
  const Operand& out = instruction.operands[0];
  const Operand& sorted = instruction.operands[1];
  const Operand& values = instruction.operands[2];
  if (sorted.dtype != values.dtype) {
    return describe("searches ", dtypeName(values.dtype), " values in ", dtypeName(sorted.dtype), " lines");
  }
  if (!sameShape(values, out)) {
    return describe("the values ", shapeText(values), " and the output ", shapeText(out), " differ in shape");
  }
  if (out.rank < 1 || sorted.rank != out.rank) {
    return describe("the sorted lines ", shapeText(sorted), " must have the values' rank ", out.rank, ", at least 1");
  }
  for (int d = 0; d + 1 < out.rank; ++d) {
    if (sorted.shape[d] != out.shape[d]) {
      return describe("the sorted lines ", shapeText(sorted), " and the values ", shapeText(values),
                      " differ before the last dimension");
    }
  }
  const double right = instruction.immediates[0];
  if (right != 0 && right != 1) return describe("right=", right, " is neither 0 nor 1");
  return "";
}

// out[..., M, N], a[..., M, K], b[..., K, N] with equal batch dimensions.
std::string checkMatmulShapes(const Instruction& instruction) {
  const Operand& out = instruction.operands[0];
  const Operand& a = instruction.operands[1];
  const Operand& b = instruction.operands[2];
  if (out.rank < 2 || a.rank != out.rank || b.rank != out.rank) {
    return describe("operands must have one rank of at least 2, got ", shapeText(out), " = ",
                    shapeText(a), " @ ", shapeText(b));
  }
  const int r = out.rank;
  bool fits = a.shape[r - 2] == out.shape[r - 2] && b.shape[r - 1] == out.shape[r - 1] &&
              a.shape[r - 1] == b.shape[r - 2];
  for (int d = 0; d < r - 2; ++d) fits = fits && a.shape[d] == out.shape[d] && b.shape[d] == out.shape[d];
  if (!fits) {
    return describe("shapes do not multiply: ", shapeText(out), " = ", shapeText(a), " @ ", shapeText(b));
  }
  return "";
}

}  // namespace

int64_t Operand::numel() const {
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) count *= shape[d];
  return count;
}

Operand contiguousOperand(int32_t buffer, DType dtype, std::initializer_list<int64_t> shape) {
  Operand operand;
  operand.buffer = buffer;
  operand.dtype = dtype;
  operand.rank = static_cast<int32_t>(shape.size());
  int d = 0;
  for (int64_t size : shape) operand.shape[d++] = size;
  int64_t stride = 1;
  for (int i = operand.rank - 1; i >= 0; --i) {
    operand.strides[i] = stride;
    stride *= operand.shape[i];
  }
  return operand;
}

std::string verifyInstruction(const Instruction& instruction, std::span<const uint64_t> buffer_bytes) {
  const auto raw = static_cast<size_t>(instruction.opcode);
  if (raw >= instructionTable().size()) return describe("unknown opcode ", raw);
  const InstructionInfo& entry = info(instruction.opcode);
  const auto expected = static_cast<size_t>(entry.inputs + 1);
  if (instruction.operands.size() != expected) {
    return describe(entry.name, " takes ", expected, " operands (output first), got ",
                    instruction.operands.size());
  }
  for (size_t i = 0; i < instruction.operands.size(); ++i) {
    const bool reduction_output = i == 0 && entry.has(Property::Reduction);
    if (std::string error = checkOperand(instruction.operands[i], buffer_bytes, reduction_output); !error.empty()) {
      return describe(entry.name, ": operand ", i, " ", error);
    }
    if (entry.has(Property::SameShape) && !sameShape(instruction.operands[i], instruction.operands[0])) {
      return describe(entry.name, ": operand ", i, " has shape ", shapeText(instruction.operands[i]),
                      " but the output has ", shapeText(instruction.operands[0]));
    }
  }
  if (entry.group == Group::Matmul) {
    if (std::string error = checkMatmulShapes(instruction); !error.empty()) {
      return describe(entry.name, ": ", error);
    }
  }
  if (entry.group == Group::Conv) {
    if (std::string error = checkConvolution(instruction); !error.empty()) return describe(entry.name, ": ", error);
  }
  if (entry.group == Group::Gather) {
    if (std::string error = checkGather(instruction); !error.empty()) return describe(entry.name, ": ", error);
  }
  if (entry.group == Group::IndexAdd) {
    if (std::string error = checkScatter(instruction); !error.empty()) return describe(entry.name, ": ", error);
  }
  if (entry.group == Group::ScatterElements) {
    if (std::string error = checkScatterElements(instruction); !error.empty()) return describe(entry.name, ": ", error);
  }
  if (entry.group == Group::WrapIndex) {
    if (std::string error = checkWrapIndex(instruction); !error.empty()) return describe(entry.name, ": ", error);
  }
  if (entry.group == Group::Search) {
    if (std::string error = checkSearch(instruction); !error.empty()) return describe(entry.name, ": ", error);
  }
  if (entry.group == Group::Nonzero) {
    const Operand& out = instruction.operands[0];
    const Operand& in = instruction.operands[1];
    if (out.rank != 2 || out.shape[1] != in.rank) {
      return describe(entry.name, ": the output ", shapeText(out), " must be [count, ", in.rank,
                      "]: one row of coordinates per nonzero element of the input ", shapeText(in));
    }
  }
  if (entry.group == Group::Triangle && instruction.operands[0].rank < 2) {
    return describe(entry.name, ": the operands must have rank 2 or more, not ", instruction.operands[0].rank);
  }
  if (entry.group == Group::Random) {
    if (std::string error = checkRandom(instruction); !error.empty()) return describe(entry.name, ": ", error);
  }
  if (entry.group == Group::Sort) {
    if (std::string error = checkSort(entry, instruction); !error.empty()) return describe(entry.name, ": ", error);
  }
  if (entry.group == Group::Scan) {
    if (std::string error = checkAxis(instruction.immediates[0], instruction.operands[0].rank); !error.empty()) {
      return describe(entry.name, ": ", error);
    }
  }
  if (entry.group == Group::Norm && entry.has(Property::Reduction)) {
    const Operand& out = instruction.operands[0];
    for (int d = 0; d < out.rank; ++d) {
      const bool last = d == out.rank - 1;
      if ((out.strides[d] == 0) != last && out.shape[d] > 1) {
        return describe(entry.name, ": the output must repeat its elements along the last dimension only (stride 0 ",
                        "there and nowhere else), not ", shapeText(out), " with strides ",
                        dimsText(out.strides, out.rank));
      }
    }
  }
  if (entry.group == Group::Iota && instruction.operands[0].rank != 1) {
    return describe(entry.name, ": the output must have rank 1, not ", instruction.operands[0].rank);
  }
  if (!entry.has(Property::Reduction) && instruction.operands[0].numel() > 0) {  // empty: writes nothing
    const Operand& out = instruction.operands[0];
    for (int d = 0; d < out.rank; ++d) {
      if (out.strides[d] == 0 && out.shape[d] > 1) {
        return describe(entry.name, ": the output repeats elements along dimension ", d,
                        " (stride 0); only reductions may");
      }
    }
  }
  if (std::string error = checkDTypes(entry, instruction); !error.empty()) {
    return describe(entry.name, ": ", error);
  }
  if (std::string error = checkImmediates(entry, instruction); !error.empty()) {
    return describe(entry.name, ": ", error);
  }
  return "";
}

Program programOf(Instruction instruction) {
  Program program;
  const bool reduces = info(instruction.opcode).has(Property::Reduction);
  for (size_t i = 0; i < instruction.operands.size(); ++i) {
    const Operand& operand = instruction.operands[i];
    // A buffer index past the operands' count is left undeclared, for verify() to refuse.
    if (operand.buffer < 0 || static_cast<size_t>(operand.buffer) >= instruction.operands.size()) continue;
    const auto b = static_cast<size_t>(operand.buffer);
    if (program.buffers.size() <= b) program.buffers.resize(b + 1);
    if (i == 0) program.buffers[b].kind = BufferKind::kOutput;
    const ElementRange range = elementRange(operand, i == 0 && reduces);
    if (range.empty || range.low < 0) continue;
    const __int128 reach = (range.high + 1) * static_cast<__int128>(dtypeSize(operand.dtype));
    const uint64_t bytes = reach > static_cast<__int128>(UINT64_MAX) ? UINT64_MAX : static_cast<uint64_t>(reach);
    program.buffers[b].bytes = std::max(program.buffers[b].bytes, bytes);
  }
  program.instructions.push_back(std::move(instruction));
  return program;
}

std::string verify(const Program& program) {
  std::vector<uint64_t> sizes;
  for (const Buffer& buffer : program.buffers) sizes.push_back(buffer.bytes);
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    if (std::string error = verifyInstruction(program.instructions[i], sizes); !error.empty()) {
      return describe("instruction ", i, " (", error, ")");
    }
  }
  return "";
}

}  // namespace pto::isa
