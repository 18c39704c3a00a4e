#include "convolution.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace pto::isa {
namespace {

std::string shapeText(const Operand& operand) { return "[" + dimsText(operand.shape, operand.rank) + "]"; }

bool isWhole(double value) { return std::isfinite(value) && value == std::floor(value); }

}  // namespace

ConvGeometry convGeometry(const Instruction& instruction) {
  const Operand& out = instruction.operands[0];
  const Operand& first = instruction.operands[1];
  const Operand& second = instruction.operands[2];
  ConvGeometry g{};
  switch (instruction.opcode) {
    case Opcode::kConvBackwardData: g.x = &out, g.w = &second, g.y = &first; break;
    case Opcode::kConvBackwardWeight: g.x = &second, g.w = &out, g.y = &first; break;
    default: g.x = &first, g.w = &second, g.y = &out; break;
  }
  g.spatial = out.rank - 2;
  const auto& imm = instruction.immediates;
  g.groups = static_cast<int64_t>(imm[kConvGroups]);
  for (int i = 0; i < kMaxConvSpatial; ++i) {
    g.stride[i] = static_cast<int64_t>(imm[kConvStride + i]);
    g.pad[i] = static_cast<int64_t>(imm[kConvPad + i]);
    g.dilation[i] = static_cast<int64_t>(imm[kConvDilation + i]);
  }
  g.beta = instruction.opcode == Opcode::kConv ? imm[kConvBeta] : 0.0;
  return g;
}

std::string checkConvolution(const Instruction& instruction) {
  std::ostringstream error;
  const InstructionInfo& entry = info(instruction.opcode);
  for (int i = kConvGroups; i < kConvBeta; ++i) {
    const double value = instruction.immediates[i];
    const double lowest = i >= kConvPad && i < kConvDilation ? 0 : 1;  // groups, strides and dilations are >= 1
    if (!isWhole(value) || value < lowest || value > 1e9) {
      error << entry.immediates[i] << "=" << value << " is not a whole number in [" << lowest << ", 1e9]";
      return error.str();
    }
  }
  if (instruction.opcode == Opcode::kConv && !std::isfinite(instruction.immediates[kConvBeta])) {
    error << "beta=" << instruction.immediates[kConvBeta] << " is not finite";
    return error.str();
  }
  const ConvGeometry g = convGeometry(instruction);
  const Operand &x = *g.x, &w = *g.w, &y = *g.y;
  if (x.rank < 3 || x.rank > 2 + kMaxConvSpatial || w.rank != x.rank || y.rank != x.rank) {
    error << "operands must have one rank of 3 to " << 2 + kMaxConvSpatial << " ([N, C, spatial...]), got x "
          << shapeText(x) << ", w " << shapeText(w) << ", y " << shapeText(y);
    return error.str();
  }
  for (int i = g.spatial; i < kMaxConvSpatial; ++i) {
    if (g.stride[i] != 1 || g.pad[i] != 0 || g.dilation[i] != 1) {
      error << "spatial dimension " << i << " is unused at rank " << x.rank << ": its stride, pad and dilation must be "
            << "1, 0 and 1";
      return error.str();
    }
  }
  if (x.shape[0] != y.shape[0] || w.shape[0] != y.shape[1] || w.shape[1] * g.groups != x.shape[1] ||
      w.shape[0] % g.groups != 0) {
    error << "channels do not match: x " << shapeText(x) << ", w " << shapeText(w) << ", y " << shapeText(y)
          << " in " << g.groups << " groups";
    return error.str();
  }
  for (int i = 0; i < g.spatial; ++i) {
    // y's windows lie in x, and x reaches past the last one by less than a stride (or a
    // dilation: a transposed convolution's output_padding may widen x that far).
    // In 128 bits: shapes and parameters below 2^63 and 1e9 cannot overflow.
    const __int128 span = static_cast<__int128>(g.dilation[i]) * (w.shape[2 + i] - 1) + 1;
    const __int128 extra = x.shape[2 + i] + 2 * static_cast<__int128>(g.pad[i]) - span -
                           static_cast<__int128>(y.shape[2 + i] - 1) * g.stride[i];
    const bool fits = w.shape[2 + i] > 0 && y.shape[2 + i] > 0 && extra >= 0 &&
                      extra < std::max(g.stride[i], g.dilation[i]);
    if (!fits) {
      error << "y " << shapeText(y) << " is not the windows of x " << shapeText(x) << " under w " << shapeText(w)
            << " along spatial dimension " << i << " (stride " << g.stride[i] << ", pad " << g.pad[i]
            << ", dilation " << g.dilation[i] << ")";
      return error.str();
    }
  }
  return "";
}

double convMultiplyAdds(const ConvGeometry& g) {
  double count = static_cast<double>(g.y->numel()) * static_cast<double>(g.w->shape[1]);
  for (int i = 0; i < g.spatial; ++i) count *= static_cast<double>(g.w->shape[2 + i]);
  return count;
}

}  // namespace pto::isa
