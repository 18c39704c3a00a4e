// Device memory shared between processes: ptoIpcGetMemHandle, ptoIpcOpenMemHandle
// and ptoIpcCloseMemHandle, their argument checks, the lifetime of a handle, the
// capacity accounting of opened memory, and strict mode over it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/pto_runtime.h"
#include "runtime/sim/sim_memory.h"
#include "runtime_test_support.h"

namespace {

using namespace pto_test;

size_t freeBytes() {
  size_t free_bytes = 0, total_bytes = 0;
  EXPECT_PTO_OK(ptoMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

void* allocate(size_t bytes) {
  void* ptr = nullptr;
  EXPECT_PTO_OK(ptoMalloc(&ptr, bytes));
  return ptr;
}

ptoIpcMemHandle handleOf(void* ptr) {
  ptoIpcMemHandle handle{};
  EXPECT_PTO_OK(ptoIpcGetMemHandle(&handle, ptr));
  return handle;
}

std::vector<uint8_t> read(const void* device, size_t bytes) {
  std::vector<uint8_t> host(bytes);
  EXPECT_PTO_OK(ptoMemcpy(host.data(), device, bytes, PTO_MEMCPY_DEVICE_TO_HOST));
  return host;
}

void write(void* device, const std::vector<uint8_t>& host) {
  EXPECT_PTO_OK(ptoMemcpy(device, host.data(), host.size(), PTO_MEMCPY_HOST_TO_DEVICE));
}

std::vector<uint8_t> pattern(size_t bytes, uint8_t seed) {
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(seed + i * 7);
  return data;
}

std::string failure(ptoError status) { return std::string(ptoGetErrorName(status)) + ": " + ptoGetRecentErrMsg(); }

}  // namespace

TEST(RuntimeIpc, GetMemHandleRejectsNullHostAndInteriorPointers) {
  void* device = allocate(256);
  ptoIpcMemHandle handle{};
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoIpcGetMemHandle(nullptr, device));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "handle is null")) << ptoGetRecentErrMsg();
  int host = 0;
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoIpcGetMemHandle(&handle, &host));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "is not device memory")) << ptoGetRecentErrMsg();
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoIpcGetMemHandle(&handle, nullptr));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoIpcGetMemHandle(&handle, static_cast<char*>(device) + 64));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "pass the allocation's base")) << ptoGetRecentErrMsg();
  EXPECT_PTO_OK(ptoFree(device));
}

TEST(RuntimeIpc, OpenRejectsNullOutputFlagsAndBytesNoHandleHolds) {
  void* device = allocate(256);
  const ptoIpcMemHandle handle = handleOf(device);
  void* opened = &opened;
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoIpcOpenMemHandle(nullptr, handle, 0));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoIpcOpenMemHandle(&opened, handle, 1));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "flags must be 0, got 1")) << ptoGetRecentErrMsg();
  EXPECT_EQ(nullptr, opened);
  ptoIpcMemHandle garbage{};
  std::memset(garbage.reserved, 0x5a, sizeof garbage.reserved);
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoIpcOpenMemHandle(&opened, garbage, 0));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "not a handle ptoIpcGetMemHandle made")) << ptoGetRecentErrMsg();
  EXPECT_PTO_OK(ptoFree(device));
}

TEST(RuntimeIpc, SharingKeepsTheContentsAndTheAllocationWorking) {
  void* device = allocate(4096);
  write(device, pattern(4096, 3));
  const ptoIpcMemHandle first = handleOf(device);
  EXPECT_EQ(pattern(4096, 3), read(device, 4096));
  const ptoIpcMemHandle again = handleOf(device);
  EXPECT_EQ(0, std::memcmp(&first, &again, sizeof first)) << "one allocation, one handle";
  EXPECT_PTO_OK(ptoMemset(device, 0x11, 4096));
  EXPECT_EQ(std::vector<uint8_t>(4096, 0x11), read(device, 4096));
  EXPECT_PTO_OK(ptoFree(device));
}

// Each open is a mapping of its own: the same memory at another address.
TEST(RuntimeIpc, AnOpenedHandleIsTheSameMemoryAtAnotherAddress) {
  void* device = allocate(3000);
  write(device, pattern(3000, 1));
  void* opened = nullptr;
  ASSERT_PTO_OK(ptoIpcOpenMemHandle(&opened, handleOf(device), 0));
  EXPECT_NE(device, opened);
  EXPECT_EQ(pattern(3000, 1), read(opened, 3000));
  write(opened, pattern(3000, 9));
  EXPECT_EQ(pattern(3000, 9), read(device, 3000));

  ptoPointerAttributes attributes{};
  EXPECT_PTO_OK(ptoPointerGetAttributes(static_cast<char*>(opened) + 10, &attributes));
  EXPECT_EQ(PTO_MEMORY_DEVICE, attributes.type);
  EXPECT_EQ(0, attributes.device);
  EXPECT_EQ(opened, attributes.base);
  EXPECT_EQ(3008u, attributes.size);  // the allocation's size, rounded as ptoMalloc rounds it
  EXPECT_PTO_OK(ptoIpcCloseMemHandle(opened));
  EXPECT_PTO_OK(ptoFree(device));
}

TEST(RuntimeIpc, OpenedMemoryIsNotChargedToTheOpeningDevice) {
  void* device = allocate(1 << 20);
  const size_t before = freeBytes();
  void* opened = nullptr;
  ASSERT_PTO_OK(ptoIpcOpenMemHandle(&opened, handleOf(device), 0));
  EXPECT_EQ(before, freeBytes());
  EXPECT_PTO_OK(ptoIpcCloseMemHandle(opened));
  EXPECT_EQ(before, freeBytes());
  EXPECT_PTO_OK(ptoFree(device));
  EXPECT_EQ(before + (1 << 20), freeBytes());
}

TEST(RuntimeIpc, OpenedMemoryIsClosedNotFreedAndOnlyOnce) {
  void* device = allocate(256);
  void* opened = nullptr;
  ASSERT_PTO_OK(ptoIpcOpenMemHandle(&opened, handleOf(device), 0));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoFree(opened));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "close it with ptoIpcCloseMemHandle")) << ptoGetRecentErrMsg();
  ptoIpcMemHandle reshared{};
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoIpcGetMemHandle(&reshared, opened));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "only the process that allocated memory shares it")) << ptoGetRecentErrMsg();
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoIpcCloseMemHandle(device));
  EXPECT_TRUE(contains(ptoGetRecentErrMsg(), "is not memory opened by ptoIpcOpenMemHandle")) << ptoGetRecentErrMsg();
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoIpcCloseMemHandle(nullptr));
  EXPECT_PTO_OK(ptoIpcCloseMemHandle(opened));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoIpcCloseMemHandle(opened));
  EXPECT_PTO_OK(ptoFree(device));
}

const char* closeOpened(void* opened) {
  return ptoIpcCloseMemHandle(opened) == PTO_SUCCESS ? nullptr : "ptoIpcCloseMemHandle failed";
}

// As a collective's keep-alive dropping received memory in a host function.
TEST(RuntimeIpc, AHostFunctionClosesOpenedMemoryOnItsStream) {
  void* device = allocate(256);
  void* opened = nullptr;
  ASSERT_PTO_OK(ptoIpcOpenMemHandle(&opened, handleOf(device), 0));
  EXPECT_PTO_OK(ptoMemset(opened, 3, 256));
  EXPECT_PTO_OK(ptoLaunchHostFunc(nullptr, &closeOpened, opened));
  EXPECT_PTO_OK(ptoDeviceSynchronize());
  ptoPointerAttributes attributes{};
  EXPECT_PTO_OK(ptoPointerGetAttributes(opened, &attributes));
  EXPECT_EQ(PTO_MEMORY_UNREGISTERED, attributes.type);
  EXPECT_EQ(std::vector<uint8_t>(256, 3), read(device, 256));
  EXPECT_PTO_OK(ptoFree(device));
}

TEST(RuntimeIpc, AFreedAllocationsHandleNoLongerOpens) {
  void* device = allocate(256);
  const ptoIpcMemHandle handle = handleOf(device);
  EXPECT_PTO_OK(ptoFree(device));
  void* reused = allocate(256);  // may take the freed descriptor's number: the handle must not open it
  handleOf(reused);
  void* opened = nullptr;
  EXPECT_EQ(PTO_ERROR_INVALID_HANDLE, ptoIpcOpenMemHandle(&opened, handle, 0));
  EXPECT_EQ(nullptr, opened);
  EXPECT_PTO_OK(ptoFree(reused));
}

// --- Another process --------------------------------------------------------

namespace {

// Each check runs in a fresh process ("threadsafe" death tests re-execute the
// binary), which forks the consumer before its first runtime call: a child forked
// after the driver started is refused, as CUDA refuses one.
void useFreshProcesses() { GTEST_FLAG_SET(death_test_style, "threadsafe"); }

// How a host access to closed device memory ends: SIGSEGV, or under ASan and TSan,
// which catch the signal, their report of it and their failing exit code.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
bool faulted(int status) { return WIFEXITED(status) && WEXITSTATUS(status) != 0; }
const std::string kFaultReport = "(.|\n)*SEGV on unknown address(.|\n)*";
#else
bool faulted(int status) { return testing::KilledBySignal(SIGSEGV)(status); }
const std::string kFaultReport;
#endif

// The sizes shared in turn: one under a huge page, one over it (mapped on its own
// huge-page boundary, sim_memory.cpp).
const std::vector<size_t> kSharedSizes = {1000, size_t{5} << 20};

// The consumer: for each size, reads a handle from `from_producer`, checks the
// memory holds pattern(bytes, 1), writes pattern(bytes, 2) over it and reports
// a letter on `to_producer` ('o': all went well).
[[noreturn]] void consume(int from_producer, int to_producer) {
  for (size_t bytes : kSharedSizes) {
    ptoIpcMemHandle handle{};
    if (::read(from_producer, &handle, sizeof handle) != static_cast<ssize_t>(sizeof handle)) std::_Exit(3);
    void* opened = nullptr;
    const ptoError status = ptoIpcOpenMemHandle(&opened, handle, 0);
    char verdict = 'o';
    if (status != PTO_SUCCESS) {
      std::fprintf(stderr, "consumer: %s\n", failure(status).c_str());
      verdict = 'e';
    } else if (read(opened, bytes) != pattern(bytes, 1)) {
      verdict = 'x';
    } else {
      write(opened, pattern(bytes, 2));
      if (ptoIpcCloseMemHandle(opened) != PTO_SUCCESS) verdict = 'c';
    }
    if (::write(to_producer, &verdict, 1) != 1) std::_Exit(4);
  }
  std::_Exit(0);
}

// Forks a consumer (before this process's first runtime call), shares device
// memory of each size with it, and prints what it said of each.
void shareWithAnotherProcess() {
  int to_consumer[2], to_producer[2];
  if (pipe(to_consumer) != 0 || pipe(to_producer) != 0) std::exit(2);
  const pid_t consumer = fork();
  if (consumer == 0) consume(to_consumer[0], to_producer[1]);
  for (size_t bytes : kSharedSizes) {
    void* device = allocate(bytes);
    write(device, pattern(bytes, 1));
    const ptoIpcMemHandle handle = handleOf(device);
    char verdict = 'w';
    if (::write(to_consumer[1], &handle, sizeof handle) == static_cast<ssize_t>(sizeof handle)) {
      if (::read(to_producer[0], &verdict, 1) != 1) verdict = 'r';
    }
    if (verdict == 'o' && read(device, bytes) != pattern(bytes, 2)) verdict = 'n';
    ptoFree(device);
    std::fprintf(stderr, "%zu bytes: %c\n", bytes, verdict);
  }
  waitpid(consumer, nullptr, 0);
}

}  // namespace

TEST(RuntimeIpc, AnotherProcessReadsAndWritesTheSharedMemory) {
  useFreshProcesses();
  EXPECT_EXIT(
      {
        shareWithAnotherProcess();
        std::exit(0);
      },
      testing::ExitedWithCode(0), "1000 bytes: o\n5242880 bytes: o\n$");
}

TEST(RuntimeIpc, StrictModeClosesBothProcessesMemoryToTheHost) {
  useFreshProcesses();
  EXPECT_EXIT(
      {
        setenv("PTO_SIM_STRICT", "1", 1);
        shareWithAnotherProcess();
        void* device = allocate(64);
        void* opened = nullptr;
        ptoIpcOpenMemHandle(&opened, handleOf(device), 0);
        std::fprintf(stderr, "host read %d\n", *static_cast<volatile uint8_t*>(opened));
      },
      faulted, "1000 bytes: o\n5242880 bytes: o\n" + kFaultReport + "$");
}

TEST(RuntimeIpc, AHandleOfAnExitedProcessDoesNotOpen) {
  useFreshProcesses();
  EXPECT_EXIT(
      {
        int channel[2];
        if (pipe(channel) != 0) std::exit(2);
        if (fork() == 0) {
          void* device = allocate(256);
          const ptoIpcMemHandle handle = handleOf(device);
          std::_Exit(::write(channel[1], &handle, sizeof handle) == sizeof handle ? 0 : 3);
        }
        ptoIpcMemHandle handle{};
        if (::read(channel[0], &handle, sizeof handle) != sizeof handle) std::exit(4);
        wait(nullptr);
        void* opened = nullptr;
        std::fprintf(stderr, "%s\n", failure(ptoIpcOpenMemHandle(&opened, handle, 0)).c_str());
        std::exit(0);
      },
      testing::ExitedWithCode(0),
      "PTO_ERROR_INVALID_HANDLE: ptoIpcOpenMemHandle: the memory of process [0-9]+ cannot be opened "
      "\\(/proc/[0-9]+/fd/[0-9]+: No such file or directory\\): that process has exited or freed it, or it "
      "belongs to another user\n$");
}

// --- The sim's memory ------------------------------------------------------

TEST(RuntimeIpc, DeviceMemoryMovesOntoItsMemfdWithItsContents) {
  using pto::rt::sim::DeviceMemory;
  DeviceMemory memory(/*strict=*/false);
  auto* bytes = static_cast<uint8_t*>(memory.allocate(8192, 64));
  std::memcpy(bytes, pattern(8192, 5).data(), 8192);
  const int fd = memory.share(bytes);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(fd, memory.share(bytes));
  EXPECT_EQ(0, std::memcmp(bytes, pattern(8192, 5).data(), 8192));
  auto* mapped = static_cast<uint8_t*>(memory.map(fd, 8192));
  ASSERT_NE(nullptr, mapped);
  mapped[100] = 42;
  EXPECT_EQ(42, bytes[100]);
  memory.release(mapped);
  memory.release(bytes);
}
