// Streams of the PTO runtime: in-order queues whose launches return at once,
// kernels with copied argument blocks, host functions, concurrent submission,
// handles and the default stream.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "runtime/pto_runtime.h"
#include "runtime_test_support.h"

namespace {

using namespace pto_test;
using namespace std::chrono_literals;

// Host function and kernel that append to a log the stream worker owns until synchronize.
struct LogEntry {
  std::vector<int>* log;
  int value;
};

void appendHostFn(void* data) {
  auto* entry = static_cast<LogEntry*>(data);
  entry->log->push_back(entry->value);
}

ptoError appendKernel(const void* args) {
  const auto* entry = static_cast<const LogEntry*>(args);
  entry->log->push_back(entry->value);
  return PTO_SUCCESS;
}

ptoError launchAppend(ptoStream stream, std::vector<int>* log, int value) {
  const LogEntry args{log, value};
  return ptoLaunchKernel(stream, "append", &appendKernel, &args, sizeof args);
}

// --- Ordering -------------------------------------------------------------

TEST(RuntimeStream, WorkOnOneStreamRunsInLaunchOrder) {
  Stream stream;
  std::vector<int> log;
  std::vector<LogEntry> host_entries(200);
  for (int i = 0; i < 400; ++i) {
    if (i % 2 == 0) {
      ASSERT_PTO_OK(launchAppend(stream.get(), &log, i));
    } else {
      host_entries[i / 2] = LogEntry{&log, i};
      ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &appendHostFn, &host_entries[i / 2]));
    }
  }
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));

  ASSERT_EQ(400u, log.size());
  for (int i = 0; i < 400; ++i) EXPECT_EQ(i, log[i]);
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

// A device buffer of ints the kernels below work on in place.
struct BufferArgs {
  int* data;
  int count;
};

ptoError addOneKernel(const void* raw) {
  const auto* args = static_cast<const BufferArgs*>(raw);
  for (int i = 0; i < args->count; ++i) args->data[i] += 1;
  return PTO_SUCCESS;
}

ptoError timesThreeKernel(const void* raw) {
  const auto* args = static_cast<const BufferArgs*>(raw);
  for (int i = 0; i < args->count; ++i) args->data[i] *= 3;
  return PTO_SUCCESS;
}

TEST(RuntimeStream, AsyncCopiesAndFillsAreOrderedWithKernels) {
  constexpr int kCount = 256;
  constexpr size_t kBytes = kCount * sizeof(int);
  Stream stream;
  void* device = nullptr;
  ASSERT_PTO_OK(ptoMalloc(&device, kBytes));
  const BufferArgs args{static_cast<int*>(device), kCount};
  std::vector<int> input(kCount, 5), after_fill(kCount, -1), after_add(kCount, -1),
      after_upload(kCount, -1);

  // Everything is queued behind the latch before any of it runs.
  Latch latch;
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  EXPECT_PTO_OK(ptoMemsetAsync(device, 0, kBytes, stream.get()));
  EXPECT_PTO_OK(ptoMemcpyAsync(after_fill.data(), device, kBytes, PTO_MEMCPY_DEVICE_TO_HOST,
                               stream.get()));
  EXPECT_PTO_OK(ptoLaunchKernel(stream.get(), "add_one", &addOneKernel, &args, sizeof args));
  EXPECT_PTO_OK(ptoMemcpyAsync(after_add.data(), device, kBytes, PTO_MEMCPY_DEVICE_TO_HOST,
                               stream.get()));
  EXPECT_PTO_OK(ptoMemcpyAsync(device, input.data(), kBytes, PTO_MEMCPY_HOST_TO_DEVICE,
                               stream.get()));
  EXPECT_PTO_OK(ptoLaunchKernel(stream.get(), "times_three", &timesThreeKernel, &args,
                                sizeof args));
  EXPECT_PTO_OK(ptoMemcpyAsync(after_upload.data(), device, kBytes, PTO_MEMCPY_DEVICE_TO_HOST,
                               stream.get()));
  EXPECT_EQ(-1, after_fill[0]) << "nothing may run before the latch opens";
  latch.open();
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));

  EXPECT_EQ(std::vector<int>(kCount, 0), after_fill);
  EXPECT_EQ(std::vector<int>(kCount, 1), after_add);
  EXPECT_EQ(std::vector<int>(kCount, 15), after_upload);
  EXPECT_PTO_OK(ptoFree(device));
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

TEST(RuntimeStream, ConcurrentLaunchesOntoOneStreamAllRunInPerThreadOrder) {
  constexpr int kThreads = 4;
  constexpr int kLaunchesPerThread = 250;
  Stream stream;
  std::vector<int> log;  // touched only by the stream's worker until synchronize

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kLaunchesPerThread; ++i) {
        EXPECT_PTO_OK(launchAppend(stream.get(), &log, t * kLaunchesPerThread + i));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));

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

// --- Kernel arguments -----------------------------------------------------

struct ValueArgs {
  int value;
  int* out;
};

ptoError storeValueKernel(const void* raw) {
  const auto* args = static_cast<const ValueArgs*>(raw);
  *args->out = args->value;
  return PTO_SUCCESS;
}

TEST(RuntimeStream, KernelArgumentsAreCopiedAtLaunch) {
  Stream stream;
  Latch latch;
  int out = 0;
  ValueArgs args{41, &out};
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  EXPECT_PTO_OK(ptoLaunchKernel(stream.get(), "store", &storeValueKernel, &args, sizeof args));
  args.value = 99;  // the kernel has not run yet, and must not see this
  latch.open();
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(41, out);
}

TEST(RuntimeStream, ArgumentBlockGoesOutOfScopeBeforeTheKernelRuns) {
  Stream stream;
  Latch latch;
  int out = 0;
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  {
    ValueArgs args{7, &out};
    EXPECT_PTO_OK(ptoLaunchKernel(stream.get(), "store", &storeValueKernel, &args, sizeof args));
  }
  latch.open();
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(7, out);
}

struct FullBlockCheck {
  std::array<uint8_t, PTO_MAX_KERNEL_ARG_BYTES - sizeof(bool*)> bytes;
  bool* intact;
};
static_assert(sizeof(FullBlockCheck) == PTO_MAX_KERNEL_ARG_BYTES);

ptoError checkFullBlockKernel(const void* raw) {
  const auto* args = static_cast<const FullBlockCheck*>(raw);
  bool intact = true;
  for (size_t i = 0; i < args->bytes.size(); ++i) {
    intact = intact && args->bytes[i] == static_cast<uint8_t>(i * 13 + 1);
  }
  *args->intact = intact;
  return PTO_SUCCESS;
}

TEST(RuntimeStream, ArgumentBlockOfTheMaximumSizeArrivesIntact) {
  Stream stream;
  bool intact = false;
  FullBlockCheck args{};
  for (size_t i = 0; i < args.bytes.size(); ++i) args.bytes[i] = static_cast<uint8_t>(i * 13 + 1);
  args.intact = &intact;
  ASSERT_PTO_OK(ptoLaunchKernel(stream.get(), "check_block", &checkFullBlockKernel, &args,
                                PTO_MAX_KERNEL_ARG_BYTES));
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_TRUE(intact);
}

TEST(RuntimeStream, ArgumentBlockOverTheLimitIsRejected) {
  Stream stream;
  std::array<uint8_t, PTO_MAX_KERNEL_ARG_BYTES + 1> args{};
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoLaunchKernel(stream.get(), "too_big", &noopKernel,
                                                     args.data(), args.size()));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, "too_big")) << message;
  EXPECT_TRUE(contains(message, std::to_string(PTO_MAX_KERNEL_ARG_BYTES))) << message;
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
}

TEST(RuntimeStream, LaunchWithoutArgumentsPassesNoBlock) {
  Stream stream;
  EXPECT_PTO_OK(ptoLaunchKernel(stream.get(), "noop", &noopKernel, nullptr, 0));
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
}

TEST(RuntimeStream, LaunchRejectsNullKernelNameOrArguments) {
  Stream stream;
  int args = 0;
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE,
            ptoLaunchKernel(stream.get(), "null_kernel", nullptr, &args, sizeof args));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE,
            ptoLaunchKernel(stream.get(), nullptr, &noopKernel, &args, sizeof args));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE,
            ptoLaunchKernel(stream.get(), "null_args", &noopKernel, nullptr, 8));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "args is null")) << ptoGetRecentErrMsg();
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
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoLaunchKernel(stream, "noop", &noopKernel, nullptr, 0));
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
  std::vector<int> log;
  for (int i = 0; i < 50; ++i) ASSERT_PTO_OK(launchAppend(nullptr, &log, i));
  ASSERT_PTO_OK(ptoStreamSynchronize(nullptr));
  EXPECT_PTO_OK(ptoStreamQuery(nullptr));
  ASSERT_EQ(50u, log.size());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(i, log[i]);
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
  Latch latch;
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  std::atomic<int> launched{0};
  std::thread launcher([&] {
    for (int i = 0; i < 3000; ++i) {
      EXPECT_PTO_OK(ptoLaunchKernel(stream.get(), "noop", &noopKernel, nullptr, 0));
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
}
