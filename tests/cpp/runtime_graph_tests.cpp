// Graph capture of the PTO runtime: launches, copies, fills and host functions
// on a capturing stream are recorded, not run, and replay in order as one
// command; each call that cannot be recorded is refused by name and invalidates
// the capture, after which the stream and the device work as before.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "runtime/program.h"
#include "runtime/pto_runtime.h"
#include "runtime_test_support.h"

namespace {

using namespace pto_test;

// A capture of `stream` ended into a graph the test owns.
class Graph {
 public:
  ~Graph() { ptoGraphDestroy(graph_); }
  ptoGraph* out() { return &graph_; }
  ptoGraph get() const { return graph_; }

 private:
  ptoGraph graph_ = nullptr;
};

ptoStreamCaptureStatus statusOf(ptoStream stream) {
  ptoStreamCaptureStatus status = PTO_CAPTURE_STATUS_NONE;
  EXPECT_PTO_OK(ptoStreamGetCaptureInfo(stream, &status, nullptr));
  return status;
}

TEST(RuntimeGraph, CapturedWorkRunsOnlyWhenReplayed) {
  Stream stream;
  DeviceBuffer counter(std::vector<float>(16, 0.0f));
  DeviceBuffer one(std::vector<float>(16, 1.0f));
  Program add(accumulateProgram(16));

  ASSERT_PTO_OK(ptoStreamBeginCapture(stream.get(), PTO_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(PTO_CAPTURE_STATUS_ACTIVE, statusOf(stream.get()));
  for (int i = 0; i < 3; ++i) ASSERT_PTO_OK(launchWith(add.get(), stream.get(), {&counter, &one}));
  Graph graph;
  ASSERT_PTO_OK(ptoStreamEndCapture(stream.get(), graph.out()));
  EXPECT_EQ(PTO_CAPTURE_STATUS_NONE, statusOf(stream.get()));
  size_t nodes = 0;
  ASSERT_PTO_OK(ptoGraphGetNodeCount(graph.get(), &nodes));
  EXPECT_EQ(3u, nodes);

  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(std::vector<float>(16, 0.0f), counter.floats()) << "capture ran the work";
  for (int replay = 0; replay < 4; ++replay) ASSERT_PTO_OK(ptoGraphLaunch(graph.get(), stream.get()));
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(std::vector<float>(16, 12.0f), counter.floats());
}

TEST(RuntimeGraph, ReplayKeepsTheOrderOfCopiesFillsAndHostFunctions) {
  Stream stream;
  DeviceBuffer counter(16 * sizeof(float));
  DeviceBuffer one(std::vector<float>(16, 1.0f));
  DeviceBuffer snapshot(16 * sizeof(float));
  Program add(accumulateProgram(16));
  int host_runs = 0;

  ASSERT_PTO_OK(ptoStreamBeginCapture(stream.get(), PTO_CAPTURE_MODE_GLOBAL));
  ASSERT_PTO_OK(ptoMemsetAsync(counter.get(), 0, counter.bytes(), stream.get()));
  ASSERT_PTO_OK(launchWith(add.get(), stream.get(), {&counter, &one}));
  ASSERT_PTO_OK(ptoMemcpyAsync(snapshot.get(), counter.get(), counter.bytes(), PTO_MEMCPY_DEVICE_TO_DEVICE,
                               stream.get()));
  ASSERT_PTO_OK(launchWith(add.get(), stream.get(), {&counter, &one}));
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &incrementHostFn, &host_runs));
  Graph graph;
  ASSERT_PTO_OK(ptoStreamEndCapture(stream.get(), graph.out()));
  EXPECT_EQ(0, host_runs);

  for (int replay = 0; replay < 2; ++replay) ASSERT_PTO_OK(ptoGraphLaunch(graph.get(), stream.get()));
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(2, host_runs);
  EXPECT_EQ(std::vector<float>(16, 2.0f), counter.floats());  // the fill restarts each replay
  EXPECT_EQ(std::vector<float>(16, 1.0f), snapshot.floats());
}

TEST(RuntimeGraph, SynchronizingRefusesAndInvalidatesTheCapture) {
  Stream stream;
  DeviceBuffer counter(std::vector<float>(16, 0.0f));
  DeviceBuffer one(std::vector<float>(16, 1.0f));
  Program add(accumulateProgram(16));
  ptoEvent event = nullptr;
  ASSERT_PTO_OK(ptoEventCreate(&event));

  struct Refusal {
    const char* name;
    ptoError (*call)(ptoStream, ptoEvent);
  };
  const Refusal refusals[] = {
      {"ptoStreamSynchronize", [](ptoStream s, ptoEvent) { return ptoStreamSynchronize(s); }},
      {"ptoStreamQuery", [](ptoStream s, ptoEvent) { return ptoStreamQuery(s); }},
      {"ptoDeviceSynchronize", [](ptoStream, ptoEvent) { return ptoDeviceSynchronize(); }},
      {"ptoEventSynchronize", [](ptoStream, ptoEvent e) { return ptoEventSynchronize(e); }},
      {"ptoStreamSynchronize", [](ptoStream, ptoEvent) { return ptoStreamSynchronize(nullptr); }},
  };
  for (const Refusal& refusal : refusals) {
    SCOPED_TRACE(refusal.name);
    ASSERT_PTO_OK(ptoStreamBeginCapture(stream.get(), PTO_CAPTURE_MODE_GLOBAL));
    ASSERT_PTO_OK(launchWith(add.get(), stream.get(), {&counter, &one}));
    EXPECT_EQ(PTO_ERROR_CAPTURE_UNSUPPORTED, refusal.call(stream.get(), event));
    const std::string message = ptoGetRecentErrMsg();
    EXPECT_TRUE(contains(message, refusal.name)) << message;
    EXPECT_TRUE(contains(message, "invalidated")) << message;
    EXPECT_EQ(PTO_CAPTURE_STATUS_INVALIDATED, statusOf(stream.get()));
    EXPECT_EQ(PTO_ERROR_CAPTURE_INVALIDATED, launchWith(add.get(), stream.get(), {&counter, &one}));
    Graph graph;
    EXPECT_EQ(PTO_ERROR_CAPTURE_INVALIDATED, ptoStreamEndCapture(stream.get(), graph.out()));
    EXPECT_EQ(nullptr, graph.get());
    EXPECT_TRUE(contains(ptoGetRecentErrMsg(), refusal.name)) << ptoGetRecentErrMsg();
  }
  // Nothing captured ran, and the stream works as before.
  ASSERT_PTO_OK(launchWith(add.get(), stream.get(), {&counter, &one}));
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(std::vector<float>(16, 1.0f), counter.floats());
  EXPECT_PTO_OK(ptoEventDestroy(event));
}

TEST(RuntimeGraph, ModesSayWhoMaySynchronize) {
  Stream capturing;
  Stream other;
  for (ptoStreamCaptureMode mode : {PTO_CAPTURE_MODE_THREAD_LOCAL, PTO_CAPTURE_MODE_RELAXED}) {
    ASSERT_PTO_OK(ptoStreamBeginCapture(capturing.get(), mode));
    ptoError from_other_thread = PTO_SUCCESS;
    std::thread([&] { from_other_thread = ptoStreamSynchronize(other.get()); }).join();
    EXPECT_PTO_OK(from_other_thread);
    const ptoError from_this_thread = ptoStreamSynchronize(other.get());
    EXPECT_EQ(mode == PTO_CAPTURE_MODE_RELAXED ? PTO_SUCCESS : PTO_ERROR_CAPTURE_UNSUPPORTED, from_this_thread);
    EXPECT_EQ(PTO_ERROR_CAPTURE_UNSUPPORTED, ptoStreamSynchronize(capturing.get()));
    Graph graph;
    EXPECT_EQ(PTO_ERROR_CAPTURE_INVALIDATED, ptoStreamEndCapture(capturing.get(), graph.out()));
  }
}

TEST(RuntimeGraph, PageableHostCopiesAreRefusedPinnedOnesRecorded) {
  Stream stream;
  DeviceBuffer device(16 * sizeof(float));
  std::vector<float> pageable(16, 3.0f);
  void* pinned = nullptr;
  ASSERT_PTO_OK(ptoMallocHost(&pinned, device.bytes()));
  std::fill_n(static_cast<float*>(pinned), 16, 5.0f);

  ASSERT_PTO_OK(ptoStreamBeginCapture(stream.get(), PTO_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(PTO_ERROR_CAPTURE_UNSUPPORTED, ptoMemcpyAsync(pageable.data(), device.get(), device.bytes(),
                                                          PTO_MEMCPY_DEVICE_TO_HOST, stream.get()));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "device-to-host")) << ptoGetRecentErrMsg();
  Graph refused;
  EXPECT_EQ(PTO_ERROR_CAPTURE_INVALIDATED, ptoStreamEndCapture(stream.get(), refused.out()));

  ASSERT_PTO_OK(ptoStreamBeginCapture(stream.get(), PTO_CAPTURE_MODE_GLOBAL));
  ASSERT_PTO_OK(ptoMemcpyAsync(device.get(), pinned, device.bytes(), PTO_MEMCPY_HOST_TO_DEVICE, stream.get()));
  Graph graph;
  ASSERT_PTO_OK(ptoStreamEndCapture(stream.get(), graph.out()));
  ASSERT_PTO_OK(ptoGraphLaunch(graph.get(), stream.get()));
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(std::vector<float>(16, 5.0f), device.floats());
  EXPECT_PTO_OK(ptoFreeHost(pinned));
}

// A stream waiting for an event recorded inside the capture joins it (a fork):
// its work is recorded in host order with the capturing stream's.
TEST(RuntimeGraph, AStreamWaitingForACapturedEventJoinsTheCapture) {
  Stream stream;
  Stream forked;
  DeviceBuffer counter(std::vector<float>(16, 0.0f));
  DeviceBuffer one(std::vector<float>(16, 1.0f));
  DeviceBuffer snapshot(16 * sizeof(float));
  Program add(accumulateProgram(16));
  ptoEvent fork = nullptr, join = nullptr;
  ASSERT_PTO_OK(ptoEventCreate(&fork));
  ASSERT_PTO_OK(ptoEventCreate(&join));

  ASSERT_PTO_OK(ptoStreamBeginCapture(stream.get(), PTO_CAPTURE_MODE_GLOBAL));
  ASSERT_PTO_OK(launchWith(add.get(), stream.get(), {&counter, &one}));
  ASSERT_PTO_OK(ptoEventRecord(fork, stream.get()));
  ASSERT_PTO_OK(ptoStreamWaitEvent(forked.get(), fork));
  uint64_t origin_id = 0, forked_id = 0;
  ptoStreamCaptureStatus status = PTO_CAPTURE_STATUS_NONE;
  ASSERT_PTO_OK(ptoStreamGetCaptureInfo(stream.get(), &status, &origin_id));
  ASSERT_PTO_OK(ptoStreamGetCaptureInfo(forked.get(), &status, &forked_id));
  EXPECT_EQ(PTO_CAPTURE_STATUS_ACTIVE, status);
  EXPECT_EQ(origin_id, forked_id);
  ASSERT_PTO_OK(ptoMemcpyAsync(snapshot.get(), counter.get(), counter.bytes(), PTO_MEMCPY_DEVICE_TO_DEVICE,
                               forked.get()));
  ASSERT_PTO_OK(ptoEventRecord(join, forked.get()));
  ASSERT_PTO_OK(ptoStreamWaitEvent(stream.get(), join));
  Graph graph;
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoStreamEndCapture(forked.get(), graph.out()));  // ended where it began
  ASSERT_PTO_OK(ptoStreamEndCapture(stream.get(), graph.out()));
  EXPECT_EQ(PTO_CAPTURE_STATUS_NONE, statusOf(forked.get()));

  ASSERT_PTO_OK(ptoGraphLaunch(graph.get(), stream.get()));
  ASSERT_PTO_OK(ptoGraphLaunch(graph.get(), stream.get()));
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(std::vector<float>(16, 2.0f), counter.floats());
  EXPECT_EQ(std::vector<float>(16, 2.0f), snapshot.floats());
  EXPECT_PTO_OK(ptoEventDestroy(fork));
  EXPECT_PTO_OK(ptoEventDestroy(join));
}

TEST(RuntimeGraph, WaitingOnTheCaptureForAnEventFromOutsideIsRefused) {
  Stream stream;
  Stream other;
  ptoEvent outside = nullptr;
  ASSERT_PTO_OK(ptoEventCreate(&outside));
  ASSERT_PTO_OK(ptoEventRecord(outside, other.get()));
  Graph refused;
  ASSERT_PTO_OK(ptoStreamBeginCapture(stream.get(), PTO_CAPTURE_MODE_RELAXED));
  EXPECT_EQ(PTO_ERROR_CAPTURE_UNSUPPORTED, ptoStreamWaitEvent(stream.get(), outside));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "outside the capture")) << ptoGetRecentErrMsg();
  EXPECT_EQ(PTO_ERROR_CAPTURE_INVALIDATED, ptoStreamEndCapture(stream.get(), refused.out()));
  EXPECT_PTO_OK(ptoEventDestroy(outside));
}

// A graph's work as one program: one buffer per allocation, copies and fills
// over bytes; launched, it does what a replay does.
TEST(RuntimeGraph, CapturedProgramIsTheGraphAsOneProgram) {
  Stream stream;
  DeviceBuffer counter(16 * sizeof(float));
  DeviceBuffer one(std::vector<float>(16, 1.0f));
  DeviceBuffer snapshot(16 * sizeof(float));
  Program add(accumulateProgram(16));
  ASSERT_PTO_OK(ptoStreamBeginCapture(stream.get(), PTO_CAPTURE_MODE_GLOBAL));
  ASSERT_PTO_OK(ptoMemsetAsync(counter.get(), 0, counter.bytes(), stream.get()));
  ASSERT_PTO_OK(launchWith(add.get(), stream.get(), {&counter, &one}));
  ASSERT_PTO_OK(launchWith(add.get(), stream.get(), {&counter, &one}));
  ASSERT_PTO_OK(ptoMemcpyAsync(snapshot.get(), counter.get(), counter.bytes(), PTO_MEMCPY_DEVICE_TO_DEVICE,
                               stream.get()));
  Graph graph;
  ASSERT_PTO_OK(ptoStreamEndCapture(stream.get(), graph.out()));

  pto::rt::CapturedProgram captured;
  ASSERT_PTO_OK(pto::rt::capturedProgram(graph.get(), &captured));
  const std::string text = pto::isa::print(captured.program);
  EXPECT_EQ((std::vector<void*>{counter.get(), one.get(), snapshot.get()}), captured.memory) << text;
  EXPECT_EQ(4u, captured.program.instructions.size()) << text;
  EXPECT_TRUE(contains(text, "texpands") && contains(text, "tadd") && contains(text, "tmov")) << text;
  EXPECT_EQ(pto::isa::BufferKind::kInput, captured.program.buffers[1].kind) << text;

  ptoProgram program = nullptr;
  ASSERT_PTO_OK(pto::rt::loadProgram(
      std::make_shared<const pto::isa::ScheduledProgram>(pto::isa::scheduleInOrder(captured.program)), &program));
  std::vector<uint64_t> bytes;
  for (const pto::isa::Buffer& buffer : captured.program.buffers) bytes.push_back(buffer.bytes);
  ASSERT_PTO_OK(ptoProgramLaunch(program, stream.get(), captured.memory.data(), bytes.data(), bytes.size(), nullptr));
  ASSERT_PTO_OK(ptoStreamSynchronize(stream.get()));
  EXPECT_EQ(std::vector<float>(16, 2.0f), counter.floats());
  EXPECT_EQ(std::vector<float>(16, 2.0f), snapshot.floats());
  EXPECT_PTO_OK(ptoProgramRelease(program));

  int runs = 0;
  ASSERT_PTO_OK(ptoStreamBeginCapture(stream.get(), PTO_CAPTURE_MODE_GLOBAL));
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &incrementHostFn, &runs));
  Graph host;
  ASSERT_PTO_OK(ptoStreamEndCapture(stream.get(), host.out()));
  EXPECT_EQ(PTO_ERROR_NOT_SUPPORTED, pto::rt::capturedProgram(host.get(), &captured));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "host function")) << ptoGetRecentErrMsg();
}

TEST(RuntimeGraph, BadHandlesAndCallsAreRefused) {
  Stream stream;
  Graph graph;
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoStreamEndCapture(stream.get(), graph.out()));  // not capturing
  ASSERT_PTO_OK(ptoStreamBeginCapture(stream.get(), PTO_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoStreamBeginCapture(stream.get(), PTO_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoStreamDestroy(stream.get()));
  ASSERT_PTO_OK(ptoStreamEndCapture(stream.get(), graph.out()));  // an empty graph
  EXPECT_PTO_OK(ptoGraphLaunch(graph.get(), stream.get()));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoStreamBeginCapture(stream.get(), static_cast<ptoStreamCaptureMode>(7)));
  int not_a_graph = 0;
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoGraphLaunch(reinterpret_cast<ptoGraph>(&not_a_graph), stream.get()));
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoGraphDestroy(reinterpret_cast<ptoGraph>(&not_a_graph)));
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
}

}  // namespace
