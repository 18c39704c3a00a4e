#include "sim_parallel.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace pto::rt::sim {
namespace {

// Set on pool threads, and on a caller while it runs its own chunk.
thread_local bool tls_in_pool = false;

class ThreadPool {
 public:
  explicit ThreadPool(size_t threads) {
    for (size_t i = 0; i < threads; ++i) {
      threads_.emplace_back([this] {
        tls_in_pool = true;
        run();
      });
    }
  }

  size_t size() const { return threads_.size(); }

  void submit(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return !tasks_.empty(); });
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
};

ThreadPool& pool() {
  // Leaked on purpose, as the driver is: its threads live until process exit.
  static auto* instance = new ThreadPool(std::max(1u, std::thread::hardware_concurrency()) - 1);
  return *instance;
}

}  // namespace

size_t parallelism() { return pool().size() + 1; }

void parallelFor(size_t count, size_t grain, const std::function<void(size_t, size_t)>& body) {
  const size_t chunks = std::min(parallelism(), (count + grain - 1) / std::max<size_t>(grain, 1));
  if (chunks <= 1 || tls_in_pool) {
    if (count > 0) body(0, count);
    return;
  }
  const size_t step = (count + chunks - 1) / chunks;
  std::mutex mutex;
  std::condition_variable done_cv;
  size_t remaining = chunks - 1;
  std::exception_ptr failure;  // the first chunk that threw; rethrown on the caller
  auto run = [&](size_t begin, size_t end) {
    try {
      body(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!failure) failure = std::current_exception();
    }
  };
  for (size_t chunk = 1; chunk < chunks; ++chunk) {
    const size_t begin = chunk * step;
    const size_t end = std::min(count, begin + step);
    pool().submit([&, begin, end] {
      run(begin, end);
      std::lock_guard<std::mutex> lock(mutex);
      if (--remaining == 0) done_cv.notify_one();
    });
  }
  tls_in_pool = true;  // the caller's own chunk must not spread out again either
  run(0, std::min(count, step));
  tls_in_pool = false;
  std::unique_lock<std::mutex> lock(mutex);
  done_cv.wait(lock, [&] { return remaining == 0; });  // the chunks use this frame: wait for all
  if (failure) std::rethrow_exception(failure);
}

}  // namespace pto::rt::sim
