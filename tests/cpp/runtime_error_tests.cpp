// Asynchronous errors of the PTO runtime: a failing kernel or host function
// makes its stream's error sticky; the next synchronize/query of that stream
// (or of its device) reports it, naming the failing op, and clears it.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/pto_runtime.h"
#include "runtime_test_support.h"

namespace {

using namespace pto_test;
using namespace std::chrono_literals;

// Kernels. Their argument block, where they take one, is a message.
struct Message {
  const char* text;
};

ptoError boomKernel(const void*) { return ptoSetKernelError(PTO_ERROR_LAUNCH_FAILED, "boom"); }

ptoError failWithMessageKernel(const void* args) {
  return ptoSetKernelError(PTO_ERROR_LAUNCH_FAILED, static_cast<const Message*>(args)->text);
}

ptoError invalidValueKernel(const void*) {
  return ptoSetKernelError(PTO_ERROR_INVALID_VALUE, "bad operand");
}

ptoError silentFailureKernel(const void*) { return PTO_ERROR_LAUNCH_FAILED; }

ptoError throwingKernel(const void*) { throw std::runtime_error("kaboom from a kernel"); }

ptoError throwingNonStdKernel(const void*) { throw 42; }

void throwingHostFn(void*) { throw std::logic_error("host function exploded"); }

ptoError launchFailure(ptoStream stream, const char* name, const char* text) {
  const Message args{text};
  return ptoLaunchKernel(stream, name, &failWithMessageKernel, &args, sizeof args);
}

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

// --- Sticky kernel errors -------------------------------------------------

TEST(RuntimeError, FailingKernelLaunchStillReturnsSuccess) {
  Stream stream;
  EXPECT_PTO_OK(ptoLaunchKernel(stream.get(), "boom_kernel", &boomKernel, nullptr, 0));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
}

TEST(RuntimeError, SynchronizeReportsAKernelFailureNamingKernelAndMessage) {
  Stream stream;
  ASSERT_PTO_OK(ptoLaunchKernel(stream.get(), "boom_kernel", &boomKernel, nullptr, 0));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, "boom_kernel")) << message;
  EXPECT_TRUE(contains(message, "boom")) << message;
  EXPECT_TRUE(contains(message, "pto:0")) << message;
}

TEST(RuntimeError, ReportingClearsTheErrorAndTheStreamStaysUsable) {
  Stream stream;
  ASSERT_PTO_OK(ptoLaunchKernel(stream.get(), "boom_kernel", &boomKernel, nullptr, 0));
  ASSERT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));

  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_PTO_OK(ptoStreamQuery(stream.get()));
  int ran = 0;
  EXPECT_PTO_OK(ptoLaunchHostFunc(stream.get(), &incrementHostFn, &ran));
  EXPECT_PTO_OK(ptoLaunchKernel(stream.get(), "noop", &noopKernel, nullptr, 0));
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(1, ran);
}

TEST(RuntimeError, StickyErrorKeepsTheKernelsErrorCode) {
  Stream stream;
  ASSERT_PTO_OK(ptoLaunchKernel(stream.get(), "bad_operand", &invalidValueKernel, nullptr, 0));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoStreamSynchronize(stream.get()));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, "bad_operand")) << message;
  EXPECT_TRUE(contains(message, "bad operand")) << message;
}

TEST(RuntimeError, QueryReportsTheStickyErrorOnce) {
  Stream stream;
  ASSERT_PTO_OK(ptoLaunchKernel(stream.get(), "boom_kernel", &boomKernel, nullptr, 0));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, queryUntilIdle(stream.get()));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, "boom_kernel") && contains(message, "boom")) << message;
  EXPECT_PTO_OK(ptoStreamQuery(stream.get()));
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
}

TEST(RuntimeError, QueryOfABusyStreamDoesNotConsumeTheError) {
  Stream stream;
  Latch latch;
  ASSERT_PTO_OK(ptoLaunchKernel(stream.get(), "boom_kernel", &boomKernel, nullptr, 0));
  EXPECT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  EXPECT_EQ(PTO_ERROR_NOT_READY, ptoStreamQuery(stream.get()));
  latch.open();
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
}

TEST(RuntimeError, DeviceSynchronizeReportsAStreamsError) {
  Stream stream;
  ASSERT_PTO_OK(ptoLaunchKernel(stream.get(), "boom_kernel", &boomKernel, nullptr, 0));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoDeviceSynchronize());
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, "boom_kernel") && contains(message, "boom")) << message;
  EXPECT_PTO_OK(ptoDeviceSynchronize()) << "reported once, then cleared";
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
}

TEST(RuntimeError, DefaultStreamErrorIsReportedThere) {
  ASSERT_PTO_OK(ptoLaunchKernel(nullptr, "default_boom", &boomKernel, nullptr, 0));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(nullptr));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "default_boom")) << ptoGetRecentErrMsg();
  EXPECT_PTO_OK(ptoStreamSynchronize(nullptr));
}

TEST(RuntimeError, ErrorOnAnotherDeviceIsNotReportedHere) {
  if (deviceCount() < 2) GTEST_SKIP() << "needs two devices";
  ptoStream on1 = nullptr;
  ASSERT_PTO_OK(ptoGetDefaultStream(1, &on1));
  ASSERT_PTO_OK(ptoLaunchKernel(on1, "boom_on_1", &boomKernel, nullptr, 0));
  waitUntilRun(on1);

  EXPECT_PTO_OK(ptoDeviceSynchronize()) << "device 0 has no error";
  EXPECT_PTO_OK(ptoStreamSynchronize(nullptr));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(on1));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, "boom_on_1") && contains(message, "pto:1")) << message;
}

// --- Exceptions -----------------------------------------------------------

TEST(RuntimeError, ThrowingKernelIsCaughtAndReported) {
  Stream stream;
  ASSERT_PTO_OK(ptoLaunchKernel(stream.get(), "throwing_kernel", &throwingKernel, nullptr, 0));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, "throwing_kernel")) << message;
  EXPECT_TRUE(contains(message, "kaboom from a kernel")) << message;
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));

  int ran = 0;
  EXPECT_PTO_OK(ptoLaunchHostFunc(stream.get(), &incrementHostFn, &ran));
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(1, ran) << "the worker must survive the exception";
}

TEST(RuntimeError, KernelThrowingANonStandardExceptionIsReported) {
  Stream stream;
  ASSERT_PTO_OK(ptoLaunchKernel(stream.get(), "throws_int", &throwingNonStdKernel, nullptr, 0));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, "throws_int")) << message;
  EXPECT_TRUE(contains(message, "unknown exception")) << message;
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

// --- Which failure is reported --------------------------------------------

TEST(RuntimeError, OnlyTheFirstOfTwoFailuresIsReported) {
  Stream stream;
  ASSERT_PTO_OK(launchFailure(stream.get(), "first_kernel", "first failure"));
  ASSERT_PTO_OK(launchFailure(stream.get(), "second_kernel", "second failure"));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, "first_kernel") && contains(message, "first failure")) << message;
  EXPECT_FALSE(contains(message, "second")) << message;
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get())) << "the second failure is not reported later";
}

TEST(RuntimeError, WorkQueuedAfterAFailureStillRuns) {
  Stream stream;
  int ran = 0;
  ASSERT_PTO_OK(ptoLaunchKernel(stream.get(), "boom_kernel", &boomKernel, nullptr, 0));
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &incrementHostFn, &ran));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(1, ran);
}

TEST(RuntimeError, OtherStreamsAreUnaffected) {
  Stream failing, healthy;
  ASSERT_PTO_OK(ptoLaunchKernel(failing.get(), "boom_kernel", &boomKernel, nullptr, 0));
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
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  EXPECT_PTO_OK(ptoLaunchKernel(stream.get(), "boom_kernel", &boomKernel, nullptr, 0));
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
  ASSERT_PTO_OK(ptoLaunchKernel(stream.get(), "boom_kernel", &boomKernel, nullptr, 0));
  ptoSetKernelError(PTO_ERROR_INVALID_VALUE, "this thread's own message");
  ptoError reported = PTO_SUCCESS;
  std::string reporter_message;
  std::thread reporter([&] {
    reported = ptoStreamSynchronize(stream.get());
    reporter_message = ptoGetRecentErrMsg();
  });
  reporter.join();
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, reported);
  EXPECT_TRUE(contains(reporter_message, "boom")) << reporter_message;
  EXPECT_STREQ("this thread's own message", ptoGetRecentErrMsg());
}

TEST(RuntimeError, KernelFailingWithoutAMessageDoesNotReuseAnEarlierOne) {
  Stream stream;
  ASSERT_PTO_OK(launchFailure(stream.get(), "first_kernel", "stale detail"));
  ASSERT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  ASSERT_PTO_OK(ptoLaunchKernel(stream.get(), "silent_kernel", &silentFailureKernel, nullptr, 0));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_TRUE(contains(message, "silent_kernel")) << message;
  EXPECT_FALSE(contains(message, "stale detail")) << message;
}

TEST(RuntimeError, SetKernelErrorReturnsItsCodeAndSetsTheMessage) {
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoSetKernelError(PTO_ERROR_LAUNCH_FAILED, "direct"));
  EXPECT_STREQ("direct", ptoGetRecentErrMsg());
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoSetKernelError(PTO_ERROR_INVALID_VALUE, nullptr));
  EXPECT_STREQ("", ptoGetRecentErrMsg());
}

}  // namespace

// --- Events after a failure ----------------------------------------------

TEST(RuntimeError, AnEventRecordedAfterAFailureReportsItAsTheStreamDoes) {
  Stream stream;
  ptoEvent event = nullptr;
  ASSERT_PTO_OK(ptoEventCreate(&event));
  ASSERT_PTO_OK(ptoLaunchKernel(stream.get(), "boom_kernel", &boomKernel, nullptr, 0));
  ASSERT_PTO_OK(ptoEventRecord(event, stream.get()));

  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoEventSynchronize(event));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "boom_kernel")) << ptoGetRecentErrMsg();
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
  ptoEvent event = nullptr;
  ASSERT_PTO_OK(ptoEventCreate(&event));
  ASSERT_PTO_OK(ptoEventRecord(event, stream.get()));
  ASSERT_PTO_OK(ptoLaunchKernel(stream.get(), "boom_kernel", &boomKernel, nullptr, 0));
  EXPECT_EQ(PTO_ERROR_LAUNCH_FAILED, ptoStreamSynchronize(stream.get()));
  EXPECT_PTO_OK(ptoEventSynchronize(event));
  EXPECT_PTO_OK(ptoEventDestroy(event));
}
