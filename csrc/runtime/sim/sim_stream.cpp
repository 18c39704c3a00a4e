#include "sim_stream.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>

#include "../error.h"
#include "../profiler.h"
#include "kernels/stream_copy.h"
#include "sim_faults.h"
#include "sim_parallel.h"

namespace pto::rt::sim {
namespace {

// Long enough to bridge the gap between back-to-back launches from Python,
// short enough not to hold a core that torch's own threads may want.
constexpr auto kSpinTime = std::chrono::microseconds(50);

// As a CUDA stream's launch queue: a host thread that runs this far ahead of the
// device waits for it, so the queue (and the host memory its commands and their
// arguments hold) stays bounded however fast work is submitted. A wait names a
// record already queued on another stream, so no cycle of full queues can form.
constexpr uint64_t kMaxPending = 1024;

// Copies and fills this large are split over the device's cores, as a DMA engine
// with several channels would; smaller ones are not worth waking a thread for.
constexpr size_t kParallelBytes = size_t{4} << 20;

// A copy of more than half the host's last-level cache cannot leave its destination
// there: it streams (kernels/stream_copy.h), saving the read that write-allocation
// makes of each destination line (64 MiB on an AVX2 EPYC, 2 cores: 7.6 -> 5.0 ms).
void copyBytes(void* dst, const void* src, size_t bytes) {
  const bool streams = kernels::streamsOutput(static_cast<int64_t>(bytes));
  parallelFor(bytes, kParallelBytes / 2, [&](size_t begin, size_t end) {
    char* to = static_cast<char*>(dst) + begin;
    const char* from = static_cast<const char*>(src) + begin;
    if (streams) kernels::streamCopy(to, from, end - begin);
    else std::memcpy(to, from, end - begin);
  });
}

void fillBytes(void* dst, int value, size_t bytes) {
  parallelFor(bytes, kParallelBytes / 2, [&](size_t begin, size_t end) {
    std::memset(static_cast<char*>(dst) + begin, value, end - begin);
  });
}

}  // namespace

template <typename Ready>
bool SimStream::spinUntil(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (int round = 0;; ++round) {
    if (ready()) return true;
    if ((round & 63) == 63 && std::chrono::steady_clock::now() > deadline) return false;
    if ((round & 15) == 15) std::this_thread::yield();
  }
}

SimStream::SimStream(int32_t device, DeviceMemory& memory, std::atomic<uint64_t>& busy_ns)
    : device_(device),
      memory_(memory),
      busy_ns_(busy_ns),
      ring_(std::make_unique<Command[]>(kMaxPending)),
      worker_([this] { workerLoop(); }) {}

SimStream::~SimStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    stopping_requested_.store(true, std::memory_order_release);
  }
  work_cv_.notify_one();
  worker_.join();
}

void SimStream::enqueue(Command command) {
  command.correlation = profiler::launchCorrelation();
  {
    const std::lock_guard<std::mutex> submitting(submit_mutex_);
    const uint64_t slot = submitted_count_.load(std::memory_order_relaxed);
    if (slot - completed_.load() >= kMaxPending) {
      std::unique_lock<std::mutex> lock(mutex_);
      ++waiters_;
      done_cv_.wait(lock, [&] { return slot - completed_.load() < kMaxPending; });
      --waiters_;
    }
    ring_[slot % kMaxPending] = std::move(command);
    submitted_count_.store(slot + 1);
  }
  // Only a sleeping worker needs the (system-call) wake-up; a spinning or busy one
  // finds the command by itself.
  if (worker_sleeping_.load()) {
    const std::lock_guard<std::mutex> lock(mutex_);
    work_cv_.notify_one();
  }
  if (memory_.strict()) waitIdle();
}

ptoError SimStream::synchronize() {
  waitIdle();
  std::lock_guard<std::mutex> lock(mutex_);
  return takeStickyError();
}

void SimStream::waitIdle() {
  const uint64_t target = submitted_count_.load(std::memory_order_acquire);
  if (spinUntil([&] { return completed_.load(std::memory_order_acquire) >= target; })) return;
  std::unique_lock<std::mutex> lock(mutex_);
  ++waiters_;
  done_cv_.wait(lock, [&] { return completed_.load() >= target; });
  --waiters_;
}

ptoError SimStream::query() {
  if (completed_.load() < submitted_count_.load()) return PTO_ERROR_NOT_READY;
  std::lock_guard<std::mutex> lock(mutex_);
  return takeStickyError();
}

ptoError SimStream::takeStickyError() {
  if (sticky_code_ == PTO_SUCCESS) return PTO_SUCCESS;
  const ptoError code = sticky_code_;
  sticky_code_ = PTO_SUCCESS;
  return fail(code, std::move(sticky_message_));
}

void SimStream::recordFailure(const char* op, ptoError code, const std::string& detail) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (sticky_code_ != PTO_SUCCESS) return;  // the first failure is the one worth reporting
  sticky_code_ = code;
  sticky_message_ = std::string("asynchronous ") + op + " failed on pto:" +
                    std::to_string(device_) + ": " + detail;
}

void SimStream::adoptFailure(ptoError code, const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (sticky_code_ != PTO_SUCCESS) return;
  sticky_code_ = code;
  sticky_message_ = message;
}

namespace {

constinit thread_local const SimStream* tls_worker_of = nullptr;  // the stream whose worker this thread is

}  // namespace

bool SimStream::runsOnThisThread() const { return tls_worker_of == this; }

void SimStream::workerLoop() {
  tls_worker_of = this;
  for (uint64_t next = 0;; ++next) {
    auto pending = [&] { return submitted_count_.load() > next; };
    if (!spinUntil([&] { return pending() || stopping_requested_.load(std::memory_order_acquire); })) {
      std::unique_lock<std::mutex> lock(mutex_);
      worker_sleeping_.store(true);
      work_cv_.wait(lock, [&] { return pending() || stopping_; });
      worker_sleeping_.store(false);
    }
    if (!pending()) return;  // stopping with nothing left to do
    Command& command = ring_[next % kMaxPending];
    const auto start = std::chrono::steady_clock::now();
    execute(command);
    busy_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - start).count());
    command = Command{};  // its references go before the slot is handed back
    completed_.fetch_add(1);
    // Locking before the notify orders it after a waiter's predicate check (made under
    // the lock), so the wake-up cannot fall between that check and its wait.
    if (waiters_.load() > 0) {
      const std::lock_guard<std::mutex> lock(mutex_);
      done_cv_.notify_all();
    }
  }
}

// Programs, copies and fills are what a profiler shows; events and host functions
// are not. The driver delivers each as one activity (a program of several
// instructions also as one per stage), as CUPTI delivers a kernel's record.
void SimStream::execute(const Command& command) {
  const bool profiled = profiler::enabled() && (command.kind == Command::Kind::kProgram ||
                                                command.kind == Command::Kind::kMemcpy ||
                                                command.kind == Command::Kind::kMemset);
  if (profiled) {
    runProfiled(command);
  } else {
    runCommand(command, nullptr);
  }
}

void SimStream::runProfiled(const Command& command) {
  ptoActivity activity{};
  std::vector<ptoActivity> inside;
  if (command.kind == Command::Kind::kProgram) {
    activity = command.program->launchActivity();
  } else {
    std::snprintf(activity.name, sizeof activity.name, "%s", command.name);
    activity.kind = command.kind == Command::Kind::kMemcpy ? PTO_ACTIVITY_COPY : PTO_ACTIVITY_FILL;
    activity.bytes = command.kind == Command::Kind::kMemcpy ? 2 * command.bytes : command.bytes;
  }
  activity.start_ns = ptoProfilerNow();
  runCommand(command, &inside);
  activity.end_ns = ptoProfilerNow();
  activity.device = device_;
  activity.stream = reinterpret_cast<uintptr_t>(this);
  activity.correlation_id = command.correlation;
  for (ptoActivity& stage : inside) {
    stage.device = activity.device;
    stage.stream = activity.stream;
    stage.correlation_id = activity.correlation_id;
    profiler::record(stage);
  }
  profiler::record(activity);
}

void SimStream::runProgram(const Command& command, std::vector<ptoActivity>* inside) {
  try {
    const DeviceMemory::Open open(memory_);
    command.program->run(command.buffers, inside);
  } catch (const std::exception& error) {
    recordFailure(command.name, PTO_ERROR_LAUNCH_FAILED, std::string("PTO_ERROR_LAUNCH_FAILED: ") + error.what());
  } catch (...) {
    recordFailure(command.name, PTO_ERROR_LAUNCH_FAILED, "PTO_ERROR_LAUNCH_FAILED: unknown exception");
  }
}

void SimStream::runCommand(const Command& command, std::vector<ptoActivity>* inside) {
  if (command.injected_fault != 0) {
    const FaultSite site = command.kind == Command::Kind::kProgram ? FaultSite::kLaunch : FaultSite::kMemcpy;
    recordFailure(command.name, PTO_ERROR_LAUNCH_FAILED, describeFault(site, command.injected_fault));
    return;
  }
  try {
    switch (command.kind) {
      // Programs, copies and fills are the device's own work: they run with device
      // memory open. A host function is user code: it runs with memory closed.
      case Command::Kind::kProgram:
        runProgram(command, inside);
        break;
      case Command::Kind::kHostFunc:
        if (const char* failure = command.host_fn(command.user_data)) {
          recordFailure(command.name, PTO_ERROR_LAUNCH_FAILED, failure);
        }
        break;
      case Command::Kind::kMemcpy: {
        const DeviceMemory::Open open(memory_);
        copyBytes(command.dst, command.src, command.bytes);
        break;
      }
      case Command::Kind::kMemset: {
        const DeviceMemory::Open open(memory_);
        fillBytes(command.dst, command.fill_value, command.bytes);
        break;
      }
      case Command::Kind::kEventRecord: {
        std::unique_lock<std::mutex> lock(mutex_);
        const ptoError failure = sticky_code_;
        const std::string message = sticky_message_;
        lock.unlock();
        command.event->complete(command.generation, failure, message);
        break;
      }
      // A captured graph's commands, each as if enqueued alone (and profiled so,
      // as work of this replay's launch).
      case Command::Kind::kGraph:
        for (const Command& node : *command.graph) {
          if (command.correlation == 0) {
            execute(node);
          } else {
            Command launched = node;
            launched.correlation = command.correlation;
            execute(launched);
          }
        }
        break;
      case Command::Kind::kEventWait: {
        command.event->waitFor(command.generation);
        std::string message;
        if (const ptoError failure = command.event->failure(&message); failure != PTO_SUCCESS) {
          adoptFailure(failure, message);
        }
        break;
      }
    }
  } catch (const std::exception& error) {
    recordFailure(command.name, PTO_ERROR_LAUNCH_FAILED, error.what());
  } catch (...) {
    recordFailure(command.name, PTO_ERROR_LAUNCH_FAILED, "unknown exception");
  }
}

}  // namespace pto::rt::sim
