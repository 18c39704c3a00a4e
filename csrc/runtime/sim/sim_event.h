// An event of the simulated device: a generation counter the host bumps on each
// record and the recording stream's worker completes, with the completion time
// and the failure the stream had met by then (so that synchronizing or querying
// the event reports it, as every other synchronising call does).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "../pto_runtime.h"

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

  // Worker side: the stream reached the record command of `generation`, with
  // `failure` (PTO_SUCCESS if none) sticky on it.
  void complete(uint64_t generation, ptoError failure, const std::string& message) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (generation > completed_) {
        completed_ = generation;
        completed_at_ = Clock::now();
        failure_ = failure;
        failure_message_ = message;
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

  // The failure the recording stream had met when the latest completed record ran.
  ptoError failure(std::string* message) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_ != PTO_SUCCESS) *message = failure_message_;
    return failure_;
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
  ptoError failure_ = PTO_SUCCESS;
  std::string failure_message_;
};

}  // namespace pto::rt::sim
