// The profiler's activity record (ptoProfiler*), as the driver delivers it: a
// launch of a one-instruction program (an eager op) as a kernel named by its
// instruction, with its operands, bytes and FLOPs; a program of several
// instructions as one program activity plus one per instruction inside it;
// copies and fills; each with its device, stream and times; nothing recorded
// while stopped.
#include <gtest/gtest.h>

#include <string>
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

  const std::vector<ptoActivity> activities = flushAll();
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
  EXPECT_EQ(kernel->kind, PTO_ACTIVITY_KERNEL);
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

  const std::vector<ptoActivity> activities = flushAll();
  ASSERT_EQ(activities.size(), 3u);
  const ptoActivity* launch = find(activities, "program");
  const ptoActivity* neg = find(activities, "tneg");
  const ptoActivity* exp = find(activities, "texp");
  ASSERT_TRUE(launch && neg && exp);
  EXPECT_EQ(launch->kind, PTO_ACTIVITY_PROGRAM);
  EXPECT_STREQ(launch->detail, "2 instructions in 2 stages");
  for (const ptoActivity* inside : {neg, exp}) {
    EXPECT_EQ(inside->kind, PTO_ACTIVITY_INSTRUCTION) << inside->name;
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
  const std::vector<ptoActivity> activities = flushAll();
  ASSERT_EQ(activities.size(), 1u);
  EXPECT_STREQ(activities[0].name, "texpands");
  EXPECT_EQ(activities[0].kind, PTO_ACTIVITY_KERNEL);
  EXPECT_EQ(activities[0].device, 1);
}

TEST(RuntimeProfiler, FlushRejectsNullArguments) {
  size_t count = 0;
  EXPECT_EQ(ptoProfilerFlush(nullptr, 1, &count), PTO_ERROR_INVALID_VALUE);
  ptoActivity one{};
  EXPECT_EQ(ptoProfilerFlush(&one, 1, nullptr), PTO_ERROR_INVALID_VALUE);
}

}  // namespace
