// Loading a scheduled program (the compiler's output, isa/schedule.h) without a
// round trip through PTO-AS: the C++ side of ptoProgramLoad.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "isa/schedule.h"
#include "pto_runtime.h"

namespace pto::rt {

// Loads `program` onto the current device. Verifies the program and its
// schedule: PTO_ERROR_INVALID_VALUE, with the verifier's message, when unsound.
ptoError loadProgram(std::shared_ptr<const isa::ScheduledProgram> program, ptoProgram* handle);

// A captured graph's work as one program: each device allocation its launches,
// copies and fills touch is one buffer (read only: an input, else an output),
// each launch's temporaries are temporaries, copies are tmov and fills texpands
// over bytes. What it launches, a compiler may optimise and a driver load.
struct CapturedProgram {
  isa::Program program;
  std::vector<void*> memory;  // per buffer: the allocation it stands for (null for a temporary)
};

// PTO_ERROR_NOT_SUPPORTED, naming it, when the graph holds work no program
// expresses (a host copy, a host function).
ptoError capturedProgram(ptoGraph graph, CapturedProgram* out);

}  // namespace pto::rt
