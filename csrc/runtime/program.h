// Loading a scheduled program (the compiler's output, isa/schedule.h) without a
// round trip through PTO-AS: the C++ side of ptoProgramLoad.
#pragma once

#include <memory>

#include "isa/schedule.h"
#include "pto_runtime.h"

namespace pto::rt {

// Loads `program` onto the current device. Verifies the program and its
// schedule: PTO_ERROR_INVALID_VALUE, with the verifier's message, when unsound.
ptoError loadProgram(std::shared_ptr<const isa::ScheduledProgram> program, ptoProgram* handle);

}  // namespace pto::rt
