// The activity recorder behind ptoProfiler*: driver-independent. A driver
// delivers a record for each program launch, copy and fill its streams execute
// (and for each stage inside a program), as CUPTI delivers activity records.
#pragma once

#include <cstdint>

#include "pto_runtime.h"

namespace pto::rt::profiler {

bool enabled();
// Keeps `activity` until ptoProfilerFlush takes it, and hands it to the subscribers.
void record(const ptoActivity& activity);

// Around a runtime call that queues work while profiling: gives the call a
// correlation id and records it as a PTO_ACTIVITY_LAUNCH when it returns.
class LaunchScope {
 public:
  explicit LaunchScope(const char* call);
  ~LaunchScope();
  LaunchScope(const LaunchScope&) = delete;
  LaunchScope& operator=(const LaunchScope&) = delete;

 private:
  const char* call_;
  uint64_t correlation_ = 0;
  uint64_t start_ns_ = 0;
};

// The correlation id of the LaunchScope open on this thread, or 0: a driver
// stamps it, when it enqueues, on the activities the queued work will record.
uint64_t launchCorrelation();

}  // namespace pto::rt::profiler
