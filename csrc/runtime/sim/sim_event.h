// An event of the simulated device: a generation counter the host bumps on each
// record and the recording stream's worker completes, with the completion time.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace pto::rt::sim {

class SimEvent {
 public:
  using Clock = std::chrono::steady_clock;

  // Host side: a new record() call; returns the generation the stream will complete.
  uint64_t nextGeneration() {
    std::lock_guard<std::mutex> lock(mutex_);
    return ++recorded_;
  }

  uint64_t recordedGeneration() {
    std::lock_guard<std::mutex> lock(mutex_);
    return recorded_;
  }

  // Worker side: the stream reached the record command of `generation`.
  void complete(uint64_t generation) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (generation > completed_) {
        completed_ = generation;
        completed_at_ = Clock::now();
      }
    }
    completed_cv_.notify_all();
  }

  void waitFor(uint64_t generation) {
    std::unique_lock<std::mutex> lock(mutex_);
    completed_cv_.wait(lock, [&] { return completed_ >= generation; });
  }

  // True when every record issued so far has completed (or none was issued).
  bool isComplete() {
    std::lock_guard<std::mutex> lock(mutex_);
    return completed_ >= recorded_;
  }

  // The completion time of the latest record, if it was recorded and has completed.
  bool completionTime(Clock::time_point* time, bool* recorded) {
    std::lock_guard<std::mutex> lock(mutex_);
    *recorded = recorded_ > 0;
    if (!*recorded || completed_ < recorded_) return false;
    *time = completed_at_;
    return true;
  }

 private:
  std::mutex mutex_;
  std::condition_variable completed_cv_;
  uint64_t recorded_ = 0;
  uint64_t completed_ = 0;
  Clock::time_point completed_at_{};
};

}  // namespace pto::rt::sim
