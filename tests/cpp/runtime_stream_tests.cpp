// Streams of the PTO runtime: in-order queues whose launches return at once,
// program launches with copied buffer bindings, copies, fills and host
// functions in one order, concurrent submission, the bounded launch queue,
// handles and the default stream.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "runtime/pto_runtime.h"
#include "runtime_test_support.h"

namespace {

using namespace pto_test;
using namespace std::chrono_literals;

// A host function that appends to a log the stream worker owns until synchronize.
struct LogEntry {
  std::vector<int>* log;
  int value;
};

const char* appendHostFn(void* data) {
  auto* entry = static_cast<LogEntry*>(data);
  entry->log->push_back(entry->value);
  return nullptr;
}

// Work of each kind a stream runs, round after round: a program adds 1 to a
// device counter, a copy brings the counter back to the round's host slot, and
// a host function appends that slot to the log. Run in launch order, the log
// reads 1, 2, 3, ...: each copy saw its own round's program and no later one,
// and each host function its own round's copy.
class CountingRounds {
 public:
  explicit CountingRounds(int rounds) : slots_(rounds, -1.0f), entries_(rounds) {
    EXPECT_PTO_OK(ptoMemset(counter_.get(), 0, counter_.bytes()));
  }

  ptoError queue(ptoStream stream, int round) {
    entries_[round] = Entry{&log_, &slots_[round]};
    if (ptoError s = launchWith(add_one_.get(), stream, {&counter_, &one_}); s != PTO_SUCCESS) return s;
    if (ptoError s = ptoMemcpyAsync(&slots_[round], counter_.get(), sizeof(float), PTO_MEMCPY_DEVICE_TO_HOST, stream);
        s != PTO_SUCCESS) {
      return s;
    }
    return ptoLaunchHostFunc(stream, &appendSlot, &entries_[round]);
  }

  const std::vector<float>& log() const { return log_; }

 private:
  struct Entry {
    std::vector<float>* log;
    const float* slot;
  };
  static const char* appendSlot(void* data) {
    auto* entry = static_cast<Entry*>(data);
    entry->log->push_back(*entry->slot);
    return nullptr;
  }

  Program add_one_{accumulateProgram(1)};
  DeviceBuffer counter_{sizeof(float)};
  DeviceBuffer one_{std::vector<float>{1.0f}};
  std::vector<float> slots_;
  std::vector<Entry> entries_;
  std::vector<float> log_;  // touched only by the stream's worker until synchronize
};

std::vector<float> oneTo(int count) {
  std::vector<float> values(count);
  for (int i = 0; i < count; ++i) values[i] = static_cast<float>(i + 1);
  return values;
}

// --- Ordering -------------------------------------------------------------

TEST(RuntimeStream, WorkOnOneStreamRunsInLaunchOrder) {
  Stream stream;
  CountingRounds rounds(200);
  for (int i = 0; i < 200; ++i) ASSERT_PTO_OK(rounds.queue(stream.get(), i));
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(oneTo(200), rounds.log());
}

TEST(RuntimeStream, LaunchReturnsBeforeTheWorkRuns) {
  Stream stream;
  Latch latch;
  int ran = 0;
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  // Had the launch run the function inline, this test would hang above.
  EXPECT_PTO_OK(ptoLaunchHostFunc(stream.get(), &incrementHostFn, &ran));
  EXPECT_EQ(PTO_ERROR_NOT_READY, ptoStreamQuery(stream.get()));
  std::this_thread::sleep_for(2ms);
  EXPECT_EQ(PTO_ERROR_NOT_READY, ptoStreamQuery(stream.get())) << "still blocked on the latch";

  latch.open();
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_PTO_OK(ptoStreamQuery(stream.get()));
  EXPECT_EQ(1, ran);
}

TEST(RuntimeStream, QueryOfAnIdleStreamSucceeds) {
  Stream stream;
  EXPECT_PTO_OK(ptoStreamQuery(stream.get()));
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
}

TEST(RuntimeStream, AsyncCopiesAndFillsAreOrderedWithPrograms) {
  constexpr int kCount = 256;
  constexpr size_t kBytes = kCount * sizeof(float);
  Stream stream;
  DeviceBuffer data(kBytes);
  const DeviceBuffer ones(std::vector<float>(kCount, 1.0f));
  Program add_ones(accumulateProgram(kCount));
  // tadd with alpha=2 of a buffer and itself: %0 = %0 + 2 * %0.
  Program times_three("buffer %0 output 1024\ntadd %0:f32[256;1]@0, %0:f32[256;1]@0, %0:f32[256;1]@0 alpha=2\n");
  std::vector<float> input(kCount, 5), after_fill(kCount, -1), after_add(kCount, -1), after_upload(kCount, -1);

  // Everything is queued behind the latch before any of it runs.
  Latch latch;
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  EXPECT_PTO_OK(ptoMemsetAsync(data.get(), 0, kBytes, stream.get()));
  EXPECT_PTO_OK(ptoMemcpyAsync(after_fill.data(), data.get(), kBytes, PTO_MEMCPY_DEVICE_TO_HOST, stream.get()));
  EXPECT_PTO_OK(launchWith(add_ones.get(), stream.get(), {&data, &ones}));
  EXPECT_PTO_OK(ptoMemcpyAsync(after_add.data(), data.get(), kBytes, PTO_MEMCPY_DEVICE_TO_HOST, stream.get()));
  EXPECT_PTO_OK(ptoMemcpyAsync(data.get(), input.data(), kBytes, PTO_MEMCPY_HOST_TO_DEVICE, stream.get()));
  EXPECT_PTO_OK(launchWith(times_three.get(), stream.get(), {&data}));
  EXPECT_PTO_OK(ptoMemcpyAsync(after_upload.data(), data.get(), kBytes, PTO_MEMCPY_DEVICE_TO_HOST, stream.get()));
  EXPECT_EQ(-1, after_fill[0]) << "nothing may run before the latch opens";
  latch.open();
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));

  EXPECT_EQ(std::vector<float>(kCount, 0), after_fill);
  EXPECT_EQ(std::vector<float>(kCount, 1), after_add);
  EXPECT_EQ(std::vector<float>(kCount, 15), after_upload);
}

TEST(RuntimeStream, SeparateStreamsRunIndependently) {
  Stream blocked, free_running;
  Latch latch;
  int ran = 0;
  ASSERT_PTO_OK(ptoLaunchHostFunc(blocked.get(), &waitOnLatch, &latch));
  EXPECT_PTO_OK(ptoLaunchHostFunc(free_running.get(), &incrementHostFn, &ran));
  // The second stream finishes although the first one is stuck.
  EXPECT_PTO_OK(ptoStreamSynchronize(free_running.get()));
  EXPECT_EQ(1, ran);
  EXPECT_EQ(PTO_ERROR_NOT_READY, ptoStreamQuery(blocked.get()));
  latch.open();
  EXPECT_PTO_OK(ptoStreamSynchronize(blocked.get()));
}

// --- Concurrency ----------------------------------------------------------

// Each thread launches a program and a host function in turn: every launch runs
// once, and each thread's host functions run in the order it launched them.
TEST(RuntimeStream, ConcurrentLaunchesOntoOneStreamAllRunInPerThreadOrder) {
  constexpr int kThreads = 4;
  constexpr int kLaunchesPerThread = 250;
  Stream stream;
  Program add_one(accumulateProgram(1));
  DeviceBuffer counter(sizeof(float));
  const DeviceBuffer one(std::vector<float>{1.0f});
  ASSERT_PTO_OK(ptoMemset(counter.get(), 0, counter.bytes()));
  std::vector<int> log;  // touched only by the stream's worker until synchronize
  std::vector<LogEntry> entries(kThreads * kLaunchesPerThread);

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kLaunchesPerThread; ++i) {
        LogEntry& entry = entries[t * kLaunchesPerThread + i];
        entry = LogEntry{&log, t * kLaunchesPerThread + i};
        EXPECT_PTO_OK(launchWith(add_one.get(), stream.get(), {&counter, &one}));
        EXPECT_PTO_OK(ptoLaunchHostFunc(stream.get(), &appendHostFn, &entry));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));

  EXPECT_EQ(std::vector<float>(1, kThreads * kLaunchesPerThread), counter.floats());
  ASSERT_EQ(static_cast<size_t>(kThreads * kLaunchesPerThread), log.size());
  std::vector<int> next(kThreads, 0);
  for (int value : log) {
    const int t = value / kLaunchesPerThread;
    EXPECT_EQ(next[t], value % kLaunchesPerThread) << "thread " << t << " ran out of order";
    next[t] = value % kLaunchesPerThread + 1;
  }
}

TEST(RuntimeStream, ConcurrentLaunchesOntoSeparateStreams) {
  constexpr int kThreads = 4;
  constexpr int kLaunchesPerThread = 250;
  std::array<int, kThreads> counters{};  // each written only by its own stream's worker

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ptoStream stream = nullptr;
      ASSERT_PTO_OK(ptoStreamCreate(&stream));
      for (int i = 0; i < kLaunchesPerThread; ++i) {
        EXPECT_PTO_OK(ptoLaunchHostFunc(stream, &incrementHostFn, &counters[t]));
      }
      EXPECT_PTO_OK(ptoStreamSynchronize(stream));
      EXPECT_PTO_OK(ptoStreamDestroy(stream));
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(kLaunchesPerThread, counters[t]) << t;
}

TEST(RuntimeStream, ConcurrentSynchronizeFromSeveralThreads) {
  Stream stream;
  Latch latch;
  int ran = 0;
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  EXPECT_PTO_OK(ptoLaunchHostFunc(stream.get(), &incrementHostFn, &ran));

  std::vector<std::thread> waiters;
  std::array<int, 3> seen{};
  for (int t = 0; t < 3; ++t) {
    waiters.emplace_back([&, t] {
      EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
      seen[t] = ran;  // synchronize orders the host function's write before this read
    });
  }
  std::this_thread::sleep_for(2ms);
  latch.open();
  for (auto& waiter : waiters) waiter.join();
  EXPECT_EQ((std::array<int, 3>{1, 1, 1}), seen);
}

// --- Program launches ----------------------------------------------------

// The launch takes the buffers' addresses and sizes when it is made: the caller's
// arrays are free to change (or go) before the program runs.
TEST(RuntimeStream, BufferBindingsAreCopiedAtLaunch) {
  Stream stream;
  Latch latch;
  Program fill(fillProgram(4, 41));
  DeviceBuffer bound(16), other(16);
  ASSERT_PTO_OK(ptoMemset(bound.get(), 0, 16));
  ASSERT_PTO_OK(ptoMemset(other.get(), 0, 16));
  void* buffers[] = {bound.get()};
  uint64_t bytes[] = {16};
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  EXPECT_PTO_OK(ptoProgramLaunch(fill.get(), stream.get(), buffers, bytes, 1, nullptr));
  buffers[0] = other.get();  // the program has not run yet, and must not see this
  bytes[0] = 0;
  latch.open();
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(std::vector<float>(4, 41), bound.floats());
  EXPECT_EQ(std::vector<float>(4, 0), other.floats());
}

TEST(RuntimeStream, BufferArraysGoOutOfScopeBeforeTheProgramRuns) {
  Stream stream;
  Latch latch;
  Program fill(fillProgram(4, 7));
  DeviceBuffer out(16);
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  {
    std::vector<void*> buffers = {out.get()};
    std::vector<uint64_t> bytes = {16};
    EXPECT_PTO_OK(ptoProgramLaunch(fill.get(), stream.get(), buffers.data(), bytes.data(), 1, nullptr));
  }
  latch.open();
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(std::vector<float>(4, 7), out.floats());
}

TEST(RuntimeStream, LaunchRejectsANullProgramBuffersOrHostFunction) {
  Stream stream;
  Program fill(fillProgram(4, 1));
  DeviceBuffer out(16);
  void* buffers[] = {out.get()};
  uint64_t bytes[] = {16};
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoProgramLaunch(nullptr, stream.get(), buffers, bytes, 1, nullptr));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoProgramLaunch(fill.get(), stream.get(), nullptr, bytes, 1, nullptr));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "buffers is null")) << ptoGetRecentErrMsg();
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoProgramLaunch(fill.get(), stream.get(), buffers, nullptr, 1, nullptr));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoLaunchHostFunc(stream.get(), nullptr, nullptr));
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
}

// --- Lifetime and handles -------------------------------------------------

TEST(RuntimeStream, DestroyWaitsForQueuedWork) {
  Stream stream;
  Latch latch;
  int ran = 0;
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  for (int i = 0; i < 20; ++i) {
    EXPECT_PTO_OK(ptoLaunchHostFunc(stream.get(), &incrementHostFn, &ran));
  }
  EXPECT_PTO_OK(ptoLaunchHostFunc(stream.get(), &sleepHostFn<2>, nullptr));
  std::thread opener([&] {
    std::this_thread::sleep_for(3ms);
    latch.open();
  });
  EXPECT_PTO_OK(ptoStreamDestroy(stream.release()));  // returns only once all of it ran
  EXPECT_EQ(20, ran);
  opener.join();
}

TEST(RuntimeStream, DestroyedStreamHandleIsInvalid) {
  ptoStream stream = nullptr;
  ASSERT_PTO_OK(ptoStreamCreate(&stream));
  ASSERT_PTO_OK(ptoStreamDestroy(stream));

  int32_t device = -1;
  int ran = 0;
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoStreamSynchronize(stream));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "not a live stream")) << ptoGetRecentErrMsg();
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoStreamQuery(stream));
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoStreamGetDevice(stream, &device));
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoLaunchHostFunc(stream, &incrementHostFn, &ran));
  Program fill(fillProgram(4, 1));
  DeviceBuffer out(16);
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, launchWith(fill.get(), stream, {&out}));
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoStreamDestroy(stream));
  EXPECT_EQ(0, ran);
}

TEST(RuntimeStream, ForgedStreamHandleIsInvalid) {
  int not_a_stream = 0;
  const auto forged = reinterpret_cast<ptoStream>(&not_a_stream);
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoStreamSynchronize(forged));
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoStreamQuery(forged));
  int ran = 0;
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoLaunchHostFunc(forged, &incrementHostFn, &ran));
  Program fill(fillProgram(4, 1));
  DeviceBuffer out(16);
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, launchWith(fill.get(), forged, {&out}));
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoStreamDestroy(forged));
  EXPECT_EQ(0, ran);
  EXPECT_EQ(0, not_a_stream);
}

TEST(RuntimeStream, DefaultStreamCannotBeDestroyed) {
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoStreamDestroy(nullptr));
  ptoStream default_stream = nullptr;
  ASSERT_PTO_OK(ptoGetDefaultStream(0, &default_stream));
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoStreamDestroy(default_stream));
  EXPECT_PTO_OK(ptoStreamSynchronize(default_stream)) << "the default stream must survive";
}

TEST(RuntimeStream, StreamCreateRejectsNullOutput) {
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoStreamCreate(nullptr));
}

TEST(RuntimeStream, StreamBelongsToTheDeviceCurrentAtCreation) {
  if (deviceCount() < 2) GTEST_SKIP() << "needs two devices";

  ptoStream on1 = nullptr;
  ASSERT_PTO_OK(createStreamOnDevice(1, &on1));  // device 1 is current only for the create

  int32_t device = -1;
  EXPECT_PTO_OK(ptoStreamGetDevice(on1, &device));
  EXPECT_EQ(1, device);
  int ran = 0;
  EXPECT_PTO_OK(ptoLaunchHostFunc(on1, &incrementHostFn, &ran));  // from device 0: allowed
  EXPECT_PTO_OK(ptoStreamSynchronize(on1));
  EXPECT_EQ(1, ran);
  EXPECT_PTO_OK(ptoStreamDestroy(on1));

  Stream on0;
  EXPECT_PTO_OK(ptoStreamGetDevice(on0.get(), &device));
  EXPECT_EQ(0, device);
}

TEST(RuntimeStream, StreamGetDeviceRejectsNullOutput) {
  Stream stream;
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoStreamGetDevice(stream.get(), nullptr));
}

// --- The default stream ---------------------------------------------------

TEST(RuntimeStream, DefaultStreamRunsWorkInOrder) {
  CountingRounds rounds(50);
  for (int i = 0; i < 50; ++i) ASSERT_PTO_OK(rounds.queue(nullptr, i));
  ASSERT_PTO_OK(ptoStreamSynchronize(nullptr));
  EXPECT_PTO_OK(ptoStreamQuery(nullptr));
  EXPECT_EQ(oneTo(50), rounds.log());
}

TEST(RuntimeStream, NullAndExplicitDefaultHandleShareOneQueue) {
  ptoStream explicit_default = nullptr;
  ASSERT_PTO_OK(ptoGetDefaultStream(0, &explicit_default));
  Latch latch;
  int ran = 0;
  ASSERT_PTO_OK(ptoLaunchHostFunc(nullptr, &waitOnLatch, &latch));
  EXPECT_PTO_OK(ptoLaunchHostFunc(explicit_default, &incrementHostFn, &ran));
  EXPECT_EQ(PTO_ERROR_NOT_READY, ptoStreamQuery(explicit_default));
  latch.open();
  EXPECT_PTO_OK(ptoStreamSynchronize(nullptr));
  EXPECT_EQ(1, ran);
}

TEST(RuntimeStream, DeviceSynchronizeWaitsForEveryStreamOfTheDevice) {
  Stream first, second;
  Latch latch;
  int ran = 0;
  ASSERT_PTO_OK(ptoLaunchHostFunc(first.get(), &waitOnLatch, &latch));
  EXPECT_PTO_OK(ptoLaunchHostFunc(second.get(), &sleepHostFn<2>, nullptr));
  EXPECT_PTO_OK(ptoLaunchHostFunc(nullptr, &sleepHostFn<2>, nullptr));
  EXPECT_PTO_OK(ptoLaunchHostFunc(first.get(), &incrementHostFn, &ran));
  std::thread opener([&] {
    std::this_thread::sleep_for(3ms);
    latch.open();
  });
  EXPECT_PTO_OK(ptoDeviceSynchronize());
  EXPECT_EQ(1, ran);
  EXPECT_PTO_OK(ptoStreamQuery(first.get()));
  EXPECT_PTO_OK(ptoStreamQuery(second.get()));
  EXPECT_PTO_OK(ptoStreamQuery(nullptr));
  opener.join();
}

}  // namespace

// As a full CUDA launch queue: a host thread far ahead of the device waits for it,
// so queued commands cannot grow without bound.
TEST(RuntimeStream, LaunchWaitsWhenTheQueueIsFull) {
  Stream stream;
  Program add_one(accumulateProgram(1));
  DeviceBuffer counter(sizeof(float));
  const DeviceBuffer one(std::vector<float>{1.0f});
  ASSERT_PTO_OK(ptoMemset(counter.get(), 0, counter.bytes()));
  Latch latch;
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  std::atomic<int> launched{0};
  std::thread launcher([&] {
    for (int i = 0; i < 3000; ++i) {
      EXPECT_PTO_OK(launchWith(add_one.get(), stream.get(), {&counter, &one}));
      ++launched;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const int launched_while_blocked = launched;
  latch.open();
  launcher.join();
  EXPECT_LT(launched_while_blocked, 3000);
  EXPECT_GE(launched_while_blocked, 1000);
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(std::vector<float>(1, 3000), counter.floats()) << "every launch, waited for or not, ran once";
}
