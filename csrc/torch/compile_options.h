// What the compiler is told of the device a program is compiled for: its tuning
// (tile memory, tile sizes, GEMM tiling, which stages run in parallel), read from
// the device's attributes. Every compile() in the torch glue starts from these,
// so a schedule follows the device it runs on, never the host that compiled it.
#pragma once

#include <c10/core/Device.h>

#include "compiler/compile.h"

namespace pto::torch_glue {

compiler::CompileOptions compileOptionsFor(c10::DeviceIndex device);

}  // namespace pto::torch_glue
