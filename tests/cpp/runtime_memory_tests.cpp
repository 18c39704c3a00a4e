// Memory of the PTO runtime: device and pinned allocations, capacity
// accounting, pointer attributes, the synchronous and asynchronous copies and
// fills with their range checks, and the sim driver's strict mode.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/pto_runtime.h"
#include "runtime/sim/host_caches.h"
#include "runtime/sim/sim_memory.h"
#include "runtime_test_support.h"

namespace {

using namespace pto_test;

constexpr size_t kDeviceAlignment = 64;

size_t freeBytes() {
  size_t free_bytes = 0, total_bytes = 0;
  EXPECT_PTO_OK(ptoMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

// Owns one device allocation on the current device.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) {
    EXPECT_PTO_OK(ptoMalloc(&ptr_, bytes));
  }
  ~DeviceBuffer() { ptoFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  std::byte* bytes() const { return static_cast<std::byte*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

std::vector<uint8_t> pattern(size_t bytes, uint8_t seed) {
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(seed + i * 7);
  return data;
}

// --- Device allocation ----------------------------------------------------

TEST(RuntimeMemory, MallocReturns64ByteAlignedPointers) {
  for (size_t bytes : {1, 3, 64, 65, 100, 4096, 12345}) {
    DeviceBuffer buffer(bytes);
    ASSERT_NE(nullptr, buffer.get()) << bytes;
    EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(buffer.get()) % kDeviceAlignment) << bytes;
  }
}

TEST(RuntimeMemory, MallocOfZeroBytesGivesNullAndSucceeds) {
  void* ptr = reinterpret_cast<void*>(0x1);
  const size_t before = freeBytes();
  EXPECT_PTO_OK(ptoMalloc(&ptr, 0));
  EXPECT_EQ(nullptr, ptr);
  EXPECT_EQ(before, freeBytes());
}

TEST(RuntimeMemory, MallocRejectsNullOutput) {
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoMalloc(nullptr, 64));
}

TEST(RuntimeMemory, MemGetInfoReportsFreeWithinTotal) {
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_PTO_OK(ptoMemGetInfo(&free_bytes, &total_bytes));
  EXPECT_GT(total_bytes, 0u);
  EXPECT_LE(free_bytes, total_bytes);
}

TEST(RuntimeMemory, MemGetInfoRejectsNullOutputs) {
  size_t bytes = 0;
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoMemGetInfo(nullptr, &bytes));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoMemGetInfo(&bytes, nullptr));
}

TEST(RuntimeMemory, MallocAndFreeMoveFreeBytesByTheRoundedSize) {
  const size_t before = freeBytes();
  void* ptr = nullptr;
  ASSERT_PTO_OK(ptoMalloc(&ptr, 100));  // rounds up to 128
  EXPECT_EQ(before - 128, freeBytes());
  ASSERT_PTO_OK(ptoFree(ptr));
  EXPECT_EQ(before, freeBytes());

  ASSERT_PTO_OK(ptoMalloc(&ptr, 128));  // already a multiple of 64
  EXPECT_EQ(before - 128, freeBytes());
  ASSERT_PTO_OK(ptoFree(ptr));
  EXPECT_EQ(before, freeBytes());
}

TEST(RuntimeMemory, FreeOfNullIsANoOp) { EXPECT_PTO_OK(ptoFree(nullptr)); }

TEST(RuntimeMemory, FreeOfAHostPointerFailsWithInvalidValue) {
  int on_stack = 0;
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoFree(&on_stack));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "not a device allocation")) << ptoGetRecentErrMsg();

  std::vector<int> on_heap(16);
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoFree(on_heap.data()));
}

TEST(RuntimeMemory, FreeOfAnInteriorPointerFailsAndKeepsTheAllocation) {
  DeviceBuffer buffer(256);
  const size_t before = freeBytes();
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoFree(buffer.bytes() + 64));
  EXPECT_EQ(before, freeBytes());
  ptoPointerAttributes attributes{};
  ASSERT_PTO_OK(ptoPointerGetAttributes(buffer.get(), &attributes));
  EXPECT_EQ(PTO_MEMORY_DEVICE, attributes.type);
}

TEST(RuntimeMemory, DoubleFreeFailsWithInvalidValue) {
  void* ptr = nullptr;
  ASSERT_PTO_OK(ptoMalloc(&ptr, 64));
  ASSERT_PTO_OK(ptoFree(ptr));
  const size_t after_first_free = freeBytes();
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoFree(ptr));
  EXPECT_EQ(after_first_free, freeBytes());
}

TEST(RuntimeMemory, FreeOfPinnedHostMemoryFailsWithInvalidValue) {
  void* pinned = nullptr;
  ASSERT_PTO_OK(ptoMallocHost(&pinned, 64));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoFree(pinned));
  EXPECT_PTO_OK(ptoFreeHost(pinned));
}

// --- Capacity -------------------------------------------------------------

TEST(RuntimeMemory, AllocatingMoreThanTheFreeBytesIsOutOfMemory) {
  const size_t before = freeBytes();
  void* ptr = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(PTO_ERROR_OUT_OF_MEMORY, ptoMalloc(&ptr, before + 1));
  EXPECT_EQ(nullptr, ptr);
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "out of memory")) << ptoGetRecentErrMsg();
  EXPECT_EQ(before, freeBytes()) << "a failed allocation must not be accounted";
}

TEST(RuntimeMemory, SmallAllocationStillWorksAfterOutOfMemory) {
  void* huge = nullptr;
  ASSERT_EQ(PTO_ERROR_OUT_OF_MEMORY, ptoMalloc(&huge, freeBytes() + kDeviceAlignment));
  DeviceBuffer small(64);
  EXPECT_NE(nullptr, small.get());
}

TEST(RuntimeMemory, AllocatingWhatWouldOverflowTheSizeIsOutOfMemory) {
  const size_t before = freeBytes();
  for (size_t bytes : {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - kDeviceAlignment + 2}) {
    void* ptr = nullptr;
    EXPECT_EQ(PTO_ERROR_OUT_OF_MEMORY, ptoMalloc(&ptr, bytes)) << bytes;
    EXPECT_EQ(nullptr, ptr) << bytes;
    if (ptr != nullptr) ptoFree(ptr);
  }
  EXPECT_EQ(before, freeBytes());
}

TEST(RuntimeMemory, EachDeviceAccountsItsOwnMemory) {
  if (deviceCount() < 2) GTEST_SKIP() << "needs two devices";
  const size_t device0_before = freeBytes();
  size_t device1_before = 0;
  {
    ScopedDevice on1(1);
    device1_before = freeBytes();
    void* ptr = nullptr;
    ASSERT_PTO_OK(ptoMalloc(&ptr, 1 << 20));
    EXPECT_EQ(device1_before - (1 << 20), freeBytes());

    ptoPointerAttributes attributes{};
    ASSERT_PTO_OK(ptoPointerGetAttributes(ptr, &attributes));
    EXPECT_EQ(1, attributes.device);

    {
      ScopedDevice on0(0);
      EXPECT_EQ(device0_before, freeBytes()) << "device 1's allocation charged device 0";
      // Freeing does not depend on the current device.
      ASSERT_PTO_OK(ptoFree(ptr));
    }
    EXPECT_EQ(device1_before, freeBytes());
  }
  EXPECT_EQ(device0_before, freeBytes());
}

// --- Pinned host memory ---------------------------------------------------

TEST(RuntimeMemory, PinnedHostMemoryIsUsableAndFreed) {
  void* pinned = nullptr;
  ASSERT_PTO_OK(ptoMallocHost(&pinned, 1000));
  ASSERT_NE(nullptr, pinned);
  std::memset(pinned, 0x5a, 1000);  // plain host memory: the host may touch it
  EXPECT_EQ(0x5a, static_cast<uint8_t*>(pinned)[999]);
  EXPECT_PTO_OK(ptoFreeHost(pinned));
}

TEST(RuntimeMemory, PinnedHostMemoryDoesNotChargeTheDevice) {
  const size_t before = freeBytes();
  void* pinned = nullptr;
  ASSERT_PTO_OK(ptoMallocHost(&pinned, 1 << 16));
  EXPECT_EQ(before, freeBytes());
  EXPECT_PTO_OK(ptoFreeHost(pinned));
}

TEST(RuntimeMemory, MallocHostOfZeroBytesGivesNullAndSucceeds) {
  void* pinned = reinterpret_cast<void*>(0x1);
  EXPECT_PTO_OK(ptoMallocHost(&pinned, 0));
  EXPECT_EQ(nullptr, pinned);
  EXPECT_PTO_OK(ptoFreeHost(nullptr));
}

TEST(RuntimeMemory, MallocHostRejectsNullOutputAndOverflowingSizes) {
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoMallocHost(nullptr, 64));
  void* pinned = nullptr;
  EXPECT_EQ(PTO_ERROR_OUT_OF_MEMORY, ptoMallocHost(&pinned, SIZE_MAX));
  EXPECT_EQ(nullptr, pinned);
  if (pinned != nullptr) ptoFreeHost(pinned);
}

TEST(RuntimeMemory, FreeHostRejectsDeviceAndUnknownPointers) {
  DeviceBuffer device(64);
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoFreeHost(device.get()));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "not pinned host memory")) << ptoGetRecentErrMsg();
  int on_stack = 0;
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoFreeHost(&on_stack));
}

// --- Pointer attributes ---------------------------------------------------

TEST(RuntimeMemory, AttributesOfADevicePointer) {
  DeviceBuffer buffer(100);
  ptoPointerAttributes attributes{};
  ASSERT_PTO_OK(ptoPointerGetAttributes(buffer.get(), &attributes));
  EXPECT_EQ(PTO_MEMORY_DEVICE, attributes.type);
  EXPECT_EQ(0, attributes.device);
  EXPECT_EQ(buffer.get(), attributes.base);
  EXPECT_EQ(128u, attributes.size);
}

TEST(RuntimeMemory, AttributesOfAnInteriorPointerNameItsAllocation) {
  DeviceBuffer buffer(256);
  for (size_t offset : {1, 64, 200, 255}) {
    ptoPointerAttributes attributes{};
    ASSERT_PTO_OK(ptoPointerGetAttributes(buffer.bytes() + offset, &attributes));
    EXPECT_EQ(PTO_MEMORY_DEVICE, attributes.type) << offset;
    EXPECT_EQ(buffer.get(), attributes.base) << offset;
    EXPECT_EQ(256u, attributes.size) << offset;
  }
  // One past the end is outside this allocation.
  ptoPointerAttributes past_end{};
  ASSERT_PTO_OK(ptoPointerGetAttributes(buffer.bytes() + 256, &past_end));
  EXPECT_NE(buffer.get(), past_end.base);
}

TEST(RuntimeMemory, AttributesOfPinnedHostMemory) {
  void* pinned = nullptr;
  ASSERT_PTO_OK(ptoMallocHost(&pinned, 100));
  ptoPointerAttributes attributes{};
  ASSERT_PTO_OK(ptoPointerGetAttributes(static_cast<char*>(pinned) + 10, &attributes));
  EXPECT_EQ(PTO_MEMORY_HOST_PINNED, attributes.type);
  EXPECT_EQ(-1, attributes.device);
  EXPECT_EQ(pinned, attributes.base);
  EXPECT_GE(attributes.size, 100u);
  EXPECT_PTO_OK(ptoFreeHost(pinned));
}

TEST(RuntimeMemory, AttributesOfUnregisteredHostMemory) {
  int on_stack = 0;
  ptoPointerAttributes attributes{PTO_MEMORY_DEVICE, 5, &on_stack, 5};
  ASSERT_PTO_OK(ptoPointerGetAttributes(&on_stack, &attributes));
  EXPECT_EQ(PTO_MEMORY_UNREGISTERED, attributes.type);
  EXPECT_EQ(-1, attributes.device);
  EXPECT_EQ(nullptr, attributes.base);
  EXPECT_EQ(0u, attributes.size);

  ASSERT_PTO_OK(ptoPointerGetAttributes(nullptr, &attributes));
  EXPECT_EQ(PTO_MEMORY_UNREGISTERED, attributes.type);
}

TEST(RuntimeMemory, AttributesOfAFreedPointerAreUnregistered) {
  void* ptr = nullptr;
  ASSERT_PTO_OK(ptoMalloc(&ptr, 64));
  ASSERT_PTO_OK(ptoFree(ptr));
  ptoPointerAttributes attributes{};
  ASSERT_PTO_OK(ptoPointerGetAttributes(ptr, &attributes));
  EXPECT_EQ(PTO_MEMORY_UNREGISTERED, attributes.type);
}

TEST(RuntimeMemory, PointerGetAttributesRejectsNullOutput) {
  DeviceBuffer buffer(64);
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoPointerGetAttributes(buffer.get(), nullptr));
}

// --- Synchronous copies and fills -----------------------------------------

TEST(RuntimeMemory, MemcpyOfAllFourKindsRoundTripsData) {
  constexpr size_t kBytes = 1000;
  const std::vector<uint8_t> source = pattern(kBytes, 3);
  std::vector<uint8_t> host_copy(kBytes), result(kBytes);
  DeviceBuffer first(kBytes), second(kBytes);

  ASSERT_PTO_OK(ptoMemcpy(host_copy.data(), source.data(), kBytes, PTO_MEMCPY_HOST_TO_HOST));
  ASSERT_PTO_OK(ptoMemcpy(first.get(), host_copy.data(), kBytes, PTO_MEMCPY_HOST_TO_DEVICE));
  ASSERT_PTO_OK(ptoMemcpy(second.get(), first.get(), kBytes, PTO_MEMCPY_DEVICE_TO_DEVICE));
  ASSERT_PTO_OK(ptoMemcpy(result.data(), second.get(), kBytes, PTO_MEMCPY_DEVICE_TO_HOST));

  EXPECT_EQ(source, host_copy);
  EXPECT_EQ(source, result);
}

// Copies larger than half the host's last-level cache stream (non-temporal stores
// from each chunk's first aligned byte): every kind, at offsets that leave a head and
// a tail to copy around the vectors, arrives whole.
TEST(RuntimeMemory, LargeMemcpyOfAllFourKindsAtOddOffsetsRoundTripsData) {
  const size_t bytes = static_cast<size_t>(pto::rt::sim::hostCaches().last_level_bytes) / 2 + 4099;
  std::vector<uint8_t> source(bytes + 3);
  std::mt19937 random(23);
  for (uint8_t& byte : source) byte = static_cast<uint8_t>(random());  // no period a misplaced block could match
  std::vector<uint8_t> result(bytes + 5, 0);
  DeviceBuffer first(bytes + 7), second(bytes + 9);
  ASSERT_PTO_OK(ptoMemcpy(first.bytes() + 7, source.data() + 3, bytes, PTO_MEMCPY_HOST_TO_DEVICE));
  ASSERT_PTO_OK(ptoMemcpy(second.bytes() + 1, first.bytes() + 7, bytes, PTO_MEMCPY_DEVICE_TO_DEVICE));
  ASSERT_PTO_OK(ptoMemcpy(result.data() + 5, second.bytes() + 1, bytes, PTO_MEMCPY_DEVICE_TO_HOST));
  EXPECT_TRUE(std::equal(source.begin() + 3, source.end(), result.begin() + 5));
  std::vector<uint8_t> host_copy(bytes + 1, 0);
  ASSERT_PTO_OK(ptoMemcpy(host_copy.data() + 1, source.data() + 3, bytes, PTO_MEMCPY_HOST_TO_HOST));
  EXPECT_TRUE(std::equal(source.begin() + 3, source.end(), host_copy.begin() + 1));
}

TEST(RuntimeMemory, MemcpyThroughPinnedHostMemory) {
  constexpr size_t kBytes = 512;
  void* pinned = nullptr;
  ASSERT_PTO_OK(ptoMallocHost(&pinned, kBytes));
  const std::vector<uint8_t> source = pattern(kBytes, 11);
  std::memcpy(pinned, source.data(), kBytes);

  DeviceBuffer device(kBytes);
  std::vector<uint8_t> result(kBytes);
  ASSERT_PTO_OK(ptoMemcpy(device.get(), pinned, kBytes, PTO_MEMCPY_HOST_TO_DEVICE));
  std::memset(pinned, 0, kBytes);
  ASSERT_PTO_OK(ptoMemcpy(pinned, device.get(), kBytes, PTO_MEMCPY_DEVICE_TO_HOST));
  std::memcpy(result.data(), pinned, kBytes);
  EXPECT_EQ(source, result);
  EXPECT_PTO_OK(ptoFreeHost(pinned));
}

TEST(RuntimeMemory, MemcpyAcrossDevices) {
  if (deviceCount() < 2) GTEST_SKIP() << "needs two devices";
  constexpr size_t kBytes = 256;
  const std::vector<uint8_t> source = pattern(kBytes, 42);
  std::vector<uint8_t> result(kBytes);
  DeviceBuffer on0(kBytes);
  void* on1 = nullptr;
  {
    ScopedDevice device1(1);
    ASSERT_PTO_OK(ptoMalloc(&on1, kBytes));
  }
  ASSERT_PTO_OK(ptoMemcpy(on0.get(), source.data(), kBytes, PTO_MEMCPY_HOST_TO_DEVICE));
  ASSERT_PTO_OK(ptoMemcpy(on1, on0.get(), kBytes, PTO_MEMCPY_DEVICE_TO_DEVICE));
  ASSERT_PTO_OK(ptoMemcpy(result.data(), on1, kBytes, PTO_MEMCPY_DEVICE_TO_HOST));
  EXPECT_EQ(source, result);
  EXPECT_PTO_OK(ptoFree(on1));
}

TEST(RuntimeMemory, MemcpyIntoTheMiddleOfAnAllocation) {
  DeviceBuffer device(256);
  ASSERT_PTO_OK(ptoMemset(device.get(), 0, 256));
  const std::vector<uint8_t> middle(64, 0xee);
  ASSERT_PTO_OK(ptoMemcpy(device.bytes() + 100, middle.data(), 64, PTO_MEMCPY_HOST_TO_DEVICE));
  std::vector<uint8_t> result(256);
  ASSERT_PTO_OK(ptoMemcpy(result.data(), device.get(), 256, PTO_MEMCPY_DEVICE_TO_HOST));
  for (size_t i = 0; i < 256; ++i) {
    EXPECT_EQ((i >= 100 && i < 164) ? 0xee : 0, result[i]) << i;
  }
}

TEST(RuntimeMemory, MemsetFillsBytesWithTheLowByteOfTheValue) {
  DeviceBuffer device(300);
  ASSERT_PTO_OK(ptoMemset(device.get(), 0x1ab, 300));  // only 0xab is used
  std::vector<uint8_t> result(300);
  ASSERT_PTO_OK(ptoMemcpy(result.data(), device.get(), 300, PTO_MEMCPY_DEVICE_TO_HOST));
  EXPECT_EQ(std::vector<uint8_t>(300, 0xab), result);
}

TEST(RuntimeMemory, ZeroByteCopiesAndFillsSucceedWithoutPointers) {
  EXPECT_PTO_OK(ptoMemcpy(nullptr, nullptr, 0, PTO_MEMCPY_HOST_TO_DEVICE));
  EXPECT_PTO_OK(ptoMemset(nullptr, 0, 0));
  EXPECT_PTO_OK(ptoMemcpyAsync(nullptr, nullptr, 0, PTO_MEMCPY_DEVICE_TO_HOST, nullptr));
  EXPECT_PTO_OK(ptoMemsetAsync(nullptr, 0, 0, nullptr));
}

// --- Range checks (negative cases) ----------------------------------------

TEST(RuntimeMemory, MemcpyWithAHostPointerAsTheDeviceSideIsInvalid) {
  std::vector<uint8_t> host(64), other(64);
  DeviceBuffer device(64);

  EXPECT_EQ(PTO_ERROR_INVALID_VALUE,
            ptoMemcpy(other.data(), host.data(), 64, PTO_MEMCPY_HOST_TO_DEVICE));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "not device memory")) << ptoGetRecentErrMsg();

  EXPECT_EQ(PTO_ERROR_INVALID_VALUE,
            ptoMemcpy(other.data(), host.data(), 64, PTO_MEMCPY_DEVICE_TO_HOST));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE,
            ptoMemcpy(device.get(), host.data(), 64, PTO_MEMCPY_DEVICE_TO_DEVICE));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE,
            ptoMemcpy(host.data(), device.get(), 64, PTO_MEMCPY_DEVICE_TO_DEVICE));
}

TEST(RuntimeMemory, MemcpyWithADevicePointerAsTheHostSideIsInvalid) {
  std::vector<uint8_t> host(64);
  DeviceBuffer device(64), other(64);
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE,
            ptoMemcpy(device.get(), other.get(), 64, PTO_MEMCPY_HOST_TO_DEVICE));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "is device memory")) << ptoGetRecentErrMsg();
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE,
            ptoMemcpy(device.get(), host.data(), 64, PTO_MEMCPY_HOST_TO_HOST));
}

TEST(RuntimeMemory, PinnedHostMemoryIsNotDeviceMemory) {
  void* pinned = nullptr;
  ASSERT_PTO_OK(ptoMallocHost(&pinned, 64));
  std::vector<uint8_t> host(64);
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE,
            ptoMemcpy(pinned, host.data(), 64, PTO_MEMCPY_HOST_TO_DEVICE));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoMemset(pinned, 0, 64));
  EXPECT_PTO_OK(ptoFreeHost(pinned));
}

TEST(RuntimeMemory, MemcpyOverrunningADeviceAllocationIsInvalid) {
  DeviceBuffer device(64);  // exactly 64 bytes: no rounding slack
  std::vector<uint8_t> host(200, 0x11);

  EXPECT_EQ(PTO_ERROR_INVALID_VALUE,
            ptoMemcpy(device.get(), host.data(), 65, PTO_MEMCPY_HOST_TO_DEVICE));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "overruns")) << ptoGetRecentErrMsg();
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE,
            ptoMemcpy(host.data(), device.bytes() + 32, 33, PTO_MEMCPY_DEVICE_TO_HOST));

  // The allocation's own bytes are still fine, up to the last one.
  EXPECT_PTO_OK(ptoMemcpy(device.bytes() + 32, host.data(), 32, PTO_MEMCPY_HOST_TO_DEVICE));
}

TEST(RuntimeMemory, MemcpyWithAWrappingByteCountIsInvalid) {
  DeviceBuffer device(64);
  std::vector<uint8_t> host(64);
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE,
            ptoMemcpy(device.get(), host.data(), SIZE_MAX, PTO_MEMCPY_HOST_TO_DEVICE));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE,
            ptoMemcpy(host.data(), device.bytes() + 8, SIZE_MAX - 4, PTO_MEMCPY_DEVICE_TO_HOST));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoMemset(device.bytes() + 1, 0, SIZE_MAX));
}

TEST(RuntimeMemory, MemsetOverrunningOrOutsideDeviceMemoryIsInvalid) {
  DeviceBuffer device(128);
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoMemset(device.get(), 0, 129));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoMemset(device.bytes() + 127, 0, 2));
  std::vector<uint8_t> host(16);
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoMemset(host.data(), 0, 16));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "not device memory")) << ptoGetRecentErrMsg();
  EXPECT_EQ(std::vector<uint8_t>(16, 0), host);
}

TEST(RuntimeMemory, CopiesAndFillsOfNullPointersAreInvalid) {
  DeviceBuffer device(64);
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoMemcpy(device.get(), nullptr, 8, PTO_MEMCPY_HOST_TO_DEVICE));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoMemcpy(nullptr, device.get(), 8, PTO_MEMCPY_DEVICE_TO_HOST));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoMemset(nullptr, 0, 8));
}

TEST(RuntimeMemory, MemcpyRejectsAnUnknownKind) {
  std::vector<uint8_t> a(8), b(8);
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE,
            ptoMemcpy(a.data(), b.data(), 8, static_cast<ptoMemcpyKind>(4)));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "memcpy kind")) << ptoGetRecentErrMsg();
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE,
            ptoMemcpy(a.data(), b.data(), 8, static_cast<ptoMemcpyKind>(-1)));
}

TEST(RuntimeMemory, FailedCopiesLeaveTheDefaultStreamUsable) {
  DeviceBuffer device(64);
  std::vector<uint8_t> host(128, 7);
  ASSERT_EQ(PTO_ERROR_INVALID_VALUE,
            ptoMemcpy(device.get(), host.data(), 128, PTO_MEMCPY_HOST_TO_DEVICE));
  EXPECT_PTO_OK(ptoStreamSynchronize(nullptr)) << "a rejected copy must not leave a sticky error";
  EXPECT_PTO_OK(ptoMemcpy(device.get(), host.data(), 64, PTO_MEMCPY_HOST_TO_DEVICE));
}

// --- Asynchronous copies and fills ----------------------------------------

TEST(RuntimeMemory, AsyncCopiesAndFillsOnAStreamRoundTripData) {
  ptoStream stream = nullptr;
  ASSERT_PTO_OK(ptoStreamCreate(&stream));
  constexpr size_t kBytes = 4096;
  const std::vector<uint8_t> source = pattern(kBytes, 9);
  std::vector<uint8_t> copied(kBytes), filled(kBytes);
  DeviceBuffer device(kBytes);

  ASSERT_PTO_OK(ptoMemcpyAsync(device.get(), source.data(), kBytes, PTO_MEMCPY_HOST_TO_DEVICE,
                               stream));
  ASSERT_PTO_OK(ptoMemcpyAsync(copied.data(), device.get(), kBytes, PTO_MEMCPY_DEVICE_TO_HOST,
                               stream));
  ASSERT_PTO_OK(ptoMemsetAsync(device.get(), 0x3c, kBytes, stream));
  ASSERT_PTO_OK(ptoMemcpyAsync(filled.data(), device.get(), kBytes, PTO_MEMCPY_DEVICE_TO_HOST,
                               stream));
  ASSERT_PTO_OK(ptoStreamSynchronize(stream));

  EXPECT_EQ(source, copied);
  EXPECT_EQ(std::vector<uint8_t>(kBytes, 0x3c), filled);
  EXPECT_PTO_OK(ptoStreamDestroy(stream));
}

TEST(RuntimeMemory, AsyncCopiesValidateRangesAtTheCall) {
  ptoStream stream = nullptr;
  ASSERT_PTO_OK(ptoStreamCreate(&stream));
  DeviceBuffer device(64);
  std::vector<uint8_t> host(128);
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoMemcpyAsync(device.get(), host.data(), 128,
                                                    PTO_MEMCPY_HOST_TO_DEVICE, stream));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoMemsetAsync(host.data(), 0, 64, stream));
  EXPECT_PTO_OK(ptoStreamSynchronize(stream));
  EXPECT_PTO_OK(ptoStreamDestroy(stream));
}

}  // namespace

// As cudaFree: memory goes back to the device only after the work queued on it.
TEST(RuntimeMemory, FreeWaitsForWorkQueuedOnTheDevice) {
  void* ptr = nullptr;
  ASSERT_PTO_OK(ptoMalloc(&ptr, 1 << 20));
  Stream stream;
  Latch latch;
  ASSERT_PTO_OK(ptoLaunchHostFunc(stream.get(), &waitOnLatch, &latch));
  ASSERT_PTO_OK(ptoMemsetAsync(ptr, 7, 1 << 20, stream.get()));
  std::atomic<bool> freed{false};
  std::thread freeing([&] {
    EXPECT_PTO_OK(ptoFree(ptr));
    freed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const bool freed_while_queued = freed;
  latch.open();
  freeing.join();
  EXPECT_FALSE(freed_while_queued);
  EXPECT_TRUE(freed);
  EXPECT_PTO_OK(ptoStreamSynchronize(stream.get()));
}

// --- Strict mode (PTO_SIM_STRICT=1) ---------------------------------------

namespace {

using pto::rt::sim::DeviceMemory;
using testing::ExitedWithCode;
using testing::KilledBySignal;

// The driver reads PTO_SIM_STRICT once, at its start, so each check of the mode
// runs in a fresh process: a "threadsafe" death test re-executes this binary for
// the one test, and the statement sets the variable before its first runtime call.
void useFreshProcesses() { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
void startStrictDriver() { setenv("PTO_SIM_STRICT", "1", 1); }

// How a host access to closed device memory ends: SIGSEGV, or under ASan and TSan,
// which catch the signal, their report of it and their failing exit code.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
bool faulted(int status) { return WIFEXITED(status) && WEXITSTATUS(status) != 0; }
const std::string kFaultReport = "(.|\n)*SEGV on unknown address(.|\n)*";
#else
bool faulted(int status) { return KilledBySignal(SIGSEGV)(status); }
const std::string kFaultReport;
#endif

uint8_t hostRead(const void* ptr) { return *static_cast<const volatile uint8_t*>(ptr); }
void hostWrite(void* ptr, uint8_t value) { *static_cast<volatile uint8_t*>(ptr) = value; }

// A host function reading the first byte of the device memory it is given.
const char* readHostFn(void* device) {
  std::fprintf(stderr, "host function read %#x\n", hostRead(device));
  return nullptr;
}

const char* slowHostFn(void* flag) {
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  *static_cast<bool*>(flag) = true;
  return nullptr;
}

// Launches PTO-AS `text` on the default stream with `buffers` (sizes `bytes`).
// (Vectors, not braced lists: these calls sit inside EXPECT_EXIT's arguments.)
ptoError launchText(const char* text, const std::vector<void*>& addresses, const std::vector<uint64_t>& sizes) {
  ptoProgram program = nullptr;
  if (ptoError s = ptoProgramLoad(&program, text); s != PTO_SUCCESS) return s;
  const ptoError status = ptoProgramLaunch(program, nullptr, addresses.data(), sizes.data(), addresses.size(), nullptr);
  ptoProgramRelease(program);
  return status;
}

void* deviceFilledWith(int value, size_t bytes);

// A gather whose index 9 is out of bounds for its 5-element input: it fails when it runs.
ptoError launchFailingGather() {
  void* in = deviceFilledWith(0, 20);
  void* out = deviceFilledWith(0, 12);
  void* index = deviceFilledWith(0, 24);
  const int64_t indices[3] = {4, 9, 0};
  ptoMemcpy(index, indices, sizeof indices, PTO_MEMCPY_HOST_TO_DEVICE);
  return launchText("buffer %0 output 12\nbuffer %1 input 20\nbuffer %2 input 24\n"
                    "tgather %0:f32[3;1]@0, %1:f32[5;1]@0, %2:i64[3;1]@0 axis=0 wrap=0\n",
                    {out, in, index}, {12, 20, 24});
}

void* deviceFilledWith(int value, size_t bytes) {
  void* device = nullptr;
  if (ptoMalloc(&device, bytes) != PTO_SUCCESS || ptoMemset(device, value, bytes) != PTO_SUCCESS) {
    std::fprintf(stderr, "setup failed: %s\n", ptoGetRecentErrMsg());
    std::exit(2);
  }
  return device;
}

}  // namespace

TEST(RuntimeStrictMode, HostAccessToDeviceMemoryDiesWhileACopyOfItWorks) {
  useFreshProcesses();
  // Nothing after the copy's line: the host's read is what died.
  EXPECT_EXIT(
      {
        startStrictDriver();
        void* device = deviceFilledWith(0x5a, 256);
        uint8_t copied[256] = {};
        ptoMemcpy(copied, device, sizeof copied, PTO_MEMCPY_DEVICE_TO_HOST);
        std::fprintf(stderr, "copied %#x %#x\n", copied[0], copied[255]);
        std::fprintf(stderr, "host read %#x\n", hostRead(device));
      },
      faulted, "copied 0x5a 0x5a\n" + kFaultReport + "$");
  EXPECT_EXIT(
      {
        startStrictDriver();
        void* device = deviceFilledWith(0, 256);
        std::fprintf(stderr, "writing\n");
        hostWrite(device, 1);
        std::fprintf(stderr, "host wrote\n");
      },
      faulted, "writing\n" + kFaultReport + "$");
}

// A host function is user code on the stream: it runs with device memory closed.
// A program is the device's own work: it reads device memory (and, on the
// simulated device, writes the host memory bound to it).
TEST(RuntimeStrictMode, ProgramsReadDeviceMemoryHostFunctionsDie) {
  useFreshProcesses();
  EXPECT_EXIT(
      {
        startStrictDriver();
        void* device = deviceFilledWith(0x5a, 256);
        uint8_t seen[256] = {};
        launchText("buffer %0 output 256\nbuffer %1 input 256\ntmov %0:u8[256;1]@0, %1:u8[256;1]@0\n",
                   std::vector<void*>({seen, device}), std::vector<uint64_t>({256, 256}));
        std::fprintf(stderr, "program read %#x\n", seen[0]);
        ptoLaunchHostFunc(nullptr, &readHostFn, device);
        ptoDeviceSynchronize();
      },
      faulted, "program read 0x5a\n" + kFaultReport + "$");
}

// As with CUDA_LAUNCH_BLOCKING=1: a launch returns once its stream ran it, and a
// failure still stays on the stream until a synchronize reports it.
TEST(RuntimeStrictMode, LaunchesReturnOnceRunAndErrorsStaySticky) {
  useFreshProcesses();
  EXPECT_EXIT(
      {
        startStrictDriver();
        bool ran = false;
        ptoLaunchHostFunc(nullptr, &slowHostFn, &ran);
        std::fprintf(stderr, "ran before the launch returned: %d\n", ran);
        const ptoError launched = launchFailingGather();
        std::fprintf(stderr, "failing launch: %s\n", ptoGetErrorName(launched));
        const ptoError first = ptoStreamSynchronize(nullptr);
        std::fprintf(stderr, "synchronize: %s (%s)\n", ptoGetErrorName(first), ptoGetRecentErrMsg());
        std::fprintf(stderr, "again: %s\n", ptoGetErrorName(ptoStreamSynchronize(nullptr)));
        std::exit(0);
      },
      ExitedWithCode(0),
      "ran before the launch returned: 1\n"
      "failing launch: PTO_SUCCESS\n"
      "synchronize: PTO_ERROR_LAUNCH_FAILED \\(asynchronous tgather failed on pto:0: .*index 9 is out of bounds.*\\)\n"
      "again: PTO_SUCCESS\n$");
}

// What code above the runtime asks before it touches device memory from the host.
TEST(RuntimeStrictMode, TheDeviceSaysHostCodeCannotReachItsMemory) {
  useFreshProcesses();
  EXPECT_EXIT(
      {
        startStrictDriver();
        int64_t access = -1;
        const ptoError status = ptoDeviceGetAttribute(&access, PTO_DEVICE_ATTR_HOST_ACCESS_TO_DEVICE_MEMORY, 0);
        std::fprintf(stderr, "%s %lld\n", ptoGetErrorName(status), static_cast<long long>(access));
        std::exit(0);
      },
      ExitedWithCode(0), "PTO_SUCCESS 0\n$");
}

TEST(RuntimeStrictMode, AValueOtherThan0Or1IsRefusedNamingTheVariable) {
  useFreshProcesses();
  EXPECT_EXIT(
      {
        setenv("PTO_SIM_STRICT", "yes", 1);
        const ptoError status = ptoInit();
        std::fprintf(stderr, "%s: %s\n", ptoGetErrorName(status), ptoGetRecentErrMsg());
        std::exit(0);
      },
      ExitedWithCode(0), "PTO_ERROR_NOT_INITIALIZED: sim driver: PTO_SIM_STRICT='yes' is not 0 or 1\n$");
}

// Opens nest and overlap across threads; memory allocated while open is open.
TEST(RuntimeStrictMode, DeviceMemoryIsOpenWhileAnyOpenLasts) {
  useFreshProcesses();
  DeviceMemory memory(/*strict=*/true);
  void* first = memory.allocate(4096, 64);
  void* second = nullptr;
  {
    const DeviceMemory::Open outer(memory);
    std::thread([&] {
      const DeviceMemory::Open inner(memory);
      hostWrite(first, 1);
    }).join();
    EXPECT_EQ(1, hostRead(first));  // the outer open still lasts
    second = memory.allocate(64, 64);
    hostWrite(second, 2);
  }
  EXPECT_EXIT(hostRead(first), faulted, kFaultReport);
  EXPECT_EXIT(hostWrite(second, 3), faulted, kFaultReport);
  {
    const DeviceMemory::Open again(memory);
    EXPECT_EQ(1, hostRead(first));
    EXPECT_EQ(2, hostRead(second));
  }
  memory.release(first);
  memory.release(second);
}

TEST(RuntimeStrictMode, OutsideStrictModeDeviceMemoryIsPlainHostMemory) {
  DeviceMemory memory(/*strict=*/false);
  auto* bytes = static_cast<uint8_t*>(memory.allocate(128, 64));
  EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(bytes) % 64);
  bytes[127] = 7;
  EXPECT_EQ(7, bytes[127]);
  memory.release(bytes);
}
