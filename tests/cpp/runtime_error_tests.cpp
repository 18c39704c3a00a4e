// Asynchronous errors of the PTO runtime: a program failing as it runs, or a
// throwing host function, makes its stream's error sticky; the next
// synchronize/query of that stream (or of its device) reports it, naming the
// failing op, and clears it.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/pto_runtime.h"
#include "runtime_test_support.h"

namespace {

using namespace pto_test;
using namespace std::chrono_literals;

// A one-instruction program that fails when it runs: a tgather from a
// 5-element input whose index buffer holds `bad_index`. The runtime cannot see
// index values, so the launch is accepted; the device fails it with "index
// <bad_index> is out of bounds for dimension 0 with size 5". Loaded, and its
// buffers allocated, on the device current at construction.
class FailingGather {
 public:
  explicit FailingGather(int64_t bad_index = 9)
      : program_("buffer %0 output 12\nbuffer %1 input 20\nbuffer %2 input 24\n"
                 "tgather %0:f32[3;1]@0, %1:f32[5;1]@0, %2:i64[3;1]@0 axis=0 wrap=0\n"),
        in_(std::vector<float>{10, 11, 12, 13, 14}),
        out_(12),
        index_(24) {
    const std::array<int64_t, 3> index = {4, bad_index, 0};
    EXPECT_PTO_OK(ptoMemcpy(index_.get(), index.data(), sizeof index, PTO_MEMCPY_HOST_TO_DEVICE));
  }

  ptoError launch(ptoStream stream) const { return launchWith(program_.get(), stream, {&out_, &in_, &index_}); }

 private:
  Program program_;
  DeviceBuffer in_, out_, index_;
};

// What the failing gather's report says, past the stream and device.
constexpr const char* kGatherFailure = "tgather failed on pto:";
std::string outOfBounds(int64_t index) {
  return "index " + std::to_string(index) + " is out of bounds for dimension 0 with size 5";
}

const char* throwingHostFn(void*) { throw std::logic_error("host function exploded"); }

const char* throwingNonStdHostFn(void*) { throw 42; }

// A host function that fails the way the pccl backend's transfers do: by returning why.
const char* failingHostFn(void*) { return "rank 1 did not arrive within 5.0 s"; }

// Waits until everything queued on `stream` so far has run, without
// synchronizing the stream (which would report and clear its sticky error): an
// event reports the failure too, but leaves it on the stream.
void waitUntilRun(ptoStream stream) {
  ptoEvent done = nullptr;
  EXPECT_PTO_OK(ptoEventCreate(&done));
  EXPECT_PTO_OK(ptoEventRecord(done, stream));
  ptoEventSynchronize(done);
  EXPECT_PTO_OK(ptoEventDestroy(done));
}

// Polls ptoStreamQuery until the stream is idle; returns that first non-NOT_READY answer.
ptoError queryUntilIdle(ptoStream stream) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  ptoError status = ptoStreamQuery(stream);
  while (status == PTO_ERROR_NOT_READY && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
    status = ptoStreamQuery(stream);
  }
  return status;
}

// --- Sticky program errors ------------------------------------------------

TEST(RuntimeError, FailingProgramLaunchStillReturnsSuccess) {
  Stream stream;
  const FailingGather gather;
  EXPECT_PTO_OK(gather.launch(stream.get()));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
}

TEST(RuntimeError, SynchronizeReportsAFailureNamingTheInstructionDeviceAndCause) {
  Stream stream;
  const FailingGather gather;
  ASSERT_PTO_OK(gather.launch(stream.get()));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  EXPECT_EQ("asynchronous tgather failed on pto:0: PTO_ERROR_LAUNCH_FAILED: " + outOfBounds(9),
            std::string(ptoGetRecentErrMsg()));
}

// A program of several instructions is named "program", and the instruction
// that failed by its index and mnemonic.
TEST(RuntimeError, AFailingInstructionInsideAProgramIsNamedByIndexAndMnemonic) {
  Stream stream;
  Program program(
      "buffer %0 input 20\nbuffer %1 input 16\nbuffer %2 output 8\nbuffer %3 temp 20\n"
      "tneg %3:f32[5;1]@0, %0:f32[5;1]@0\n"
      "tgather %2:f32[2;1]@0, %3:f32[5;1]@0, %1:i64[2;1]@0 axis=0 wrap=0\n");
  size_t workspace_bytes = 0;
  ASSERT_PTO_OK(ptoProgramGetWorkspaceSize(program.get(), &workspace_bytes));
  DeviceBuffer in(std::vector<float>(5, 1.0f)), index(16), out(8), workspace(workspace_bytes);
  const std::array<int64_t, 2> bad = {0, 5};
  ASSERT_PTO_OK(ptoMemcpy(index.get(), bad.data(), sizeof bad, PTO_MEMCPY_HOST_TO_DEVICE));
  void* buffers[] = {in.get(), index.get(), out.get(), nullptr};
  const uint64_t bytes[] = {20, 16, 8, 0};
  ASSERT_PTO_OK(ptoProgramLaunch(program.get(), stream.get(), buffers, bytes, 4, workspace.get()));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  EXPECT_EQ("asynchronous program failed on pto:0: PTO_ERROR_LAUNCH_FAILED: instruction 1 (tgather): " +
                outOfBounds(5),
            std::string(ptoGetRecentErrMsg()));
}

TEST(RuntimeError, ReportingClearsTheErrorAndTheStreamStaysUsable) {
  Stream stream;
  const FailingGather gather;
  ASSERT_PTO_OK(gather.launch(stream.get()));
  ASSERT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));

  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_PTO_OK(ptoStreamQuery(stream.get()));
  int ran = 0;
  Program fill(fillProgram(4, 3));
  DeviceBuffer out(16);
  EXPECT_PTO_OK(ptoLaunchHostFunc(stream.get(), &incrementHostFn, &ran));
  EXPECT_PTO_OK(launchWith(fill.get(), stream.get(), {&out}));
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(1, ran);
  EXPECT_EQ(std::vector<float>(4, 3), out.floats());
}

TEST(RuntimeError, QueryReportsTheStickyErrorOnce) {
  Stream stream;
  const FailingGather gather;
  ASSERT_PTO_OK(gather.launch(stream.get()));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, queryUntilIdle(stream.get()));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, kGatherFailure) && contains(message, outOfBounds(9))) << message;
  EXPECT_PTO_OK(ptoStreamQuery(stream.get()));
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
}

TEST(RuntimeError, QueryOfABusyStreamDoesNotConsumeTheError) {
  Stream stream;
  Latch latch;
  const FailingGather gather;
  ASSERT_PTO_OK(gather.launch(stream.get()));
  EXPECT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  EXPECT_EQ(PTO_ERROR_NOT_READY, ptoStreamQuery(stream.get()));
  latch.open();
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
}

TEST(RuntimeError, DeviceSynchronizeReportsAStreamsError) {
  Stream stream;
  const FailingGather gather;
  ASSERT_PTO_OK(gather.launch(stream.get()));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoDeviceSynchronize());
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, kGatherFailure) && contains(message, outOfBounds(9))) << message;
  EXPECT_PTO_OK(ptoDeviceSynchronize()) << "reported once, then cleared";
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
}

TEST(RuntimeError, DefaultStreamErrorIsReportedThere) {
  const FailingGather gather(-1);
  ASSERT_PTO_OK(gather.launch(nullptr));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(nullptr));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), outOfBounds(-1))) << ptoGetRecentErrMsg();
  EXPECT_PTO_OK(ptoStreamSynchronize(nullptr));
}

TEST(RuntimeError, ErrorOnAnotherDeviceIsNotReportedHere) {
  if (deviceCount() < 2) GTEST_SKIP() << "needs two devices";
  ptoStream on1 = nullptr;
  ASSERT_PTO_OK(ptoGetDefaultStream(1, &on1));
  std::optional<FailingGather> gather;
  {
    ScopedDevice device1(1);  // the program and its buffers live on device 1
    gather.emplace();
  }
  ASSERT_PTO_OK(gather->launch(on1));
  waitUntilRun(on1);

  EXPECT_PTO_OK(ptoDeviceSynchronize()) << "device 0 has no error";
  EXPECT_PTO_OK(ptoStreamSynchronize(nullptr));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(on1));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, "tgather failed on pto:1") && contains(message, outOfBounds(9))) << message;
}

// --- Exceptions -----------------------------------------------------------

// The kernels signal a failure by throwing, on whichever core ran the failing
// part: here one of many chunks of a large gather, spread over the device's
// cores. The exception reaches the stream, and the stream's worker survives it.
TEST(RuntimeError, AnInstructionFailingOnAnotherCoreIsCaughtAndReported) {
  constexpr int64_t kCount = 400000;
  Stream stream;
  Program gather("buffer %0 output 1600000\nbuffer %1 input 20\nbuffer %2 input 3200000\n"
                 "tgather %0:f32[400000;1]@0, %1:f32[5;1]@0, %2:i64[400000;1]@0 axis=0 wrap=0\n");
  std::vector<int64_t> index(kCount, 1);
  index[kCount - 3] = 77;  // in the last chunk, far from the calling thread's first one
  DeviceBuffer in(std::vector<float>{10, 11, 12, 13, 14}), out(kCount * 4), indices(kCount * 8);
  ASSERT_PTO_OK(ptoMemcpy(indices.get(), index.data(), kCount * 8, PTO_MEMCPY_HOST_TO_DEVICE));
  ASSERT_PTO_OK(launchWith(gather.get(), stream.get(), {&out, &in, &indices}));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, kGatherFailure) && contains(message, outOfBounds(77))) << message;
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));

  int ran = 0;
  EXPECT_PTO_OK(ptoLaunchHostFunc(stream.get(), &incrementHostFn, &ran));
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(1, ran) << "the worker must survive the exception";
}

TEST(RuntimeError, ThrowingHostFunctionIsCaughtAndReported) {
  Stream stream;
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &throwingHostFn, nullptr));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, "host function")) << message;
  EXPECT_TRUE(contains(message, "host function exploded")) << message;
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
}

TEST(RuntimeError, AHostFunctionReturningAMessageFailsItsStreamWithIt) {
  Stream stream;
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &failingHostFn, nullptr));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, "host function")) << message;
  EXPECT_TRUE(contains(message, "rank 1 did not arrive within 5.0 s")) << message;
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));  // reported once, then cleared
}

// Work that depends on failed work fails too: a stream that waits for an event
// recorded after a failure takes the failure on, with its message.
TEST(RuntimeError, AStreamWaitingForAFailedEventFailsWithTheSameMessage) {
  Stream producer;
  Stream consumer;
  ptoEvent done = nullptr;
  ASSERT_PTO_OK(ptoEventCreate(&done));
  ASSERT_PTO_OK(ptoLaunchHostFunc(producer.get(), &failingHostFn, nullptr));
  ASSERT_PTO_OK(ptoEventRecord(done, producer.get()));
  ASSERT_PTO_OK(ptoStreamWaitEvent(consumer.get(), done));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(consumer.get()));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, "rank 1 did not arrive within 5.0 s")) << message;
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(producer.get()));  // its own copy
  EXPECT_PTO_OK(ptoStreamSynchronize(consumer.get()));
  EXPECT_PTO_OK(ptoEventDestroy(done));
}

TEST(RuntimeError, HostFunctionThrowingANonStandardExceptionIsReported) {
  Stream stream;
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &throwingNonStdHostFn, nullptr));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, "host function")) << message;
  EXPECT_TRUE(contains(message, "unknown exception")) << message;
  int ran = 0;
  EXPECT_PTO_OK(ptoLaunchHostFunc(stream.get(), &incrementHostFn, &ran));
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(1, ran) << "the worker must survive the exception";
}

// --- Which failure is reported --------------------------------------------

TEST(RuntimeError, OnlyTheFirstOfTwoFailuresIsReported) {
  Stream stream;
  const FailingGather first(5), second(7);
  ASSERT_PTO_OK(first.launch(stream.get()));
  ASSERT_PTO_OK(second.launch(stream.get()));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, outOfBounds(5))) << message;
  EXPECT_FALSE(contains(message, "index 7")) << message;
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get())) << "the second failure is not reported later";
}

TEST(RuntimeError, WorkQueuedAfterAFailureStillRuns) {
  Stream stream;
  const FailingGather gather;
  Program fill(fillProgram(4, 2));
  DeviceBuffer out(16);
  int ran = 0;
  ASSERT_PTO_OK(gather.launch(stream.get()));
  ASSERT_PTO_OK(launchWith(fill.get(), stream.get(), {&out}));
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &incrementHostFn, &ran));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(1, ran);
  EXPECT_EQ(std::vector<float>(4, 2), out.floats());
}

TEST(RuntimeError, OtherStreamsAreUnaffected) {
  Stream failing, healthy;
  const FailingGather gather;
  ASSERT_PTO_OK(gather.launch(failing.get()));
  waitUntilRun(failing.get());  // the error is now sticky on `failing`

  int ran = 0;
  EXPECT_PTO_OK(ptoLaunchHostFunc(healthy.get(), &incrementHostFn, &ran));
  EXPECT_PTO_OK(ptoStreamSynchronize(healthy.get()));
  EXPECT_PTO_OK(ptoStreamQuery(healthy.get()));
  EXPECT_PTO_OK(ptoStreamSynchronize(nullptr));
  EXPECT_EQ(1, ran);
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(failing.get()));
}

TEST(RuntimeError, ErrorIsReportedToExactlyOneOfConcurrentSynchronizers) {
  Stream stream;
  Latch latch;
  const FailingGather gather;
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  EXPECT_PTO_OK(gather.launch(stream.get()));
  std::array<ptoError, 4> results{};
  std::vector<std::thread> waiters;
  for (size_t i = 0; i < results.size(); ++i) {
    waiters.emplace_back([&, i] { results[i] = ptoStreamSynchronize(stream.get()); });
  }
  std::this_thread::sleep_for(2ms);
  latch.open();
  for (auto& waiter : waiters) waiter.join();
  int failures = 0;
  for (ptoError result : results) {
    EXPECT_TRUE(result == PTO_SUCCESS || result == PTO_ERROR_LAUNCH_FAILED) << result;
    failures += result == PTO_ERROR_LAUNCH_FAILED;
  }
  EXPECT_EQ(1, failures);
}

TEST(RuntimeError, ErrorMessageGoesToTheReportingThread) {
  Stream stream;
  const FailingGather gather;
  ASSERT_PTO_OK(gather.launch(stream.get()));
  // A failure of this thread's own: its message must survive another thread's report.
  ASSERT_EQ(PTO_ERROR_INVALID_VALUE, ptoStreamCreate(nullptr));
  const std::string own_message = ptoGetRecentErrMsg();
  ASSERT_FALSE(own_message.empty());
  ptoError reported = PTO_SUCCESS;
  std::string reporter_message;
  std::thread reporter([&] {
    reported = ptoStreamSynchronize(stream.get());
    reporter_message = ptoGetRecentErrMsg();
  });
  reporter.join();
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, reported);
  EXPECT_TRUE(contains(reporter_message, outOfBounds(9))) << reporter_message;
  EXPECT_EQ(own_message, ptoGetRecentErrMsg());
}

// A later failure's report is its own: nothing of an earlier, reported one stays in it.
TEST(RuntimeError, ALaterFailureDoesNotReuseAnEarlierMessage) {
  Stream stream;
  const FailingGather gather(5);
  ASSERT_PTO_OK(gather.launch(stream.get()));
  ASSERT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &throwingHostFn, nullptr));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, "host function exploded")) << message;
  EXPECT_FALSE(contains(message, "tgather") || contains(message, "index 5")) << message;
}

}  // namespace

// --- Events after a failure ----------------------------------------------

TEST(RuntimeError, AnEventRecordedAfterAFailureReportsItAsTheStreamDoes) {
  Stream stream;
  const FailingGather gather;
  ptoEvent event = nullptr;
  ASSERT_PTO_OK(ptoEventCreate(&event));
  ASSERT_PTO_OK(gather.launch(stream.get()));
  ASSERT_PTO_OK(ptoEventRecord(event, stream.get()));

  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoEventSynchronize(event));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), kGatherFailure)) << ptoGetRecentErrMsg();
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoEventQuery(event));
  // The stream's own synchronization still reports (and clears) it.
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));

  ASSERT_PTO_OK(ptoEventRecord(event, stream.get()));
  EXPECT_PTO_OK(ptoEventSynchronize(event));
  EXPECT_PTO_OK(ptoEventQuery(event));
  EXPECT_PTO_OK(ptoEventDestroy(event));
}

TEST(RuntimeError, AnEventRecordedBeforeAFailureSucceeds) {
  Stream stream;
  const FailingGather gather;
  ptoEvent event = nullptr;
  ASSERT_PTO_OK(ptoEventCreate(&event));
  ASSERT_PTO_OK(ptoEventRecord(event, stream.get()));
  ASSERT_PTO_OK(gather.launch(stream.get()));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  EXPECT_PTO_OK(ptoEventSynchronize(event));
  EXPECT_PTO_OK(ptoEventDestroy(event));
}
