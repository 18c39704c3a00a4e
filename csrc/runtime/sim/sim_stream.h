// A stream of the simulated device: an in-order command queue drained by its own
// worker thread. Enqueueing never blocks on the work itself, except in strict
// mode (sim_memory.h), where it returns once the command has run.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../pto_runtime.h"
#include "sim_event.h"
#include "sim_memory.h"
#include "sim_program.h"

namespace pto::rt::sim {

struct Command {
  enum class Kind : uint8_t { kProgram, kHostFunc, kMemcpy, kMemset, kEventRecord, kEventWait, kGraph };

  Kind kind = Kind::kProgram;
  const char* name = "";  // what a sticky error names: the program or runtime call
  std::shared_ptr<const SimProgram> program;
  std::vector<void*> buffers;  // the program's: every buffer's address
  ptoHostFn host_fn = nullptr;
  void* user_data = nullptr;
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  int fill_value = 0;
  std::shared_ptr<SimEvent> event;
  uint64_t generation = 0;
  uint64_t injected_fault = 0;  // PTO_SIM_FAULTS: the ordinal of the call that fails here, or 0
  std::shared_ptr<const std::vector<Command>> graph;  // kGraph: the captured commands, run in order
  uint64_t correlation = 0;     // while profiling: the launch that queued it (profiler::launchCorrelation)
};

class SimStream {
 public:
  // `memory` is the device memory the stream's commands work on; `busy_ns` the device's
  // count of the time its streams spent running commands. Both outlive the stream.
  SimStream(int32_t device, DeviceMemory& memory, std::atomic<uint64_t>& busy_ns);
  ~SimStream();  // lets pending work finish, then stops the worker

  SimStream(const SimStream&) = delete;
  SimStream& operator=(const SimStream&) = delete;

  int32_t device() const { return device_; }

  // Waits while kMaxPending commands are already queued (as a full CUDA launch queue).
  // In strict mode it waits until the command has run (as CUDA_LAUNCH_BLOCKING=1),
  // so the calling thread never runs while the command holds device memory open.
  void enqueue(Command command);
  // Waits for everything enqueued so far; reports (and clears) a sticky error.
  ptoError synchronize();
  // Waits for everything enqueued so far, leaving a sticky error to be reported.
  void waitIdle();
  // PTO_ERROR_NOT_READY while busy; otherwise reports (and clears) a sticky error.
  ptoError query();
  // Whether the calling thread is this stream's worker (running one of its host functions).
  bool runsOnThisThread() const;

 private:
  void workerLoop();
  // Busy-waits up to kSpinTime for `ready`: cheaper than a sleep and a wake-up
  // when the next launch or the completion is microseconds away.
  template <typename Ready>
  static bool spinUntil(Ready ready);
  void execute(const Command& command);     // runCommand, recorded while profiling
  void runProfiled(const Command& command);
  void runProgram(const Command& command, std::vector<ptoActivity>* inside);
  // While profiling, `inside` receives a program's activities per stage.
  void runCommand(const Command& command, std::vector<ptoActivity>* inside);
  void recordFailure(const char* op, ptoError code, const std::string& detail);
  // A waited-for event completed carrying another stream's failure: this stream
  // fails with the same message, which already names the op and device.
  void adoptFailure(ptoError code, const std::string& message);
  ptoError takeStickyError();

  const int32_t device_;
  DeviceMemory& memory_;
  std::atomic<uint64_t>& busy_ns_;
  // The queue is a ring of kMaxPending commands: enqueue writes the slot at
  // submitted_count_ and publishes it by counting it; the worker runs the slot at
  // completed_, empties it and counts it done. Neither side locks the other out:
  // submit_mutex_ only orders threads enqueueing at once, and mutex_ is taken to
  // sleep, to wake a sleeper and for the sticky error.
  std::unique_ptr<Command[]> ring_;
  std::mutex submit_mutex_;
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  bool stopping_ = false;                        // guarded by mutex_
  std::atomic<bool> stopping_requested_{false};  // stopping_, readable without the lock
  // Set (under mutex_) while the worker sleeps on work_cv_. It and submitted_count_ are
  // sequentially consistent: a worker going to sleep sees the last count, or the
  // thread that counted sees it sleeping and wakes it.
  std::atomic<bool> worker_sleeping_{false};
  std::atomic<uint64_t> submitted_count_{0};  // written under submit_mutex_
  std::atomic<uint64_t> completed_{0};        // written by the worker alone
  // Threads waiting on done_cv_, changed under mutex_; the worker reads it without the
  // lock after each command. Both sides' accesses are sequentially consistent, so a
  // waiter that counted itself before reading completed_ is seen, or sees the completion.
  std::atomic<int> waiters_{0};
  ptoError sticky_code_ = PTO_SUCCESS;
  std::string sticky_message_;
  std::thread worker_;
};

}  // namespace pto::rt::sim
