// Eager ops as programs: each distinct instruction (opcode, operand layouts and
// immediates) is loaded once per device as a one-instruction program and kept,
// so that an eager launch costs a lookup, not a load.
#pragma once

#include <c10/core/Device.h>

#include "isa/program.h"
#include "runtime/pto_runtime.h"

namespace pto::torch_glue {

// The loaded program of `instruction` on pto device `device`; throws with the
// verifier's message when the instruction is not valid.
ptoProgram loadedProgram(const isa::Instruction& instruction, c10::DeviceIndex device);

}  // namespace pto::torch_glue
