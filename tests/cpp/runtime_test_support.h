// Helpers shared by the runtime_tests suites (runtime_*_tests.cpp): printing
// of ptoError, the EXPECT/ASSERT_PTO_OK checks, and the small latches, host
// functions, PTO-AS programs and RAII owners that more than one suite needs. All
// of it is inline so that the suites link into the one runtime_tests executable.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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
inline const char* waitOnLatch(void* latch) {
  static_cast<Latch*>(latch)->wait();
  return nullptr;
}

template <int Milliseconds>
const char* sleepHostFn(void*) {
  std::this_thread::sleep_for(std::chrono::milliseconds(Milliseconds));
  return nullptr;
}

inline const char* incrementHostFn(void* counter) {
  ++*static_cast<int*>(counter);
  return nullptr;
}

// Creates a stream on `device` by making it current for the call only; the
// calling thread's current device is restored afterwards.
inline ptoError createStreamOnDevice(int32_t device, ptoStream* stream) {
  ScopedDevice current(device);
  return ptoStreamCreate(stream);
}

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

// PTO-AS of the small programs the suites launch, over `count` float32 elements.
// texpands: %0 = value.
inline std::string fillProgram(int64_t count, int value) {
  const std::string n = std::to_string(count);
  return "buffer %0 output " + std::to_string(count * 4) + "\ntexpands %0:f32[" + n + ";1]@0 value=" +
         std::to_string(value) + "\n";
}

// tadd: %0 += %1, in place.
inline std::string accumulateProgram(int64_t count) {
  const std::string bytes = std::to_string(count * 4), view = "f32[" + std::to_string(count) + ";1]@0";
  return "buffer %0 output " + bytes + "\nbuffer %1 input " + bytes + "\ntadd %0:" + view + ", %0:" + view +
         ", %1:" + view + " alpha=1\n";
}

// A program loaded from PTO-AS onto the current device, released at scope exit
// (launches of it still queued then run all the same).
class Program {
 public:
  explicit Program(const std::string& pto_as) { EXPECT_PTO_OK(ptoProgramLoad(&program_, pto_as.c_str())); }
  ~Program() {
    if (program_ != nullptr) ptoProgramRelease(program_);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  ptoProgram get() const { return program_; }

 private:
  ptoProgram program_ = nullptr;
};

// Device memory on the current device, freed at scope exit (ptoFree first waits
// for the work queued on the device, which may still use it).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) { EXPECT_PTO_OK(ptoMalloc(&memory_, bytes)); }
  // float32 elements holding `values`.
  explicit DeviceBuffer(const std::vector<float>& values) : DeviceBuffer(values.size() * sizeof(float)) {
    EXPECT_PTO_OK(ptoMemcpy(memory_, values.data(), bytes_, PTO_MEMCPY_HOST_TO_DEVICE));
  }
  ~DeviceBuffer() {
    if (memory_ != nullptr) ptoFree(memory_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return memory_; }
  uint64_t bytes() const { return bytes_; }
  // The contents as float32, copied on the default stream: synchronize the
  // stream that wrote them first.
  std::vector<float> floats() const {
    std::vector<float> values(bytes_ / sizeof(float));
    EXPECT_PTO_OK(ptoMemcpy(values.data(), memory_, values.size() * sizeof(float), PTO_MEMCPY_DEVICE_TO_HOST));
    return values;
  }

 private:
  void* memory_ = nullptr;
  uint64_t bytes_ = 0;
};

// Launches `program` on `stream` with `buffers` bound in order, each with its
// full size, and no workspace.
inline ptoError launchWith(ptoProgram program, ptoStream stream, std::initializer_list<const DeviceBuffer*> buffers) {
  std::vector<void*> addresses;
  std::vector<uint64_t> bytes;
  for (const DeviceBuffer* buffer : buffers) {
    addresses.push_back(buffer->get());
    bytes.push_back(buffer->bytes());
  }
  return ptoProgramLaunch(program, stream, addresses.data(), bytes.data(), addresses.size(), nullptr);
}

}  // namespace pto_test
