// How a device wants its programs tiled: the numbers the compiler's fusion sizes
// stages by. Each device reports its own through ptoDeviceGetAttribute
// (PTO_DEVICE_ATTR_UNIFIED_BUFFER_BYTES, _TILE_ELEMENTS, _GEMM_TILE_ROWS,
// _PARALLEL_GEMM_TILES; docs/PORTING.md) and the caller of compile() passes
// them in CompileOptions. These are the PTO ISA's reference core's: what the
// Driver's default answers and what compile() assumes when its caller says
// nothing. Constants only: the isa asks nothing of the machine it runs on.
#pragma once

#include <cstdint>

namespace pto::isa::reference_core {

// Each core's on-chip tile memory, the Unified Buffer.
inline constexpr int64_t kUnifiedBufferBytes = 192 * 1024;
// Elements of one instruction's tile a fused stage aims at: the Unified Buffer
// holding eight float32 tile operands at once.
inline constexpr int64_t kTileElements = kUnifiedBufferBytes / (8 * static_cast<int64_t>(sizeof(float)));
// Output rows of one tile of a stage that holds a GEMM.
inline constexpr int64_t kGemmTileRows = 128;
// Whether the tiles of a stage that holds a GEMM run on the cores in parallel,
// as every other tiled stage's do.
inline constexpr bool kParallelGemmTiles = true;

}  // namespace pto::isa::reference_core
