// The simulated device's core hand-off: the latency of one parallelFor of two
// ~1 us chunks (ideal: 1 us, both cores busy; serial: 2 us), back to back and
// after the pool has parked, beside an OpenMP team doing the same (PyTorch's CPU
// kernels run on one); then the process CPU time over a second of idle pool.
// Run by benchmarks/bench_runtime.py; prints a plain-text table.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <thread>
#include <vector>

#include "runtime/sim/sim_parallel.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kChunkTime = 1us;

void busyFor(std::chrono::nanoseconds time) {
  const auto end = Clock::now() + time;
  while (Clock::now() < end) {
  }
}

// Best over `reps` of the mean microseconds per call of `call`, `calls` times in a
// row, sleeping `gap` before each call when it is non-zero (the gap is not timed).
double microsPerCall(const std::function<void()>& call, int calls, std::chrono::microseconds gap, int reps = 5) {
  double best = 1e30;
  for (int rep = 0; rep < reps; ++rep) {
    double total = 0;
    for (int i = 0; i < calls; ++i) {
      if (gap.count() > 0) std::this_thread::sleep_for(gap);
      const auto start = Clock::now();
      call();
      total += std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    }
    best = std::min(best, total / calls);
  }
  return best;
}

double processCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

}  // namespace

int main() {
  const std::function<void(size_t, size_t)> chunk = [](size_t begin, size_t end) {
    busyFor((end - begin) * kChunkTime);
  };
  auto serial = [&] { chunk(0, 2); };
  auto pool = [&] { pto::rt::sim::parallelFor(2, 1, chunk); };
  auto openmp = [&] {
#pragma omp parallel for num_threads(2) schedule(static)
    for (int i = 0; i < 2; ++i) chunk(i, i + 1);
  };
  std::printf("parallelFor of 2 chunks of 1 us on %zu cores (us per call, best of 5)\n",
              pto::rt::sim::parallelism());
  std::printf("  %-40s %8s\n", "case", "us/call");
  const struct {
    const char* name;
    std::function<void()> call;
    int calls;
    std::chrono::microseconds gap;
  } cases[] = {
      {"serial (one core does both chunks)", serial, 20000, 0us},
      {"sim pool, back to back", pool, 20000, 0us},
      {"sim pool, after 2 ms idle (parked)", pool, 200, 2000us},
      {"OpenMP team, back to back", openmp, 20000, 0us},
      {"OpenMP team, after 2 ms idle", openmp, 200, 2000us},
  };
  for (const auto& c : cases) std::printf("  %-40s %8.2f\n", c.name, microsPerCall(c.call, c.calls, c.gap));

  pool();
  std::this_thread::sleep_for(10ms);
  const double before = processCpuSeconds();
  std::this_thread::sleep_for(1s);
  std::printf("process CPU time over 1 s of idle after the sim pool's work: %.1f ms (OpenMP team's spin included)\n",
              (processCpuSeconds() - before) * 1e3);
  return 0;
}
