// The profiler's activity record (ptoProfiler*): kernels, copies and fills with
// their stream, device and times; kernels' own annotations and the activities they
// record inside themselves; nothing recorded while stopped.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime/pto_runtime.h"

namespace {

ptoError annotatedKernel(const void*) {
  ptoProfilerAnnotate("f32[4] <- f32[4]", 32, 4);
  return PTO_SUCCESS;
}

ptoError kernelWithInsides(const void*) {
  ptoActivity inside{};
  std::strcpy(inside.name, "texp");
  inside.kind = PTO_ACTIVITY_INSTRUCTION;
  inside.start_ns = ptoProfilerNow();
  inside.end_ns = ptoProfilerNow();
  ptoProfilerRecordInside(&inside);
  return PTO_SUCCESS;
}

std::vector<ptoActivity> flushAll() {
  std::vector<ptoActivity> all(64);
  size_t count = 0;
  EXPECT_EQ(ptoProfilerFlush(all.data(), all.size(), &count), PTO_SUCCESS);
  all.resize(count);
  return all;
}

TEST(RuntimeProfiler, RecordsKernelsCopiesAndFillsWithTheirStreamAndTimes) {
  ptoStream stream = nullptr, other = nullptr;
  ASSERT_EQ(ptoStreamCreate(&stream), PTO_SUCCESS);
  ASSERT_EQ(ptoStreamCreate(&other), PTO_SUCCESS);
  void* device = nullptr;
  void* filled = nullptr;  // the other stream's: the streams are not ordered with each other
  ASSERT_EQ(ptoMalloc(&device, 256), PTO_SUCCESS);
  ASSERT_EQ(ptoMalloc(&filled, 128), PTO_SUCCESS);
  std::vector<char> host(256);
  flushAll();
  ASSERT_EQ(ptoProfilerStart(), PTO_SUCCESS);
  EXPECT_EQ(ptoProfilerEnabled(), 1);
  const uint64_t before = ptoProfilerNow();
  ASSERT_EQ(ptoLaunchKernel(stream, "tabs", &annotatedKernel, nullptr, 0), PTO_SUCCESS);
  ASSERT_EQ(ptoMemcpyAsync(device, host.data(), 256, PTO_MEMCPY_HOST_TO_DEVICE, stream), PTO_SUCCESS);
  ASSERT_EQ(ptoMemsetAsync(filled, 0, 128, other), PTO_SUCCESS);
  ASSERT_EQ(ptoLaunchKernel(other, "program", &kernelWithInsides, nullptr, 0), PTO_SUCCESS);
  ASSERT_EQ(ptoStreamSynchronize(stream), PTO_SUCCESS);
  ASSERT_EQ(ptoStreamSynchronize(other), PTO_SUCCESS);
  ASSERT_EQ(ptoProfilerStop(), PTO_SUCCESS);
  ASSERT_EQ(ptoLaunchKernel(stream, "unseen", &annotatedKernel, nullptr, 0), PTO_SUCCESS);
  ASSERT_EQ(ptoStreamSynchronize(stream), PTO_SUCCESS);

  const std::vector<ptoActivity> activities = flushAll();
  ASSERT_EQ(activities.size(), 5u);
  const ptoActivity* kernel = nullptr;
  const ptoActivity* copy = nullptr;
  const ptoActivity* fill = nullptr;
  const ptoActivity* program = nullptr;
  const ptoActivity* inside = nullptr;
  for (const ptoActivity& a : activities) {
    EXPECT_GE(a.start_ns, before);
    EXPECT_LE(a.start_ns, a.end_ns);
    const std::string name = a.name;
    if (name == "tabs") kernel = &a;
    if (name == "memcpy host-to-device") copy = &a;
    if (name == "memset") fill = &a;
    if (name == "program") program = &a;
    if (name == "texp") inside = &a;
  }
  ASSERT_TRUE(kernel && copy && fill && program && inside);
  EXPECT_EQ(kernel->kind, PTO_ACTIVITY_KERNEL);
  EXPECT_STREQ(kernel->detail, "f32[4] <- f32[4]");
  EXPECT_EQ(kernel->bytes, 32u);
  EXPECT_EQ(kernel->flops, 4.0);
  EXPECT_EQ(copy->kind, PTO_ACTIVITY_COPY);
  EXPECT_EQ(copy->bytes, 512u);  // read and written
  EXPECT_EQ(copy->stream, kernel->stream);
  EXPECT_EQ(fill->kind, PTO_ACTIVITY_FILL);
  EXPECT_NE(fill->stream, kernel->stream);
  EXPECT_EQ(program->kind, PTO_ACTIVITY_PROGRAM);
  EXPECT_EQ(inside->kind, PTO_ACTIVITY_INSTRUCTION);
  EXPECT_EQ(inside->stream, program->stream);
  EXPECT_GE(inside->start_ns, program->start_ns);
  EXPECT_LE(inside->end_ns, program->end_ns);
  EXPECT_EQ(ptoProfilerEnabled(), 0);

  EXPECT_EQ(ptoProfilerFlush(nullptr, 1, nullptr), PTO_ERROR_INVALID_VALUE);
  ASSERT_EQ(ptoFree(device), PTO_SUCCESS);
  ASSERT_EQ(ptoFree(filled), PTO_SUCCESS);
  ASSERT_EQ(ptoStreamDestroy(stream), PTO_SUCCESS);
  ASSERT_EQ(ptoStreamDestroy(other), PTO_SUCCESS);
}

}  // namespace
