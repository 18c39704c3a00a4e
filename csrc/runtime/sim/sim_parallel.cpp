#include "sim_parallel.h"

#include <algorithm>
#include <chrono>
#include <exception>

namespace pto::rt::sim {
namespace {

// How long a worker waits for the next job, and a caller for its job's last
// chunks, before parking: longer than the gap between back-to-back kernels of a
// stream, short enough that an idle pool is asleep almost at once. OpenMP's
// passive-then-sleep teams and oneDNN's pools make the same trade.
constexpr auto kSpinTime = std::chrono::microseconds(50);

// Set on pool threads, and on a caller while it runs its own chunks: a
// parallelFor from there runs serially.
thread_local bool tls_in_pool = false;

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins (pausing, and yielding the core every 16 rounds so that the stream
// worker and the Python thread still get it on a 2-core host) until `value`
// differs from `old` or kSpinTime has passed; then sleeps in the kernel until it
// does. Returns the new value.
uint32_t awaitChange(const std::atomic<uint32_t>& value, uint32_t old) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (uint32_t round = 0;; ++round) {
    const uint32_t now = value.load(std::memory_order_acquire);
    if (now != old) return now;
    if ((round & 63) == 63 && std::chrono::steady_clock::now() > deadline) break;
    if ((round & 15) == 15) {
      std::this_thread::yield();
    } else {
      cpuRelax();
    }
  }
  for (;;) {
    value.wait(old, std::memory_order_acquire);
    const uint32_t now = value.load(std::memory_order_acquire);
    if (now != old) return now;
  }
}

}  // namespace

struct ThreadPool::Job {
  const std::function<void(size_t, size_t)>* body;
  size_t count;
  size_t step;  // items per chunk
  size_t chunks;
  std::atomic<size_t> next_chunk{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;  // the first chunk that threw; rethrown on the caller
};

ThreadPool::ThreadPool(size_t workers) {
  workers_.reserve(workers);
  for (size_t i = 0; i < workers; ++i) workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::workerLoop() {
  tls_in_pool = true;
  // The generation at construction, not at this thread's start: jobs, or the
  // shutdown, may come before the thread first runs, and must not be missed.
  uint32_t seen = 0;
  for (;;) {
    seen = awaitChange(generation_, seen);
    if (stopping_.load(std::memory_order_acquire)) return;
    // Join before looking at job_ (both sequentially consistent): a caller that
    // clears job_ and then reads joined_ == 0 knows no worker can still reach its frame.
    joined_.fetch_add(1);
    if (Job* job = job_.load()) runChunks(*job);
    if (joined_.fetch_sub(1) == 1) joined_.notify_all();
  }
}

void ThreadPool::runChunks(Job& job) {
  for (;;) {
    const size_t chunk = job.next_chunk.fetch_add(1, std::memory_order_relaxed);
    if (chunk >= job.chunks) return;
    const size_t begin = chunk * job.step;
    try {
      (*job.body)(begin, std::min(job.count, begin + job.step));
    } catch (...) {
      std::lock_guard<std::mutex> lock(job.failure_mutex);
      if (!job.failure) job.failure = std::current_exception();
    }
  }
}

void ThreadPool::parallelFor(size_t count, size_t grain, const std::function<void(size_t, size_t)>& body) {
  if (count == 0) return;
  const size_t chunks = std::min(parallelism(), (count + grain - 1) / std::max<size_t>(grain, 1));
  if (chunks <= 1 || tls_in_pool || !submit_mutex_.try_lock()) {
    body(0, count);
    return;
  }
  std::lock_guard<std::mutex> submitted(submit_mutex_, std::adopt_lock);
  Job job;
  job.body = &body;
  job.count = count;
  job.step = (count + chunks - 1) / chunks;
  job.chunks = chunks;
  job_.store(&job);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();  // a system call only when a worker is parked
  tls_in_pool = true;
  runChunks(job);
  tls_in_pool = false;
  // Every chunk is claimed; the frame stays until the workers that joined let go.
  job_.store(nullptr);
  for (uint32_t joined = joined_.load(); joined != 0; joined = joined_.load()) awaitChange(joined_, joined);
  if (job.failure) std::rethrow_exception(job.failure);
}

namespace {

ThreadPool& pool() {
  // Leaked on purpose, as the driver is: its threads live until process exit.
  static auto* instance = new ThreadPool(std::max(1u, std::thread::hardware_concurrency()) - 1);
  return *instance;
}

}  // namespace

size_t parallelism() { return pool().parallelism(); }

void parallelFor(size_t count, size_t grain, const std::function<void(size_t, size_t)>& body) {
  pool().parallelFor(count, grain, body);
}

}  // namespace pto::rt::sim
