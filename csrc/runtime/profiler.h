// The activity recorder behind ptoProfiler*: driver-independent. A driver's stream
// worker brackets each command it executes with begin()/end().
#pragma once

#include <cstdint>

#include "pto_runtime.h"

namespace pto::rt::profiler {

bool enabled();
// Starts the activity of a command about to run on this thread.
void begin(ptoActivityKind kind, const char* name, int32_t device, uint64_t stream, uint64_t bytes);
// Ends and records it (with what the command annotated meanwhile).
void end();

}  // namespace pto::rt::profiler
