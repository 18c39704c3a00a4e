// The simulated device's cores: a pool of host threads, one per host core but
// the caller's, over which large copies (and kernels) split their work.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pto::rt::sim {

// Worker threads that run the chunks of one parallelFor at a time beside its caller.
// Between jobs a worker spins (a pause instruction, yielding now and then so a
// 2-core host's other threads still run) for kSpinTime, then parks on a futex:
// back-to-back kernels hand over in about a microsecond, and an idle pool costs
// no CPU. A job lives in its caller's frame; chunks are claimed from one counter,
// the caller's share included, so nothing is allocated per chunk.
class ThreadPool {
 public:
  explicit ThreadPool(size_t workers);
  ~ThreadPool();  // wakes the workers, spinning or parked, and joins them
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The threads a job spreads over: the workers and the caller.
  size_t parallelism() const { return workers_.size() + 1; }

  // See the free function parallelFor. While another caller's job holds the pool,
  // or when called from a pool thread or a caller's chunk, the body runs serially.
  void parallelFor(size_t count, size_t grain, const std::function<void(size_t, size_t)>& body);

 private:
  struct Job;

  void workerLoop();
  static void runChunks(Job& job);

  std::vector<std::thread> workers_;
  std::mutex submit_mutex_;              // held by the caller whose job the pool runs
  std::atomic<uint32_t> generation_{0};  // bumped per job (and at shutdown): what workers watch
  std::atomic<Job*> job_{nullptr};       // the job being run; null once all its chunks are claimed
  std::atomic<uint32_t> joined_{0};      // workers holding a pointer to job_; its frame waits for 0
  std::atomic<bool> stopping_{false};
};

// Runs body(begin, end) over [0, count) in chunks of at least `grain` items,
// on the pool and the calling thread together; returns when all are done.
// Called from inside a pool thread it runs serially (no nested parallelism).
// If a chunk throws, the first exception is rethrown once every chunk is done.
void parallelFor(size_t count, size_t grain, const std::function<void(size_t, size_t)>& body);

// The number of threads parallelFor spreads over (pool threads + the caller).
size_t parallelism();

}  // namespace pto::rt::sim
