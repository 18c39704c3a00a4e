#include "tiling.h"

#include <map>

namespace pto::isa {

bool fusable(const Instruction& instruction) {
  const InstructionInfo& entry = info(instruction.opcode);
  return entry.has(Property::Tileable) && (!entry.has(Property::Gemm) || instruction.operands[0].rank == 2);
}

int deepestTileDim(const Instruction& instruction) {
  const InstructionInfo& entry = info(instruction.opcode);
  const Operand& out = instruction.operands[0];
  if (entry.has(Property::Gemm)) return 0;  // M: a tile is a band of output rows and of a's rows
  if (entry.has(Property::RowOp)) return out.rank - 2;
  if (entry.has(Property::Reduction)) {
    for (int d = 0; d < out.rank; ++d) {
      if (out.strides[d] == 0 && out.shape[d] > 1) return d - 1;
    }
  }
  return out.rank - 1;
}

bool slicedOperand(const Instruction& instruction, size_t operand) {
  return !(info(instruction.opcode).has(Property::Gemm) && operand == 2);
}

Operand sliceOperand(const Operand& operand, const Stage& stage, const int64_t* outer, int64_t row, int64_t rows,
                     bool scratch) {
  Operand tile = operand;
  const int t = stage.tile_dim;
  for (int d = 0; d < t; ++d) {
    if (!scratch) tile.offset += outer[d] * operand.strides[d];
    tile.shape[d] = 1;
  }
  if (!scratch) tile.offset += row * operand.strides[t];
  tile.shape[t] = rows;
  return tile;
}

int64_t rowPitch(const Operand& operand, int32_t tile_dim) {
  const int t = tile_dim;
  if (operand.rank <= t || operand.offset < 0) return 0;
  int64_t footprint = operand.offset + 1;
  for (int d = t + 1; d < operand.rank; ++d) {
    if (operand.strides[d] < 0) return 0;
    footprint += (operand.shape[d] - 1) * operand.strides[d];
  }
  const int64_t pitch = operand.strides[t];
  if (pitch < footprint) return 0;
  // Rows of different outer indices must not meet either.
  int64_t span = pitch * operand.shape[t];
  for (int d = t - 1; d >= 0; --d) {
    if (operand.shape[d] > 1 && operand.strides[d] < span) return 0;
    span = operand.strides[d] * operand.shape[d];
  }
  return pitch;
}

std::string checkTiling(const Program& program, int32_t first, int32_t count, int32_t tile_dim) {
  const int t = tile_dim;
  const Operand& lead = program.instructions[first].operands[0];
  if (t < 0 || lead.rank <= t) return "no dimension to tile over";
  std::map<int32_t, const Operand*> written;  // buffer -> the first operand that writes it
  for (int32_t i = first; i < first + count; ++i) {
    const Instruction& instruction = program.instructions[i];
    if (!fusable(instruction)) return "instruction " + std::to_string(i) + " cannot run by tiles";
    if (deepestTileDim(instruction) < t) return "instruction " + std::to_string(i) + " mixes the tiled dimensions";
    const Operand& out = instruction.operands[0];
    if (out.rank <= t) return "instruction " + std::to_string(i) + " has too few dimensions";
    for (int d = 0; d <= t; ++d) {
      if (out.shape[d] != lead.shape[d]) return "instruction " + std::to_string(i) + " has another tile domain";
    }
    written.emplace(out.buffer, &out);
  }
  for (int32_t i = first; i < first + count; ++i) {
    const Instruction& instruction = program.instructions[i];
    for (size_t k = 0; k < instruction.operands.size(); ++k) {
      const Operand& operand = instruction.operands[k];
      const auto writer = written.find(operand.buffer);
      if (writer == written.end()) continue;  // read only: any layout may be read from any tile
      const Operand& reference = *writer->second;
      const std::string where = "instruction " + std::to_string(i) + " operand " + std::to_string(k);
      if (!slicedOperand(instruction, k)) return where + " reads whole a buffer the stage writes";
      if (operand.dtype != reference.dtype || rowPitch(operand, t) == 0) {
        return where + " is not row aligned with its buffer's other uses";
      }
      for (int d = 0; d <= t; ++d) {
        if (operand.strides[d] != reference.strides[d]) return where + " maps the tile's rows elsewhere";
      }
    }
  }
  return "";
}

}  // namespace pto::isa
