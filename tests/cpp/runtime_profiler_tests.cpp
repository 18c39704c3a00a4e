// The profiler's activity record (ptoProfiler*), as the driver delivers it: a
// launch of a one-instruction program (an eager op) as a kernel named by its
// instruction, with its operands, bytes and FLOPs; a program of several
// instructions as one program activity plus one per instruction inside it;
// copies and fills; each with its device, stream and times; nothing recorded
// while stopped; each runtime call that queued work, correlated with it; a
// subscriber beside start and flush.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "runtime/pto_runtime.h"
#include "runtime_test_support.h"

namespace {

using namespace pto_test;

std::vector<ptoActivity> flushAll() {
  std::vector<ptoActivity> all(64);
  size_t count = 0;
  EXPECT_PTO_OK(ptoProfilerFlush(all.data(), all.size(), &count));
  all.resize(count);
  return all;
}

// What the devices executed: every record but the runtime calls that queued it.
std::vector<ptoActivity> deviceActivities() {
  std::vector<ptoActivity> all = flushAll();
  std::erase_if(all, [](const ptoActivity& a) { return a.kind == PTO_ACTIVITY_LAUNCH; });
  return all;
}

const ptoActivity* find(const std::vector<ptoActivity>& activities, const std::string& name) {
  for (const ptoActivity& a : activities) {
    if (name == a.name) return &a;
  }
  return nullptr;
}

TEST(RuntimeProfiler, RecordsEagerProgramsCopiesAndFillsWithTheirStreamAndTimes) {
  Stream stream, other;
  Program abs("buffer %0 output 16\nbuffer %1 input 16\ntabs %0:f32[4;1]@0, %1:f32[4;1]@0\n");
  DeviceBuffer in(std::vector<float>{-1, 2, -3, 4}), out(16), device(256);
  DeviceBuffer filled(128);  // the other stream's: the streams are not ordered with each other
  std::vector<char> host(256);
  flushAll();
  ASSERT_PTO_OK(ptoProfilerStart());
  EXPECT_EQ(ptoProfilerEnabled(), 1);
  const uint64_t before = ptoProfilerNow();
  ASSERT_PTO_OK(launchWith(abs.get(), stream.get(), {&out, &in}));
  ASSERT_PTO_OK(ptoMemcpyAsync(device.get(), host.data(), 256, PTO_MEMCPY_HOST_TO_DEVICE, stream.get()));
  ASSERT_PTO_OK(ptoMemsetAsync(filled.get(), 0, 128, other.get()));
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  ASSERT_PTO_OK(ptoStreamSynchronize(other.get()));
  const uint64_t after = ptoProfilerNow();
  ASSERT_PTO_OK(ptoProfilerStop());
  EXPECT_EQ(ptoProfilerEnabled(), 0);
  ASSERT_PTO_OK(launchWith(abs.get(), stream.get(), {&out, &in}));  // stopped: not recorded
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));

  const std::vector<ptoActivity> activities = deviceActivities();
  ASSERT_EQ(activities.size(), 3u);
  for (const ptoActivity& a : activities) {
    EXPECT_GE(a.start_ns, before) << a.name;
    EXPECT_LE(a.start_ns, a.end_ns) << a.name;
    EXPECT_LE(a.end_ns, after) << a.name;
    EXPECT_EQ(a.device, 0) << a.name;
  }
  const ptoActivity* kernel = find(activities, "tabs");
  const ptoActivity* copy = find(activities, "memcpy host-to-device");
  const ptoActivity* fill = find(activities, "memset");
  ASSERT_TRUE(kernel && copy && fill);
  EXPECT_EQ(kernel->kind, PTO_ACTIVITY_INSTRUCTION);
  EXPECT_STREQ(kernel->detail, "f32[4] <- f32[4]");
  EXPECT_EQ(kernel->bytes, 32u);  // read and written
  EXPECT_EQ(kernel->flops, 4.0);
  EXPECT_EQ(copy->kind, PTO_ACTIVITY_COPY);
  EXPECT_EQ(copy->bytes, 512u);  // read and written
  EXPECT_EQ(copy->stream, kernel->stream);
  EXPECT_LE(kernel->end_ns, copy->start_ns) << "one stream runs one thing at a time, in order";
  EXPECT_EQ(fill->kind, PTO_ACTIVITY_FILL);
  EXPECT_EQ(fill->bytes, 128u);
  EXPECT_NE(fill->stream, kernel->stream);
  EXPECT_EQ(out.floats(), (std::vector<float>{1, 2, 3, 4}));
}

TEST(RuntimeProfiler, RecordsAProgramOfSeveralInstructionsAndEachInstructionInsideIt) {
  Stream stream;
  Program program(
      "buffer %0 input 16\nbuffer %1 output 16\nbuffer %2 temp 16\n"
      "tneg %2:f32[4;1]@0, %0:f32[4;1]@0\n"
      "texp %1:f32[4;1]@0, %2:f32[4;1]@0\n");
  size_t workspace_bytes = 0;
  ASSERT_PTO_OK(ptoProgramGetWorkspaceSize(program.get(), &workspace_bytes));
  DeviceBuffer in(std::vector<float>{0, 0, 0, 0}), out(16), workspace(workspace_bytes);
  void* buffers[] = {in.get(), out.get(), nullptr};
  const uint64_t bytes[] = {16, 16, 0};
  flushAll();
  ASSERT_PTO_OK(ptoProfilerStart());
  ASSERT_PTO_OK(ptoProgramLaunch(program.get(), stream.get(), buffers, bytes, 3, workspace.get()));
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  ASSERT_PTO_OK(ptoProfilerStop());

  const std::vector<ptoActivity> activities = deviceActivities();
  ASSERT_EQ(activities.size(), 3u);
  const ptoActivity* launch = find(activities, "program");
  const ptoActivity* neg = find(activities, "tneg");
  const ptoActivity* exp = find(activities, "texp");
  ASSERT_TRUE(launch && neg && exp);
  EXPECT_EQ(launch->kind, PTO_ACTIVITY_PROGRAM);
  EXPECT_STREQ(launch->detail, "2 instructions in 2 stages");
  for (const ptoActivity* inside : {neg, exp}) {
    EXPECT_EQ(inside->kind, PTO_ACTIVITY_STAGE) << inside->name;
    EXPECT_STREQ(inside->detail, "f32[4] <- f32[4]") << inside->name;
    EXPECT_EQ(inside->bytes, 32u) << inside->name;
    EXPECT_EQ(inside->flops, 4.0) << inside->name;
    EXPECT_EQ(inside->device, launch->device) << inside->name;
    EXPECT_EQ(inside->stream, launch->stream) << inside->name;
    EXPECT_GE(inside->start_ns, launch->start_ns) << inside->name;
    EXPECT_LE(inside->start_ns, inside->end_ns) << inside->name;
    EXPECT_LE(inside->end_ns, launch->end_ns) << inside->name;
  }
  EXPECT_LE(neg->end_ns, exp->start_ns) << "the instructions run in program order";
  EXPECT_EQ(out.floats(), std::vector<float>(4, 1.0f));
}

// A launch on device 1 is recorded as device 1's.
TEST(RuntimeProfiler, RecordsTheDeviceThatRanTheLaunch) {
  if (deviceCount() < 2) GTEST_SKIP() << "needs two devices";
  ScopedDevice device1(1);
  Stream stream;
  Program fill(fillProgram(4, 1));
  DeviceBuffer out(16);
  flushAll();
  ASSERT_PTO_OK(ptoProfilerStart());
  ASSERT_PTO_OK(launchWith(fill.get(), stream.get(), {&out}));
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  ASSERT_PTO_OK(ptoProfilerStop());
  const std::vector<ptoActivity> activities = deviceActivities();
  ASSERT_EQ(activities.size(), 1u);
  EXPECT_STREQ(activities[0].name, "texpands");
  EXPECT_EQ(activities[0].kind, PTO_ACTIVITY_INSTRUCTION);
  EXPECT_EQ(activities[0].device, 1);
}

// As CUPTI's runtime API records: each call that queued work is recorded on the
// calling thread with the caller's innermost external id, and shares a
// correlation id with the activity of the work it queued.
TEST(RuntimeProfiler, RecordsEachLaunchCallWithTheCallersIdAndTheCorrelationOfItsWork) {
  Stream stream;
  Program abs("buffer %0 output 16\nbuffer %1 input 16\ntabs %0:f32[4;1]@0, %1:f32[4;1]@0\n");
  DeviceBuffer in(std::vector<float>{-1, 2, -3, 4}), out(16), device(64);
  std::vector<char> host(64);
  flushAll();
  ASSERT_PTO_OK(ptoProfilerStart());
  ASSERT_PTO_OK(ptoProfilerPushExternalId(7));
  ASSERT_PTO_OK(ptoProfilerPushExternalId(42));
  ASSERT_PTO_OK(launchWith(abs.get(), stream.get(), {&out, &in}));
  ASSERT_PTO_OK(ptoMemcpyAsync(device.get(), host.data(), 64, PTO_MEMCPY_HOST_TO_DEVICE, stream.get()));
  ASSERT_PTO_OK(ptoProfilerPopExternalId());
  ASSERT_PTO_OK(ptoMemsetAsync(device.get(), 0, 64, stream.get()));
  ASSERT_PTO_OK(ptoProfilerPopExternalId());
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  ASSERT_PTO_OK(ptoProfilerStop());

  const std::vector<ptoActivity> activities = flushAll();
  ASSERT_EQ(activities.size(), 6u);
  const std::pair<const char*, const char*> launched[] = {
      {"ptoProgramLaunch", "tabs"}, {"ptoMemcpyAsync", "memcpy host-to-device"}, {"ptoMemsetAsync", "memset"}};
  const uint64_t external_ids[] = {42, 42, 7};
  for (size_t i = 0; i < 3; ++i) {
    const ptoActivity* call = find(activities, launched[i].first);
    const ptoActivity* work = find(activities, launched[i].second);
    ASSERT_TRUE(call && work) << launched[i].first;
    EXPECT_EQ(call->kind, PTO_ACTIVITY_LAUNCH);
    EXPECT_EQ(call->external_id, external_ids[i]) << call->name;
    EXPECT_EQ(call->thread_id, static_cast<uint64_t>(gettid())) << call->name;
    EXPECT_LE(call->start_ns, call->end_ns) << call->name;
    EXPECT_LE(call->start_ns, work->start_ns) << call->name;
    EXPECT_NE(call->correlation_id, 0u) << call->name;
    EXPECT_EQ(work->correlation_id, call->correlation_id) << work->name;
  }
  EXPECT_EQ(ptoProfilerPopExternalId(), PTO_ERROR_INVALID_VALUE) << "every pushed id was popped";
}

void collect(const ptoActivity* activity, void* into) {
  static_cast<std::vector<ptoActivity>*>(into)->push_back(*activity);
}

// A subscriber (torch.profiler) sees the records whether or not start/flush's
// consumer (pypto.Profiler) runs, and takes nothing from it.
TEST(RuntimeProfiler, ASubscriberReceivesEveryRecordBesideStartAndFlush) {
  Stream stream;
  Program fill(fillProgram(4, 1));
  DeviceBuffer out(16);
  std::vector<ptoActivity> received;
  flushAll();
  ASSERT_PTO_OK(ptoProfilerSubscribe(&collect, &received));
  EXPECT_EQ(ptoProfilerEnabled(), 1);
  ASSERT_PTO_OK(launchWith(fill.get(), stream.get(), {&out}));
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_TRUE(flushAll().empty()) << "not started: nothing kept for flush";
  ASSERT_PTO_OK(ptoProfilerStart());
  ASSERT_PTO_OK(launchWith(fill.get(), stream.get(), {&out}));
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  ASSERT_PTO_OK(ptoProfilerStop());
  ASSERT_PTO_OK(ptoProfilerUnsubscribe(&collect, &received));
  EXPECT_EQ(ptoProfilerEnabled(), 0);
  ASSERT_PTO_OK(launchWith(fill.get(), stream.get(), {&out}));  // neither: not recorded
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));

  EXPECT_EQ(deviceActivities().size(), 1u);
  ASSERT_EQ(received.size(), 4u);  // two launches, each a call and a kernel
  EXPECT_EQ(std::count_if(received.begin(), received.end(), [](const ptoActivity& a) {
              return a.kind == PTO_ACTIVITY_INSTRUCTION && std::string(a.name) == "texpands";
            }),
            2);
  EXPECT_EQ(ptoProfilerUnsubscribe(&collect, &received), PTO_ERROR_INVALID_VALUE);
  EXPECT_EQ(ptoProfilerSubscribe(nullptr, nullptr), PTO_ERROR_INVALID_VALUE);
}

TEST(RuntimeProfiler, FlushRejectsNullArguments) {
  size_t count = 0;
  EXPECT_EQ(ptoProfilerFlush(nullptr, 1, &count), PTO_ERROR_INVALID_VALUE);
  ptoActivity one{};
  EXPECT_EQ(ptoProfilerFlush(&one, 1, nullptr), PTO_ERROR_INVALID_VALUE);
}

}  // namespace
