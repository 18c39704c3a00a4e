// The activity recorder behind ptoProfiler*: driver-independent. A driver
// delivers a record for each program launch, copy and fill its streams execute
// (and for each stage inside a program), as CUPTI delivers activity records.
#pragma once

#include "pto_runtime.h"

namespace pto::rt::profiler {

bool enabled();
// Keeps `activity` until ptoProfilerFlush takes it.
void record(const ptoActivity& activity);

}  // namespace pto::rt::profiler
