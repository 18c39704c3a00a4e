#include "profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>

#include "error.h"

namespace pto::rt::profiler {
namespace {

std::atomic<bool> g_enabled{false};
std::mutex g_mutex;
std::deque<ptoActivity> g_activities;  // guarded by g_mutex

void store(const ptoActivity& activity) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_activities.push_back(activity);
}

}  // namespace

bool enabled() { return g_enabled.load(std::memory_order_relaxed); }

void record(const ptoActivity& activity) {
  if (enabled()) store(activity);
}

}  // namespace pto::rt::profiler

using namespace pto::rt::profiler;

extern "C" {

ptoError ptoProfilerStart(void) {
  g_enabled.store(true);
  return PTO_SUCCESS;
}

ptoError ptoProfilerStop(void) {
  g_enabled.store(false);
  return PTO_SUCCESS;
}

ptoError ptoProfilerFlush(ptoActivity* out, size_t capacity, size_t* count) {
  if (count == nullptr || (out == nullptr && capacity > 0)) {
    return pto::rt::fail(PTO_ERROR_INVALID_VALUE, "ptoProfilerFlush: null output");
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  const size_t taken = std::min(capacity, g_activities.size());
  std::copy_n(g_activities.begin(), taken, out);
  g_activities.erase(g_activities.begin(), g_activities.begin() + static_cast<std::ptrdiff_t>(taken));
  *count = taken;
  return PTO_SUCCESS;
}

int ptoProfilerEnabled(void) { return enabled() ? 1 : 0; }

uint64_t ptoProfilerNow(void) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

}  // extern "C"
