// When instructions may run tile by tile, interleaved: the rules fusion follows,
// the schedule verifier re-checks and a driver running a tiled stage relies on.
//
// A stage tiled over dimension t runs each instruction on one index of the
// dimensions before t and a range of rows along t. That is only the same as running
// each instruction whole when no tile reads what another tile writes: every operand
// on a buffer the stage writes must be "row aligned" (it maps dims 0..t the same
// way as every other such operand, and one row's elements stay within that row's
// stretch of the buffer), and no instruction may reduce or otherwise mix across
// dims 0..t.
#pragma once

#include <cstdint>
#include <string>

#include "schedule.h"

namespace pto::isa {

// Whether a tiled stage may hold the instruction: a Tileable one (instructions.def),
// a GEMM only at rank 2 (tiled over M).
bool fusable(const Instruction& instruction);

// The deepest dimension a tile may range over for this instruction: the last
// before its first reduced dimension (the last dimension for the row ops is
// always reduced); -1 when none.
int deepestTileDim(const Instruction& instruction);

// Whether a tile sees only its rows of the operand: false for a GEMM's right-hand
// matrix, which every tile reads whole.
bool slicedOperand(const Instruction& instruction, size_t operand);

// The operand, sliced to one tile: `outer` holds the indices of the dimensions
// before tile_dim, `row` the first row. Scratch buffers are addressed from the
// tile's first row (their operands keep only their offset within a row).
Operand sliceOperand(const Operand& operand, const Stage& stage, const int64_t* outer, int64_t row,
                          int64_t rows, bool scratch);

// Whether the instructions [first, first + count) may run tiled over dimension
// `tile_dim` with the given domain: "" when they may, else why not.
std::string checkTiling(const Program& program, int32_t first, int32_t count, int32_t tile_dim);

// Elements between consecutive rows of a row-aligned operand (its stride along
// tile_dim), or 0 when the operand is not row aligned.
int64_t rowPitch(const Operand& operand, int32_t tile_dim);

}  // namespace pto::isa
