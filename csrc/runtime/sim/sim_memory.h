// The memory of the simulated device: the host memory behind each device
// allocation.
//
// In strict mode (PTO_SIM_STRICT=1) device memory is mapped with no access
// rights (PROT_NONE) except while the driver itself
// executes, as OpenReg guards its device memory: host code that reads or
// writes device memory faults at once instead of silently working. The driver
// opens all of it (DeviceMemory::Open) around its own execution; opens nest and
// overlap across threads, and memory closes again when the last one ends. As
// every enqueue then waits for its command (sim_stream.h), the thread that
// submitted it never runs while memory is open; another host thread may, and
// its accesses at such a moment go unnoticed.
// Outside strict mode it stays readable and writable.
//
// Every allocation is a page mapping of its own, private until it is first
// shared with another process (share): it is then moved, at the same address and
// with its contents, onto a memfd the other process maps (map). Opens are counted
// in both modes, so that a move waits for the commands running on device memory
// and holds new ones back until it is done.
#pragma once

#include <condition_variable>
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

  // A descriptor of the memfd behind the allocation at `base` (made at the first
  // call, closed by release), or -1 with errno set. Its size is the mapping's:
  // the allocation's bytes rounded up to the page.
  int share(void* base);
  // `bytes` of another process's shared allocation, from a descriptor of its memfd
  // (the caller keeps and closes it), or nullptr with errno set. Released by release.
  void* map(int fd, size_t bytes);

  // While one exists, on any thread, device memory is readable and writable.
  class Open {
   public:
    explicit Open(DeviceMemory& memory) : memory_(memory) { memory_.open(); }
    ~Open() { memory_.close(); }
    Open(const Open&) = delete;
    Open& operator=(const Open&) = delete;

   private:
    DeviceMemory& memory_;
  };

 private:
  void open();
  void close();
  void protectAllLocked(int protection);

  struct Mapping {
    size_t bytes = 0;  // mapped: a multiple of the page size
    int fd = -1;       // the memfd behind a shared allocation of this process, else -1
  };

  int protection() const;  // what a mapping has now (mutex_ held)

  const bool strict_;
  std::mutex mutex_;  // guards open_count_ and mappings_
  std::condition_variable closed_;  // open_count_ fell to 0
  size_t open_count_ = 0;
  std::unordered_map<void*, Mapping> mappings_;
};

}  // namespace pto::rt::sim
