// Devices of the PTO runtime: driver selection, device count, the per-thread
// current device, device attributes, default streams and error names.
//
// The sim configuration (PTO_SIM_DEVICES, PTO_SIM_MEMORY) is read once per
// process at the first runtime call, so these tests check what the C API
// promises for whatever configuration the process started with.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/pto_runtime.h"
#include "runtime/sim/sim_faults.h"
#include "runtime_test_support.h"

namespace {

using namespace pto_test;

int32_t currentDevice() {
  int32_t device = -1;
  EXPECT_PTO_OK(ptoGetDevice(&device));
  return device;
}

// --- Driver ---------------------------------------------------------------

TEST(RuntimeDevice, InitSucceedsAndIsIdempotent) {
  EXPECT_PTO_OK(ptoInit());
  EXPECT_PTO_OK(ptoInit());
}

TEST(RuntimeDevice, DriverNameIsSim) { EXPECT_STREQ("sim", ptoGetDriverName()); }

// --- Device count ---------------------------------------------------------

TEST(RuntimeDevice, DeviceCountIsAtLeastOne) { EXPECT_GE(deviceCount(), 1); }

TEST(RuntimeDevice, DeviceCountDefaultsToTwoWithoutEnvironment) {
  if (std::getenv("PTO_SIM_DEVICES") != nullptr) {
    GTEST_SKIP() << "PTO_SIM_DEVICES is set for this process";
  }
  EXPECT_EQ(2, deviceCount());
}

TEST(RuntimeDevice, DeviceCountRejectsNullOutput) {
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoGetDeviceCount(nullptr));
  EXPECT_NE(std::string(ptoGetRecentErrMsg()).find("ptoGetDeviceCount"), std::string::npos);
}

// --- Current device -------------------------------------------------------

TEST(RuntimeDevice, CurrentDeviceDefaultsToZero) { EXPECT_EQ(0, currentDevice()); }

TEST(RuntimeDevice, SetDeviceThenGetDeviceReturnsIt) {
  ScopedDevice guard;
  for (int32_t device = deviceCount() - 1; device >= 0; --device) {
    ASSERT_PTO_OK(ptoSetDevice(device));
    EXPECT_EQ(device, currentDevice());
  }
}

TEST(RuntimeDevice, GetDeviceRejectsNullOutput) {
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoGetDevice(nullptr));
}

TEST(RuntimeDevice, CurrentDeviceIsThreadLocal) {
  if (deviceCount() < 2) GTEST_SKIP() << "needs two devices";
  ScopedDevice guard;

  // A device set on another thread does not leak into this one...
  int32_t seen_by_worker = -1;
  std::thread worker([&] {
    ptoSetDevice(1);
    ptoGetDevice(&seen_by_worker);
  });
  worker.join();
  EXPECT_EQ(1, seen_by_worker);
  EXPECT_EQ(0, currentDevice());

  // ...and a device set here does not leak into a new thread.
  ASSERT_PTO_OK(ptoSetDevice(1));
  int32_t seen_by_fresh_thread = -1;
  std::thread fresh([&] { ptoGetDevice(&seen_by_fresh_thread); });
  fresh.join();
  EXPECT_EQ(0, seen_by_fresh_thread);
  EXPECT_EQ(1, currentDevice());
}

TEST(RuntimeDevice, SetDeviceRejectsIndexPastTheLastDevice) {
  const int32_t count = deviceCount();
  EXPECT_EQ(PTO_ERROR_INVALID_DEVICE, ptoSetDevice(count));
  const std::string message = ptoGetRecentErrMsg();
  EXPECT_NE(message.find("invalid device index " + std::to_string(count)), std::string::npos)
      << message;
  EXPECT_NE(message.find("sim"), std::string::npos) << message;
  EXPECT_EQ(0, currentDevice()) << "a failed ptoSetDevice must not change the current device";
}

TEST(RuntimeDevice, SetDeviceRejectsNegativeIndex) {
  EXPECT_EQ(PTO_ERROR_INVALID_DEVICE, ptoSetDevice(-1));
  EXPECT_NE(std::string(ptoGetRecentErrMsg()).find("invalid device index -1"), std::string::npos)
      << ptoGetRecentErrMsg();
  EXPECT_EQ(0, currentDevice());
}

// --- Attributes -----------------------------------------------------------

int64_t attribute(ptoDeviceAttribute which, int32_t device = 0) {
  int64_t value = -1;
  EXPECT_PTO_OK(ptoDeviceGetAttribute(&value, which, device));
  return value;
}

// What the simulated device says it is: the host's cores, the PTO ISA's 192 KiB
// Unified Buffer, host memory that programs can address, device memory that host
// code can (outside strict mode: runtime_memory_tests.cpp), both wide types.
TEST(RuntimeDevice, TheSimulatedDeviceDescribesItself) {
  for (int32_t device = 0; device < deviceCount(); ++device) {
    EXPECT_GE(attribute(PTO_DEVICE_ATTR_CORE_COUNT, device), 1) << device;
    EXPECT_EQ(196608, attribute(PTO_DEVICE_ATTR_UNIFIED_BUFFER_BYTES, device)) << device;
    EXPECT_EQ(1, attribute(PTO_DEVICE_ATTR_PAGEABLE_MEMORY_ACCESS, device)) << device;
    EXPECT_EQ(1, attribute(PTO_DEVICE_ATTR_HOST_ACCESS_TO_DEVICE_MEMORY, device)) << device;
    EXPECT_EQ(1, attribute(PTO_DEVICE_ATTR_BFLOAT16, device)) << device;
    EXPECT_EQ(1, attribute(PTO_DEVICE_ATTR_FLOAT64, device)) << device;
  }
}

TEST(RuntimeDevice, ItRunsVersionOneOfThePtoIsa) {
  EXPECT_EQ(1, attribute(PTO_DEVICE_ATTR_ISA_VERSION_MAJOR));
  EXPECT_EQ(0, attribute(PTO_DEVICE_ATTR_ISA_VERSION_MINOR));
}

// Work on a stream of device 0 counts as device 0's busy time, never device 1's.
TEST(RuntimeDevice, BusyTimeCountsTheWorkOfTheDevicesStreams) {
  ASSERT_GE(deviceCount(), 2);
  ASSERT_PTO_OK(ptoSetDevice(1));
  ASSERT_PTO_OK(ptoDeviceSynchronize());  // nothing left running there from earlier tests
  const int64_t before = attribute(PTO_DEVICE_ATTR_BUSY_NANOSECONDS, 0);
  const int64_t other_before = attribute(PTO_DEVICE_ATTR_BUSY_NANOSECONDS, 1);
  ASSERT_PTO_OK(ptoSetDevice(0));
  void* ptr = nullptr;
  constexpr size_t kBytes = size_t{64} << 20;
  ASSERT_PTO_OK(ptoMalloc(&ptr, kBytes));
  for (int i = 0; i < 4; ++i) ASSERT_PTO_OK(ptoMemsetAsync(ptr, i, kBytes, nullptr));
  ASSERT_PTO_OK(ptoDeviceSynchronize());
  EXPECT_GT(attribute(PTO_DEVICE_ATTR_BUSY_NANOSECONDS, 0), before);
  EXPECT_EQ(other_before, attribute(PTO_DEVICE_ATTR_BUSY_NANOSECONDS, 1));
  ASSERT_PTO_OK(ptoFree(ptr));
}

TEST(RuntimeDevice, TotalMemoryIsTheDevicesCapacity) {
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_PTO_OK(ptoMemGetInfo(&free_bytes, &total_bytes));
  EXPECT_EQ(static_cast<int64_t>(total_bytes), attribute(PTO_DEVICE_ATTR_TOTAL_MEMORY_BYTES));
  if (std::getenv("PTO_SIM_MEMORY") == nullptr) {
    EXPECT_EQ(int64_t{16} << 30, attribute(PTO_DEVICE_ATTR_TOTAL_MEMORY_BYTES)) << "PTO_SIM_MEMORY's default";
  }
}

TEST(RuntimeDevice, GetAttributeRejectsAnInvalidDeviceANullValueAndAnUnknownAttribute) {
  int64_t value = -1;
  EXPECT_EQ(PTO_ERROR_INVALID_DEVICE, ptoDeviceGetAttribute(&value, PTO_DEVICE_ATTR_CORE_COUNT, deviceCount()));
  EXPECT_EQ(PTO_ERROR_INVALID_DEVICE, ptoDeviceGetAttribute(&value, PTO_DEVICE_ATTR_CORE_COUNT, -1));
  EXPECT_EQ(-1, value);
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoDeviceGetAttribute(nullptr, PTO_DEVICE_ATTR_CORE_COUNT, 0));
  EXPECT_NE(std::string(ptoGetRecentErrMsg()).find("ptoDeviceGetAttribute"), std::string::npos)
      << ptoGetRecentErrMsg();
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoDeviceGetAttribute(&value, static_cast<ptoDeviceAttribute>(99), 0));
  EXPECT_NE(std::string(ptoGetRecentErrMsg()).find("99"), std::string::npos) << ptoGetRecentErrMsg();
}

// --- Default streams ------------------------------------------------------

TEST(RuntimeDevice, EachDeviceHasItsOwnDefaultStream) {
  const int32_t count = deviceCount();
  std::set<ptoStream> streams;
  for (int32_t device = 0; device < count; ++device) {
    ptoStream stream = nullptr;
    ASSERT_PTO_OK(ptoGetDefaultStream(device, &stream));
    ASSERT_NE(nullptr, stream);
    int32_t owner = -1;
    ASSERT_PTO_OK(ptoStreamGetDevice(stream, &owner));
    EXPECT_EQ(device, owner);
    streams.insert(stream);
  }
  EXPECT_EQ(static_cast<size_t>(count), streams.size());
}

TEST(RuntimeDevice, DefaultStreamIsStableAcrossCalls) {
  ptoStream first = nullptr, second = nullptr;
  ASSERT_PTO_OK(ptoGetDefaultStream(0, &first));
  ASSERT_PTO_OK(ptoGetDefaultStream(0, &second));
  EXPECT_EQ(first, second);
}

TEST(RuntimeDevice, NullStreamMeansTheCurrentDevicesDefaultStream) {
  if (deviceCount() < 2) GTEST_SKIP() << "needs two devices";
  ScopedDevice guard;
  ASSERT_PTO_OK(ptoSetDevice(1));
  int32_t device = -1;
  ASSERT_PTO_OK(ptoStreamGetDevice(nullptr, &device));
  EXPECT_EQ(1, device);
}

TEST(RuntimeDevice, GetDefaultStreamRejectsInvalidDevice) {
  ptoStream stream = nullptr;
  EXPECT_EQ(PTO_ERROR_INVALID_DEVICE, ptoGetDefaultStream(deviceCount(), &stream));
  EXPECT_EQ(PTO_ERROR_INVALID_DEVICE, ptoGetDefaultStream(-1, &stream));
  EXPECT_EQ(PTO_ERROR_INVALID_VALUE, ptoGetDefaultStream(0, nullptr));
}

TEST(RuntimeDevice, DeviceSynchronizeOfAnIdleDeviceSucceeds) {
  EXPECT_PTO_OK(ptoDeviceSynchronize());
}

// --- Errors ---------------------------------------------------------------

TEST(RuntimeDevice, ErrorNamesMatchTheEnumerators) {
  EXPECT_STREQ("PTO_SUCCESS", ptoGetErrorName(PTO_SUCCESS));
  EXPECT_STREQ("PTO_ERROR_INVALID_VALUE", ptoGetErrorName(PTO_ERROR_INVALID_VALUE));
  EXPECT_STREQ("PTO_ERROR_INVALID_DEVICE", ptoGetErrorName(PTO_ERROR_INVALID_DEVICE));
  EXPECT_STREQ("PTO_ERROR_OUT_OF_MEMORY", ptoGetErrorName(PTO_ERROR_OUT_OF_MEMORY));
  EXPECT_STREQ("PTO_ERROR_INVALID_HANDLE", ptoGetErrorName(PTO_ERROR_INVALID_HANDLE));
  EXPECT_STREQ("PTO_ERROR_NOT_READY", ptoGetErrorName(PTO_ERROR_NOT_READY));
  EXPECT_STREQ("PTO_ERROR_LAUNCH_FAILED", ptoGetErrorName(PTO_ERROR_LAUNCH_FAILED));
  EXPECT_STREQ("PTO_ERROR_NOT_INITIALIZED", ptoGetErrorName(PTO_ERROR_NOT_INITIALIZED));
  EXPECT_STREQ("PTO_ERROR_NOT_SUPPORTED", ptoGetErrorName(PTO_ERROR_NOT_SUPPORTED));
}

TEST(RuntimeDevice, ErrorNameOfAnUnknownCodeIsUnknown) {
  EXPECT_STREQ("PTO_ERROR_UNKNOWN", ptoGetErrorName(static_cast<ptoError>(99)));
  EXPECT_STREQ("PTO_ERROR_UNKNOWN", ptoGetErrorName(static_cast<ptoError>(-1)));
}

TEST(RuntimeDevice, RecentErrorMessageIsPerThread) {
  ASSERT_EQ(PTO_ERROR_INVALID_DEVICE, ptoSetDevice(-7));
  const std::string mine = ptoGetRecentErrMsg();

  std::string other_before, other_after;
  std::thread other([&] {
    other_before = ptoGetRecentErrMsg();
    ptoSetDevice(-8);
    other_after = ptoGetRecentErrMsg();
  });
  other.join();

  EXPECT_EQ("", other_before) << "a new thread starts with no recent error";
  EXPECT_NE(other_after.find("-8"), std::string::npos) << other_after;
  EXPECT_EQ(mine, ptoGetRecentErrMsg()) << "another thread's failure must not overwrite ours";
}

}  // namespace

// --- Fault injection (PTO_SIM_FAULTS) -------------------------------------

TEST(RuntimeFaults, APlanNamesTheCallsToFailBySite) {
  using pto::rt::sim::FaultSite;
  const auto plan = pto::rt::sim::parseFaultPlan("launch:3,malloc:2,malloc:5");
  pto::rt::sim::FaultInjector faults(plan);
  std::vector<uint64_t> kernel_strikes, malloc_strikes;
  for (int call = 0; call < 6; ++call) {
    kernel_strikes.push_back(faults.strike(FaultSite::kLaunch));
    malloc_strikes.push_back(faults.strike(FaultSite::kMalloc));
    EXPECT_EQ(0u, faults.strike(FaultSite::kMemcpy));
  }
  EXPECT_EQ((std::vector<uint64_t>{0, 0, 3, 0, 0, 0}), kernel_strikes);
  EXPECT_EQ((std::vector<uint64_t>{0, 2, 0, 0, 5, 0}), malloc_strikes);
  EXPECT_EQ("fault injected by PTO_SIM_FAULTS (launch:3)",
            pto::rt::sim::describeFault(FaultSite::kLaunch, 3));
}

TEST(RuntimeFaults, AMalformedPlanIsRefusedNamingTheEntry) {
  for (const char* text : {"launch", "launch:0", "launch:x", "disk:3", "memset:1", "malloc:-1", ":4"}) {
    try {
      pto::rt::sim::parseFaultPlan(text);
      ADD_FAILURE() << text << " was accepted";
    } catch (const std::invalid_argument& error) {
      EXPECT_TRUE(contains(error.what(), "PTO_SIM_FAULTS")) << error.what();
    }
  }
}
