// The memory of the simulated device: the host memory behind each device
// allocation.
//
// In strict mode (PTO_SIM_STRICT=1) each allocation is its own page-aligned
// mapping with no access rights (PROT_NONE) except while the driver itself
// executes, as OpenReg guards its device memory: host code that reads or
// writes device memory faults at once instead of silently working. The driver
// opens all of it (DeviceMemory::Open) around its own execution; opens nest and
// overlap across threads, and memory closes again when the last one ends. As
// every enqueue then waits for its command (sim_stream.h), the thread that
// submitted it never runs while memory is open; another host thread may, and
// its accesses at such a moment go unnoticed.
// Outside strict mode memory is plain aligned heap memory and opening is free.
#pragma once

#include <cstddef>
#include <mutex>
#include <unordered_map>

namespace pto::rt::sim {

class DeviceMemory {
 public:
  explicit DeviceMemory(bool strict) : strict_(strict) {}

  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  bool strict() const { return strict_; }

  // `bytes` (a multiple of `alignment`) of device memory, or nullptr when the
  // host cannot back them. Open if memory is open now.
  void* allocate(size_t bytes, size_t alignment);
  void release(void* ptr);

  // While one exists, on any thread, device memory is readable and writable.
  class Open {
   public:
    explicit Open(DeviceMemory& memory) : memory_(memory) {
      if (memory_.strict_) memory_.open();
    }
    ~Open() {
      if (memory_.strict_) memory_.close();
    }
    Open(const Open&) = delete;
    Open& operator=(const Open&) = delete;

   private:
    DeviceMemory& memory_;
  };

 private:
  void open();
  void close();
  void protectAllLocked(int protection);

  const bool strict_;
  std::mutex mutex_;  // strict mode: guards the two below
  size_t open_count_ = 0;
  std::unordered_map<void*, size_t> mappings_;  // strict mode: address -> mapped bytes
};

}  // namespace pto::rt::sim
