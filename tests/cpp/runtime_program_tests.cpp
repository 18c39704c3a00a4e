// Programs of the PTO runtime (ptoProgram*): PTO-AS loaded once onto a device
// and launched any number of times on its streams; the workspace of a program's
// temporaries; what loading refuses (parse errors, programs the verifier
// rejects) and what a launch refuses (a bad handle, bindings that do not match
// the program, a stream of another device); a released program's queued
// launches still running.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/pto_runtime.h"
#include "runtime_test_support.h"

namespace {

using namespace pto_test;

// out = a + b over 4 float32 elements: buffers %0 (out), %1 (a), %2 (b).
constexpr const char* kAdd =
    "buffer %0 output 16\nbuffer %1 input 16\nbuffer %2 input 16\n"
    "tadd %0:f32[4;1]@0, %1:f32[4;1]@0, %2:f32[4;1]@0 alpha=1\n";

// --- Loading and launching ------------------------------------------------

TEST(RuntimeProgram, ALoadedProgramRunsOnDeviceBuffers) {
  Stream stream;
  Program add(kAdd);
  ASSERT_NE(nullptr, add.get());
  const DeviceBuffer a(std::vector<float>{1, 2, 3, 4}), b(std::vector<float>{10, 20, 30, 40});
  DeviceBuffer out(16);
  ASSERT_PTO_OK(launchWith(add.get(), stream.get(), {&out, &a, &b}));
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ((std::vector<float>{11, 22, 33, 44}), out.floats());
}

// A handle is loaded once and launched many times, on any stream of its device,
// each launch with its own buffers.
TEST(RuntimeProgram, OneHandleLaunchesWithOtherBuffersOnOtherStreams) {
  Stream first, second;
  Program add(kAdd);
  const DeviceBuffer a(std::vector<float>{1, 2, 3, 4}), b(std::vector<float>{10, 20, 30, 40});
  DeviceBuffer sum(16), twice_a(16), twice_b(16);
  ASSERT_PTO_OK(launchWith(add.get(), first.get(), {&sum, &a, &b}));
  ASSERT_PTO_OK(launchWith(add.get(), second.get(), {&twice_a, &a, &a}));
  ASSERT_PTO_OK(launchWith(add.get(), nullptr, {&twice_b, &b, &b}));
  ASSERT_PTO_OK(ptoStreamSynchronize(first.get()));
  ASSERT_PTO_OK(ptoStreamSynchronize(second.get()));
  ASSERT_PTO_OK(ptoStreamSynchronize(nullptr));
  EXPECT_EQ((std::vector<float>{11, 22, 33, 44}), sum.floats());
  EXPECT_EQ((std::vector<float>{2, 4, 6, 8}), twice_a.floats());
  EXPECT_EQ((std::vector<float>{20, 40, 60, 80}), twice_b.floats());
}

// PTO-AS loads with its temporaries one after another in the launch's
// workspace, each at a 64-byte boundary.
TEST(RuntimeProgram, TemporariesLiveInTheLaunchesWorkspace) {
  Stream stream;
  Program program(
      "buffer %0 input 16\nbuffer %1 output 16\nbuffer %2 temp 16\nbuffer %3 temp 16\n"
      "tneg %2:f32[4;1]@0, %0:f32[4;1]@0\n"
      "tadd %3:f32[4;1]@0, %2:f32[4;1]@0, %0:f32[4;1]@0 alpha=2\n"
      "tmul %1:f32[4;1]@0, %3:f32[4;1]@0, %0:f32[4;1]@0\n");
  size_t workspace_bytes = 0;
  ASSERT_PTO_OK(ptoProgramGetWorkspaceSize(program.get(), &workspace_bytes));
  EXPECT_EQ(128u, workspace_bytes);
  const DeviceBuffer x(std::vector<float>{1, 2, 3, 4});
  DeviceBuffer out(16), workspace(workspace_bytes);
  // The temporaries' entries are ignored: null, or anything at all.
  void* buffers[] = {x.get(), out.get(), nullptr, out.get()};
  const uint64_t bytes[] = {16, 16, 0, 1};
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoProgramLaunch(program.get(), stream.get(), buffers, bytes, 4, nullptr));
  EXPECT_NE(std::string(ptoGetRecentErrMsg()).find("the program needs 128 bytes of workspace"), std::string::npos)
      << ptoGetRecentErrMsg();
  ASSERT_PTO_OK(ptoProgramLaunch(program.get(), stream.get(), buffers, bytes, 4, workspace.get()));
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ((std::vector<float>{1, 4, 9, 16}), out.floats());  // (-x + 2x) * x

  Program add(kAdd);
  ASSERT_PTO_OK(ptoProgramGetWorkspaceSize(add.get(), &workspace_bytes));
  EXPECT_EQ(0u, workspace_bytes);
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoProgramGetWorkspaceSize(add.get(), nullptr));
}

// The handle can go as soon as the launches are made: each queued launch keeps
// the program until it has run (as cuModuleUnload after cuLaunchKernel).
TEST(RuntimeProgram, AReleasedProgramStillRunsItsQueuedLaunches) {
  Stream stream;
  Latch latch;
  ptoProgram add = nullptr;
  ASSERT_PTO_OK(ptoProgramLoad(&add, accumulateProgram(4).c_str()));
  DeviceBuffer sum(std::vector<float>(4, 0.0f));
  const DeviceBuffer ones(std::vector<float>(4, 1.0f));
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  for (int i = 0; i < 3; ++i) EXPECT_PTO_OK(launchWith(add, stream.get(), {&sum, &ones}));
  EXPECT_PTO_OK(ptoProgramRelease(add));
  EXPECT_EQ(PTO_ERROR_NOT_READY, ptoStreamQuery(stream.get())) << "nothing has run yet";
  latch.open();
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(std::vector<float>(4, 3.0f), sum.floats());
}

// --- What loading refuses -------------------------------------------------

TEST(RuntimeProgram, LoadRefusesAParseErrorNamingLineAndColumn) {
  ptoProgram program = nullptr;
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE,
            ptoProgramLoad(&program, "buffer %0 output 16\ntnosuchop %0:f32[4;1]@0\n"));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_EQ(0u, message.rfind("ptoProgramLoad: PTO-AS line 2, column ", 0)) << message;
  EXPECT_EQ(nullptr, program);
}

TEST(RuntimeProgram, LoadRefusesAnInvalidProgramWithTheVerifiersMessage) {
  ptoProgram program = nullptr;
  // Eight elements read from and written to 16-byte buffers.
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE,
            ptoProgramLoad(&program, "buffer %0 input 16\nbuffer %1 output 16\ntexp %1:f32[8;1]@0, %0:f32[8;1]@0\n"));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_EQ(0u, message.rfind("ptoProgramLoad: instruction 0 (texp", 0)) << message;
  EXPECT_EQ(nullptr, program);
}

TEST(RuntimeProgram, LoadRejectsNullArguments) {
  ptoProgram program = nullptr;
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoProgramLoad(nullptr, kAdd));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoProgramLoad(&program, nullptr));
  EXPECT_EQ(nullptr, program);
}

// --- What a launch refuses ------------------------------------------------

TEST(RuntimeProgram, NullAndReleasedHandlesAreInvalid) {
  Stream stream;
  DeviceBuffer out(16), a(16), b(16);
  size_t workspace_bytes = 0;
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, launchWith(nullptr, stream.get(), {&out, &a, &b}));
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoProgramGetWorkspaceSize(nullptr, &workspace_bytes));
  EXPECT_PTO_OK(ptoProgramRelease(nullptr)) << "as free(nullptr)";

  ptoProgram released = nullptr;
  ASSERT_PTO_OK(ptoProgramLoad(&released, kAdd));
  ASSERT_PTO_OK(ptoProgramRelease(released));
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, launchWith(released, stream.get(), {&out, &a, &b}));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "is not a loaded program")) << ptoGetRecentErrMsg();
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoProgramGetWorkspaceSize(released, &workspace_bytes));
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoProgramRelease(released));
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
}

// Each binding is checked against the program before anything is queued.
TEST(RuntimeProgram, ALaunchWhoseBindingsDoNotMatchTheProgramIsRefused) {
  Stream stream;
  Program add(kAdd);
  const DeviceBuffer a(std::vector<float>{1, 2, 3, 4}), short_b(8);
  DeviceBuffer out(std::vector<float>(4, -1.0f));

  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, launchWith(add.get(), stream.get(), {&out, &a}));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "the program declares 3 buffers, the launch binds 2"))
      << ptoGetRecentErrMsg();
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, launchWith(add.get(), stream.get(), {&out, &a, &short_b}));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "buffer %2 needs 16 bytes, got 8")) << ptoGetRecentErrMsg();
  void* unbound[] = {out.get(), nullptr, a.get()};
  const uint64_t bytes[] = {16, 16, 16};
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoProgramLaunch(add.get(), stream.get(), unbound, bytes, 3, nullptr));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "buffer %1 is not bound")) << ptoGetRecentErrMsg();

  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(std::vector<float>(4, -1.0f), out.floats()) << "a refused launch queues nothing";
}

TEST(RuntimeProgram, ALaunchOnAStreamOfAnotherDeviceIsRefused) {
  if (deviceCount() < 2) GTEST_SKIP() << "needs two devices";
  Program add(kAdd);  // loaded on device 0
  const DeviceBuffer a(std::vector<float>{1, 2, 3, 4});
  DeviceBuffer out(16);
  ptoStream on1 = nullptr;
  ASSERT_PTO_OK(createStreamOnDevice(1, &on1));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, launchWith(add.get(), on1, {&out, &a, &a}));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "loaded on pto:0, the stream belongs to pto:1")) << ptoGetRecentErrMsg();
  EXPECT_PTO_OK(ptoStreamSynchronize(on1));
  EXPECT_PTO_OK(ptoStreamDestroy(on1));
}

}  // namespace
