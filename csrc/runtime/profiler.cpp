#include "profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>

namespace pto::rt::profiler {
namespace {

std::atomic<bool> g_enabled{false};
std::mutex g_mutex;
std::deque<ptoActivity> g_activities;  // guarded by g_mutex

// The command running on this (worker) thread, while profiling.
thread_local ptoActivity tls_current{};
thread_local bool tls_open = false;

void copyText(char* into, size_t capacity, const char* text) {
  std::strncpy(into, text == nullptr ? "" : text, capacity - 1);
  into[capacity - 1] = '\0';
}

void store(const ptoActivity& activity) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_activities.push_back(activity);
}

}  // namespace

bool enabled() { return g_enabled.load(std::memory_order_relaxed); }

void begin(ptoActivityKind kind, const char* name, int32_t device, uint64_t stream, uint64_t bytes) {
  tls_current = ptoActivity{};
  copyText(tls_current.name, sizeof tls_current.name, name);
  tls_current.kind = kind;
  tls_current.device = device;
  tls_current.stream = stream;
  tls_current.bytes = bytes;
  tls_current.start_ns = ptoProfilerNow();
  tls_open = true;
}

void end() {
  if (!tls_open) return;
  tls_open = false;
  tls_current.end_ns = ptoProfilerNow();
  store(tls_current);
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
  if (count == nullptr || (out == nullptr && capacity > 0)) return PTO_ERROR_INVALID_VALUE;
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

void ptoProfilerAnnotate(const char* detail, uint64_t bytes, double flops) {
  if (!tls_open) return;
  copyText(tls_current.detail, sizeof tls_current.detail, detail);
  tls_current.bytes = bytes;
  tls_current.flops = flops;
}

void ptoProfilerRecordInside(const ptoActivity* activity) {
  if (!tls_open || activity == nullptr) return;
  ptoActivity inside = *activity;
  inside.device = tls_current.device;
  inside.stream = tls_current.stream;
  tls_current.kind = PTO_ACTIVITY_PROGRAM;
  store(inside);
}

}  // extern "C"
