// Events of the PTO runtime: cross-stream and cross-device dependencies,
// query and synchronize, elapsed time, and handle lifetime.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>

#include "runtime/pto_runtime.h"
#include "runtime_test_support.h"

namespace {

using namespace pto_test;
using namespace std::chrono_literals;

// An owned event.
class Event {
 public:
  Event() { EXPECT_PTO_OK(ptoEventCreate(&event_)); }
  ~Event() { ptoEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ptoEvent get() const { return event_; }
  ptoEvent release() { return std::exchange(event_, nullptr); }

 private:
  ptoEvent event_ = nullptr;
};

// The producer sets the flag; the consumer records what it saw.
struct Handoff {
  std::atomic<bool> produced{false};
  std::atomic<int> consumer_saw{-1};  // -1: consumer has not run
};

const char* produce(void* data) {
  std::this_thread::sleep_for(3ms);
  static_cast<Handoff*>(data)->produced.store(true);
  return nullptr;
}

const char* consume(void* data) {
  auto* handoff = static_cast<Handoff*>(data);
  handoff->consumer_saw.store(handoff->produced.load() ? 1 : 0);
  return nullptr;
}

// --- Dependencies ---------------------------------------------------------

TEST(RuntimeEvent, StreamWaitEventOrdersWorkAcrossStreams) {
  Stream producer, consumer;
  Event ready;
  Handoff handoff;
  Latch latch;
  ASSERT_PTO_OK(ptoLaunchHostFunc(producer.get(), &waitOnLatch, &latch));
  EXPECT_PTO_OK(ptoLaunchHostFunc(producer.get(), &produce, &handoff));
  EXPECT_PTO_OK(ptoEventRecord(ready.get(), producer.get()));
  EXPECT_PTO_OK(ptoStreamWaitEvent(consumer.get(), ready.get()));
  EXPECT_PTO_OK(ptoLaunchHostFunc(consumer.get(), &consume, &handoff));

  // The wait is queued, not done on the host: the consumer is blocked, not the caller.
  std::this_thread::sleep_for(2ms);
  EXPECT_EQ(PTO_ERROR_NOT_READY, ptoStreamQuery(consumer.get()));
  EXPECT_EQ(-1, handoff.consumer_saw.load());

  latch.open();
  ASSERT_PTO_OK(ptoStreamSynchronize(consumer.get()));
  EXPECT_EQ(1, handoff.consumer_saw.load()) << "the consumer ran before the producer finished";
  EXPECT_PTO_OK(ptoStreamSynchronize(producer.get()));
}

TEST(RuntimeEvent, EventDependencyPublishesPlainMemory) {
  // No atomics: the record/wait pair alone must order the write before the read
  // (ThreadSanitizer checks this one).
  Stream producer, consumer;
  Event ready;
  int value = 0, seen = 0;
  struct Pair {
    int* value;
    int* seen;
  } pair{&value, &seen};
  ASSERT_PTO_OK(ptoLaunchHostFunc(producer.get(), &sleepHostFn<3>, nullptr));
  ASSERT_PTO_OK(ptoLaunchHostFunc(
      producer.get(), [](void* p) -> const char* {
        *static_cast<Pair*>(p)->value = 42;
        return nullptr;
      }, &pair));
  ASSERT_PTO_OK(ptoEventRecord(ready.get(), producer.get()));
  ASSERT_PTO_OK(ptoStreamWaitEvent(consumer.get(), ready.get()));
  ASSERT_PTO_OK(ptoLaunchHostFunc(
      consumer.get(),
      [](void* p) -> const char* {
        *static_cast<Pair*>(p)->seen = *static_cast<Pair*>(p)->value;
        return nullptr;
      }, &pair));
  ASSERT_PTO_OK(ptoStreamSynchronize(consumer.get()));
  EXPECT_EQ(42, seen);
  ASSERT_PTO_OK(ptoStreamSynchronize(producer.get()));
}

TEST(RuntimeEvent, WaitOnANeverRecordedEventIsANoOp) {
  Stream stream;
  Event never_recorded;
  int ran = 0;
  ASSERT_PTO_OK(ptoStreamWaitEvent(stream.get(), never_recorded.get()));
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &incrementHostFn, &ran));
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(1, ran);
}

TEST(RuntimeEvent, WaitUsesTheRecordCurrentAtTheWaitCall) {
  // Re-recording the event later must not make an earlier wait wait longer.
  Stream producer, consumer;
  Event event;
  Latch second_gate;
  int ran = 0;
  ASSERT_PTO_OK(ptoEventRecord(event.get(), producer.get()));
  EXPECT_PTO_OK(ptoStreamWaitEvent(consumer.get(), event.get()));
  EXPECT_PTO_OK(ptoLaunchHostFunc(consumer.get(), &incrementHostFn, &ran));
  EXPECT_PTO_OK(ptoLaunchHostFunc(producer.get(), &waitOnLatch, &second_gate));
  EXPECT_PTO_OK(ptoEventRecord(event.get(), producer.get()));  // a second, pending record

  EXPECT_PTO_OK(ptoStreamSynchronize(consumer.get()));
  EXPECT_EQ(1, ran);
  second_gate.open();
  EXPECT_PTO_OK(ptoStreamSynchronize(producer.get()));
}

TEST(RuntimeEvent, CrossDeviceWait) {
  if (deviceCount() < 2) GTEST_SKIP() << "needs two devices";

  Stream on0;  // current device is 0
  ptoStream on1 = nullptr;
  ASSERT_PTO_OK(createStreamOnDevice(1, &on1));
  int32_t device = -1;
  ASSERT_PTO_OK(ptoStreamGetDevice(on1, &device));
  ASSERT_EQ(1, device);

  Event ready;
  Handoff handoff;
  Latch latch;
  EXPECT_PTO_OK(ptoLaunchHostFunc(on0.get(), &waitOnLatch, &latch));
  EXPECT_PTO_OK(ptoLaunchHostFunc(on0.get(), &produce, &handoff));
  EXPECT_PTO_OK(ptoEventRecord(ready.get(), on0.get()));
  EXPECT_PTO_OK(ptoStreamWaitEvent(on1, ready.get()));
  EXPECT_PTO_OK(ptoLaunchHostFunc(on1, &consume, &handoff));
  EXPECT_EQ(PTO_ERROR_NOT_READY, ptoStreamQuery(on1));
  latch.open();
  EXPECT_PTO_OK(ptoStreamSynchronize(on1));
  EXPECT_EQ(1, handoff.consumer_saw.load());
  EXPECT_PTO_OK(ptoStreamDestroy(on1));
}

TEST(RuntimeEvent, DestroyingAnEventWhileAStreamWaitsOnItIsSafe) {
  Stream producer, consumer;
  Event event;
  Handoff handoff;
  Latch latch;
  ASSERT_PTO_OK(ptoLaunchHostFunc(producer.get(), &waitOnLatch, &latch));
  EXPECT_PTO_OK(ptoLaunchHostFunc(producer.get(), &produce, &handoff));
  EXPECT_PTO_OK(ptoEventRecord(event.get(), producer.get()));
  EXPECT_PTO_OK(ptoStreamWaitEvent(consumer.get(), event.get()));
  EXPECT_PTO_OK(ptoLaunchHostFunc(consumer.get(), &consume, &handoff));

  EXPECT_PTO_OK(ptoEventDestroy(event.release()));  // record and wait are both still pending
  latch.open();
  EXPECT_PTO_OK(ptoStreamSynchronize(consumer.get()));
  EXPECT_EQ(1, handoff.consumer_saw.load()) << "the wait must still be honoured";
  EXPECT_PTO_OK(ptoStreamSynchronize(producer.get()));
}

TEST(RuntimeEvent, RecordAndWaitOnTheDefaultStream) {
  Stream other;
  Event event;
  Handoff handoff;
  ASSERT_PTO_OK(ptoLaunchHostFunc(nullptr, &produce, &handoff));
  ASSERT_PTO_OK(ptoEventRecord(event.get(), nullptr));
  ASSERT_PTO_OK(ptoStreamWaitEvent(other.get(), event.get()));
  ASSERT_PTO_OK(ptoLaunchHostFunc(other.get(), &consume, &handoff));
  ASSERT_PTO_OK(ptoStreamSynchronize(other.get()));
  EXPECT_EQ(1, handoff.consumer_saw.load());
  EXPECT_PTO_OK(ptoStreamSynchronize(nullptr));
}

// --- Query and synchronize ------------------------------------------------

TEST(RuntimeEvent, QueryOfANeverRecordedEventSucceeds) {
  Event event;
  EXPECT_PTO_OK(ptoEventQuery(event.get()));
  EXPECT_PTO_OK(ptoEventSynchronize(event.get()));
}

TEST(RuntimeEvent, QueryIsNotReadyUntilTheRecordCompletes) {
  Stream stream;
  Event event;
  Latch latch;
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  EXPECT_PTO_OK(ptoEventRecord(event.get(), stream.get()));
  EXPECT_EQ(PTO_ERROR_NOT_READY, ptoEventQuery(event.get()));
  latch.open();
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_PTO_OK(ptoEventQuery(event.get()));
}

TEST(RuntimeEvent, ReRecordingMakesACompletedEventPendingAgain) {
  Stream stream;
  Event event;
  ASSERT_PTO_OK(ptoEventRecord(event.get(), stream.get()));
  ASSERT_PTO_OK(ptoEventSynchronize(event.get()));
  EXPECT_PTO_OK(ptoEventQuery(event.get()));

  Latch latch;
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  EXPECT_PTO_OK(ptoEventRecord(event.get(), stream.get()));
  EXPECT_EQ(PTO_ERROR_NOT_READY, ptoEventQuery(event.get()));
  latch.open();
  EXPECT_PTO_OK(ptoEventSynchronize(event.get()));
  EXPECT_PTO_OK(ptoEventQuery(event.get()));
}

TEST(RuntimeEvent, EventSynchronizeWaitsForTheRecordedWork) {
  Stream stream;
  Event event;
  Handoff handoff;
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &produce, &handoff));  // sleeps, then sets
  ASSERT_PTO_OK(ptoEventRecord(event.get(), stream.get()));
  ASSERT_PTO_OK(ptoEventSynchronize(event.get()));
  EXPECT_TRUE(handoff.produced.load());
  EXPECT_PTO_OK(ptoEventQuery(event.get()));
}

TEST(RuntimeEvent, EventSynchronizeDoesNotWaitForLaterWork) {
  Stream stream;
  Event event;
  Latch latch;
  ASSERT_PTO_OK(ptoEventRecord(event.get(), stream.get()));
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  EXPECT_PTO_OK(ptoEventSynchronize(event.get()));  // would hang if it waited for the latch
  EXPECT_EQ(PTO_ERROR_NOT_READY, ptoStreamQuery(stream.get()));
  latch.open();
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
}

// --- Elapsed time ---------------------------------------------------------

TEST(RuntimeEvent, ElapsedTimeIsNonNegativeAndMonotonic) {
  Stream stream;
  Event a, b, c;
  ASSERT_PTO_OK(ptoEventRecord(a.get(), stream.get()));
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &sleepHostFn<3>, nullptr));
  ASSERT_PTO_OK(ptoEventRecord(b.get(), stream.get()));
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &sleepHostFn<3>, nullptr));
  ASSERT_PTO_OK(ptoEventRecord(c.get(), stream.get()));
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));

  float ab = -1, ac = -1, bc = -1, aa = -1;
  ASSERT_PTO_OK(ptoEventElapsedTime(&ab, a.get(), b.get()));
  ASSERT_PTO_OK(ptoEventElapsedTime(&ac, a.get(), c.get()));
  ASSERT_PTO_OK(ptoEventElapsedTime(&bc, b.get(), c.get()));
  ASSERT_PTO_OK(ptoEventElapsedTime(&aa, a.get(), a.get()));
  EXPECT_EQ(0.0f, aa);
  EXPECT_GE(ab, 2.5f) << "a 3 ms sleep lies between a and b";
  EXPECT_GE(bc, 2.5f);
  EXPECT_LE(ab, ac);
  EXPECT_LE(bc, ac);
}

TEST(RuntimeEvent, ElapsedTimeOfANeverRecordedEventIsAnError) {
  Stream stream;
  Event recorded, never_recorded;
  ASSERT_PTO_OK(ptoEventRecord(recorded.get(), stream.get()));
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  float ms = -1;
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE,
            ptoEventElapsedTime(&ms, recorded.get(), never_recorded.get()));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "recorded")) << ptoGetRecentErrMsg();
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE,
            ptoEventElapsedTime(&ms, never_recorded.get(), recorded.get()));
  EXPECT_EQ(-1.0f, ms);
}

TEST(RuntimeEvent, ElapsedTimeIsNotReadyWhileARecordIsPending) {
  Stream stream;
  Event start, end;
  Latch latch;
  ASSERT_PTO_OK(ptoEventRecord(start.get(), stream.get()));
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  EXPECT_PTO_OK(ptoEventRecord(end.get(), stream.get()));
  float ms = -1;
  EXPECT_EQ(PTO_ERROR_NOT_READY, ptoEventElapsedTime(&ms, start.get(), end.get()));
  latch.open();
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_PTO_OK(ptoEventElapsedTime(&ms, start.get(), end.get()));
  EXPECT_GE(ms, 0.0f);
}

TEST(RuntimeEvent, ElapsedTimeRejectsNullArguments) {
  Event event;
  float ms = 0;
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoEventElapsedTime(nullptr, event.get(), event.get()));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoEventElapsedTime(&ms, nullptr, event.get()));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoEventElapsedTime(&ms, event.get(), nullptr));
}

// --- Handles --------------------------------------------------------------

TEST(RuntimeEvent, DestroyedEventHandleIsInvalid) {
  ptoEvent event = nullptr;
  ASSERT_PTO_OK(ptoEventCreate(&event));
  ASSERT_PTO_OK(ptoEventDestroy(event));
  float ms = 0;
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoEventQuery(event));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "not a live event")) << ptoGetRecentErrMsg();
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoEventSynchronize(event));
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoEventRecord(event, nullptr));
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoStreamWaitEvent(nullptr, event));
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoEventElapsedTime(&ms, event, event));
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoEventDestroy(event));
}

TEST(RuntimeEvent, NullEventIsRejectedAndDestroyOfNullIsANoOp) {
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoEventCreate(nullptr));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoEventQuery(nullptr));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoEventSynchronize(nullptr));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoEventRecord(nullptr, nullptr));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoStreamWaitEvent(nullptr, nullptr));
  EXPECT_PTO_OK(ptoEventDestroy(nullptr));
}

TEST(RuntimeEvent, RecordOnADestroyedStreamIsInvalid) {
  ptoStream stream = nullptr;
  ASSERT_PTO_OK(ptoStreamCreate(&stream));
  ASSERT_PTO_OK(ptoStreamDestroy(stream));
  Event event;
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoEventRecord(event.get(), stream));
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoStreamWaitEvent(stream, event.get()));
  EXPECT_PTO_OK(ptoEventQuery(event.get())) << "a rejected record must not leave it pending";
}

}  // namespace
