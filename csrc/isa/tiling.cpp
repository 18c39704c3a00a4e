#include "tiling.h"

#include <unistd.h>

#include <fstream>
#include <map>

namespace pto::isa {
namespace {

// The size of the cache at `level` of `type` ("Data" or "Unified") from sysfs, in bytes; 0 if none.
int64_t sysfsCacheBytes(int level, const std::string& type) {
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    int found_level = 0;
    std::string found_type, size;
    if (!(level_file >> found_level) || !(type_file >> found_type) || !(size_file >> size)) break;
    if (found_level != level || found_type != type || size.empty()) continue;
    const int64_t unit = size.back() == 'K' ? 1024 : size.back() == 'M' ? 1024 * 1024 : 1;
    return std::stoll(size) * unit;
  }
  return 0;
}

int64_t cacheBytes(int sysconf_name, int level, const std::string& type, int64_t fallback) {
  const long bytes = sysconf(sysconf_name);
  if (bytes > 0) return bytes;
  const int64_t from_sysfs = sysfsCacheBytes(level, type);
  return from_sysfs > 0 ? from_sysfs : fallback;
}

}  // namespace

const HostCaches& hostCaches() {
  static const HostCaches caches{
      .l1_data_bytes = cacheBytes(_SC_LEVEL1_DCACHE_SIZE, 1, "Data", 32 * 1024),
      .l2_bytes = cacheBytes(_SC_LEVEL2_CACHE_SIZE, 2, "Unified", 1024 * 1024),
  };
  return caches;
}

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
