// Helpers shared by the runtime_tests suites (runtime_*_tests.cpp): printing
// of ptoError, the EXPECT/ASSERT_PTO_OK checks, and the small latches, host
// functions, kernels and RAII owners that more than one suite needs. All of it
// is inline so that the suites link into the one runtime_tests executable.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <utility>

#include "runtime/pto_runtime.h"

// Lets GoogleTest print ptoError values by name. It stays in the global
// namespace, next to ptoError, so that GoogleTest finds it.
inline void PrintTo(ptoError error, std::ostream* os) { *os << ptoGetErrorName(error); }

#define EXPECT_PTO_OK(expr) EXPECT_EQ(PTO_SUCCESS, (expr)) << ptoGetRecentErrMsg()
#define ASSERT_PTO_OK(expr) ASSERT_EQ(PTO_SUCCESS, (expr)) << ptoGetRecentErrMsg()

namespace pto_test {

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

inline int32_t deviceCount() {
  int32_t count = 0;
  EXPECT_PTO_OK(ptoGetDeviceCount(&count));
  return count;
}

// Restores the calling thread's current device at scope exit; the second
// constructor also makes `device` current until then.
class ScopedDevice {
 public:
  ScopedDevice() { EXPECT_PTO_OK(ptoGetDevice(&saved_)); }
  explicit ScopedDevice(int32_t device) : ScopedDevice() { EXPECT_PTO_OK(ptoSetDevice(device)); }
  ~ScopedDevice() { ptoSetDevice(saved_); }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int32_t saved_ = 0;
};

// A one-shot gate: work queued behind waitOnLatch() stays queued until open().
// Tests open it before any assertion that could return early, so no stream
// worker is left blocked on a latch that goes out of scope.
class Latch {
 public:
  void open() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Host functions: block on a Latch, sleep for a fixed time, count a run.
inline void waitOnLatch(void* latch) { static_cast<Latch*>(latch)->wait(); }

template <int Milliseconds>
void sleepHostFn(void*) {
  std::this_thread::sleep_for(std::chrono::milliseconds(Milliseconds));
}

inline void incrementHostFn(void* counter) { ++*static_cast<int*>(counter); }

// Creates a stream on `device` by making it current for the call only; the
// calling thread's current device is restored afterwards.
inline ptoError createStreamOnDevice(int32_t device, ptoStream* stream) {
  ScopedDevice current(device);
  return ptoStreamCreate(stream);
}

inline ptoError noopKernel(const void*) { return PTO_SUCCESS; }

// An owned stream on the current device. Its destructor synchronizes before
// destroying, so a test never leaves a sticky error behind; release() hands
// the handle over to the caller instead.
class Stream {
 public:
  Stream() { EXPECT_PTO_OK(ptoStreamCreate(&stream_)); }
  ~Stream() {
    if (stream_ == nullptr) return;
    ptoStreamSynchronize(stream_);
    ptoStreamDestroy(stream_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  ptoStream get() const { return stream_; }
  ptoStream release() { return std::exchange(stream_, nullptr); }

 private:
  ptoStream stream_ = nullptr;
};

}  // namespace pto_test
