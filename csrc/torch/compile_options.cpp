#include "compile_options.h"

#include "device.h"

namespace pto::torch_glue {

compiler::CompileOptions compileOptionsFor(c10::DeviceIndex device) {
  compiler::CompileOptions options;
  options.tile_memory_bytes = static_cast<uint64_t>(deviceAttribute(device, PTO_DEVICE_ATTR_UNIFIED_BUFFER_BYTES));
  options.tile_elements = deviceAttribute(device, PTO_DEVICE_ATTR_TILE_ELEMENTS);
  options.gemm_tile_rows = deviceAttribute(device, PTO_DEVICE_ATTR_GEMM_TILE_ROWS);
  options.parallel_gemm_tiles = deviceAttribute(device, PTO_DEVICE_ATTR_PARALLEL_GEMM_TILES) != 0;
  return options;
}

}  // namespace pto::torch_glue
