#include "profiler.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

#include "error.h"

namespace pto::rt::profiler {
namespace {

std::atomic<bool> g_started{false};
std::atomic<int> g_subscriber_count{0};
std::atomic<uint64_t> g_next_correlation{1};
std::mutex g_mutex;
std::deque<ptoActivity> g_activities;  // guarded by g_mutex
std::mutex g_subscribers_mutex;        // held while a callback runs
std::vector<std::pair<ptoActivityCallback, void*>> g_subscribers;

// Plain arrays, not containers: thread-locals with destructors may be gone while
// the driver's exit hook still lets queued work finish on this thread.
constexpr int kMaxExternalIds = 64;
thread_local uint64_t tls_external_ids[kMaxExternalIds];
thread_local int tls_external_depth = 0;  // may exceed kMaxExternalIds: the deepest ones are not kept
thread_local uint64_t tls_launch_correlation = 0;

void store(const ptoActivity& activity) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_activities.push_back(activity);
}

void deliver(const ptoActivity& activity) {
  std::lock_guard<std::mutex> lock(g_subscribers_mutex);
  for (const auto& [callback, user_data] : g_subscribers) callback(&activity, user_data);
}

uint64_t innermostExternalId() {
  if (tls_external_depth == 0) return 0;
  return tls_external_ids[std::min(tls_external_depth, kMaxExternalIds) - 1];
}

}  // namespace

bool enabled() {
  return g_started.load(std::memory_order_relaxed) || g_subscriber_count.load(std::memory_order_relaxed) > 0;
}

void record(const ptoActivity& activity) {
  if (g_started.load(std::memory_order_relaxed)) store(activity);
  if (g_subscriber_count.load(std::memory_order_relaxed) > 0) deliver(activity);
}

LaunchScope::LaunchScope(const char* call) : call_(call) {
  if (!enabled()) return;
  correlation_ = g_next_correlation.fetch_add(1, std::memory_order_relaxed);
  start_ns_ = ptoProfilerNow();
  tls_launch_correlation = correlation_;
}

LaunchScope::~LaunchScope() {
  if (correlation_ == 0) return;
  tls_launch_correlation = 0;
  ptoActivity launch{};
  std::snprintf(launch.name, sizeof launch.name, "%s", call_);
  launch.kind = PTO_ACTIVITY_LAUNCH;
  ptoGetDevice(&launch.device);
  launch.start_ns = start_ns_;
  launch.end_ns = ptoProfilerNow();
  launch.correlation_id = correlation_;
  launch.external_id = innermostExternalId();
  launch.thread_id = static_cast<uint64_t>(syscall(SYS_gettid));
  record(launch);
}

uint64_t launchCorrelation() { return tls_launch_correlation; }

}  // namespace pto::rt::profiler

using namespace pto::rt::profiler;

extern "C" {

ptoError ptoProfilerStart(void) {
  g_started.store(true);
  return PTO_SUCCESS;
}

ptoError ptoProfilerStop(void) {
  g_started.store(false);
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

ptoError ptoProfilerSubscribe(ptoActivityCallback callback, void* user_data) {
  if (callback == nullptr) return pto::rt::fail(PTO_ERROR_INVALID_VALUE, "ptoProfilerSubscribe: callback is null");
  std::lock_guard<std::mutex> lock(g_subscribers_mutex);
  g_subscribers.emplace_back(callback, user_data);
  g_subscriber_count.store(static_cast<int>(g_subscribers.size()));
  return PTO_SUCCESS;
}

ptoError ptoProfilerUnsubscribe(ptoActivityCallback callback, void* user_data) {
  std::lock_guard<std::mutex> lock(g_subscribers_mutex);
  const auto found = std::find(g_subscribers.begin(), g_subscribers.end(), std::make_pair(callback, user_data));
  if (found == g_subscribers.end()) {
    return pto::rt::fail(PTO_ERROR_INVALID_VALUE, "ptoProfilerUnsubscribe: not subscribed");
  }
  g_subscribers.erase(found);
  g_subscriber_count.store(static_cast<int>(g_subscribers.size()));
  return PTO_SUCCESS;
}

ptoError ptoProfilerPushExternalId(uint64_t id) {
  if (tls_external_depth < kMaxExternalIds) tls_external_ids[tls_external_depth] = id;
  ++tls_external_depth;
  return PTO_SUCCESS;
}

ptoError ptoProfilerPopExternalId(void) {
  if (tls_external_depth == 0) {
    return pto::rt::fail(PTO_ERROR_INVALID_VALUE, "ptoProfilerPopExternalId: no id was pushed");
  }
  --tls_external_depth;
  return PTO_SUCCESS;
}

}  // extern "C"
