// The simulated device's cores (runtime/sim/sim_parallel.h): parallelFor covers
// its range once on any number of workers, hands over many tiny jobs in a row,
// runs nested calls serially, rethrows a chunk's exception, lets concurrent
// callers through, wakes parked workers, leaves an idle pool asleep, and shuts
// down with its workers spinning or parked.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <stdexcept>
#include <thread>
#include <vector>

#include <unistd.h>

#include "runtime/sim/sim_parallel.h"

namespace {

using pto::rt::sim::ThreadPool;
using namespace std::chrono_literals;

// Longer than the pool's spin: its workers are parked by the end of it.
constexpr auto kParkTime = 20ms;

// Counts the visits of each item of [0, count) under parallelFor.
std::vector<int> visits(ThreadPool& pool, size_t count, size_t grain) {
  std::vector<std::atomic<int>> seen(count);
  pool.parallelFor(count, grain, [&](size_t begin, size_t end) {
    EXPECT_LT(begin, end);
    for (size_t i = begin; i < end; ++i) seen[i].fetch_add(1);
  });
  return std::vector<int>(seen.begin(), seen.end());
}

// This process's threads (Linux: /proc/self/task).
std::set<std::string> threadIds() {
  std::set<std::string> ids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    ids.insert(entry.path().filename().string());
  }
  return ids;
}

// CPU seconds the threads `ids` have used (user + system, in clock ticks). Only the
// pool's own threads count: libraries' threads (OpenMP workers busy-waiting after a call)
// are not the pool's doing.
double cpuSecondsOf(const std::set<std::string>& ids) {
  long ticks = 0;
  for (const std::string& id : ids) {
    std::ifstream stat("/proc/self/task/" + id + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    std::istringstream fields(text.substr(text.rfind(')') + 2));  // after "pid (name) "
    std::string field;
    for (int index = 3; index <= 15 && fields >> field; ++index) {
      if (index == 14 || index == 15) ticks += std::stol(field);  // utime, stime
    }
  }
  return static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

TEST(ThreadPoolTest, CoversTheRangeOnceOnAnyNumberOfWorkers) {
  for (size_t workers : {0, 1, 3}) {
    ThreadPool pool(workers);
    EXPECT_EQ(pool.parallelism(), workers + 1);
    for (size_t count : {0, 1, 2, 7, 1000}) {
      for (size_t grain : {0, 1, 3, 1000}) {
        EXPECT_EQ(visits(pool, count, grain), std::vector<int>(count, 1))
            << workers << " workers, count " << count << ", grain " << grain;
      }
    }
  }
}

TEST(ThreadPoolTest, ManyTinyJobsInARow) {
  ThreadPool pool(3);
  std::atomic<size_t> total{0};
  constexpr size_t kJobs = 5000;
  for (size_t job = 0; job < kJobs; ++job) {
    pool.parallelFor(4, 1, [&](size_t begin, size_t end) { total.fetch_add(end - begin); });
  }
  EXPECT_EQ(total.load(), 4 * kJobs);
}

TEST(ThreadPoolTest, ANestedCallRunsSeriallyOnItsThread) {
  ThreadPool pool(2);
  std::atomic<int> items{0};
  std::atomic<int> nested_on_other_threads{0};
  pool.parallelFor(3, 1, [&](size_t, size_t) {
    const auto outer = std::this_thread::get_id();
    pool.parallelFor(100, 1, [&](size_t begin, size_t end) {
      if (std::this_thread::get_id() != outer) nested_on_other_threads.fetch_add(1);
      items.fetch_add(static_cast<int>(end - begin));
    });
  });
  EXPECT_EQ(items.load(), 300);
  EXPECT_EQ(nested_on_other_threads.load(), 0);
}

TEST(ThreadPoolTest, RethrowsAChunksExceptionOnceEveryChunkIsDone) {
  ThreadPool pool(3);
  std::atomic<int> finished{0};
  EXPECT_THROW(pool.parallelFor(4, 1,
                                [&](size_t begin, size_t) {
                                  if (begin == 2) throw std::runtime_error("chunk 2");
                                  std::this_thread::sleep_for(1ms);
                                  finished.fetch_add(1);
                                }),
               std::runtime_error);
  EXPECT_EQ(finished.load(), 3);
  EXPECT_EQ(visits(pool, 64, 1), std::vector<int>(64, 1));  // still usable
}

TEST(ThreadPoolTest, ConcurrentCallersEachCoverTheirRange) {
  ThreadPool pool(2);
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int caller = 0; caller < 3; ++caller) {
    callers.emplace_back([&] {
      for (int job = 0; job < 300; ++job) {
        if (visits(pool, 33, 1) != std::vector<int>(33, 1)) wrong.fetch_add(1);
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  EXPECT_EQ(wrong.load(), 0);
}

// Each of two chunks waits for the other to start: they finish only if a worker
// runs one beside the caller, so a parked worker has to wake for the job.
TEST(ThreadPoolTest, AParkedWorkerWakesForTheNextJob) {
  ThreadPool pool(1);
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(kParkTime);
    std::atomic<int> started{0};
    std::atomic<bool> timed_out{false};
    pool.parallelFor(2, 1, [&](size_t, size_t) {
      started.fetch_add(1);
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      while (started.load() < 2) {
        if (std::chrono::steady_clock::now() > deadline) {
          timed_out = true;
          return;
        }
        std::this_thread::yield();
      }
    });
    EXPECT_FALSE(timed_out.load()) << "round " << round;
  }
}

// A worker that spun forever would cost a whole core over the idle time.
TEST(ThreadPoolTest, AnIdlePoolLeavesTheCpuAlone) {
  const std::set<std::string> others = threadIds();
  ThreadPool pool(2);
  std::set<std::string> workers;
  for (const std::string& id : threadIds()) {
    if (!others.contains(id)) workers.insert(id);
  }
  ASSERT_EQ(workers.size(), 2u);
  EXPECT_EQ(visits(pool, 1000, 1), std::vector<int>(1000, 1));
  std::this_thread::sleep_for(kParkTime);
  const double before = cpuSecondsOf(workers);
  std::this_thread::sleep_for(500ms);
  EXPECT_LT(cpuSecondsOf(workers) - before, 0.05);
}

TEST(ThreadPoolTest, ShutsDownWithWorkersSpinningParkedOrNeverUsed) {
  { ThreadPool never_used(2); }
  {
    ThreadPool spinning(2);
    EXPECT_EQ(visits(spinning, 100, 1), std::vector<int>(100, 1));
  }
  {
    ThreadPool parked(2);
    EXPECT_EQ(visits(parked, 100, 1), std::vector<int>(100, 1));
    std::this_thread::sleep_for(kParkTime);
  }
}

TEST(ThreadPoolTest, TheDevicePoolSpansTheHostsCores) {
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  EXPECT_EQ(pto::rt::sim::parallelism(), cores);
  std::atomic<size_t> total{0};
  pto::rt::sim::parallelFor(1000, 10, [&](size_t begin, size_t end) { total.fetch_add(end - begin); });
  EXPECT_EQ(total.load(), 1000u);
}

}  // namespace
