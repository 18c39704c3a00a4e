#include "sim_memory.h"

#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace pto::rt::sim {
namespace {

constexpr int kOpen = PROT_READ | PROT_WRITE;
constexpr int kClosed = PROT_NONE;

// Opening and closing rewrite one page table entry per page of every touched
// mapping: per 4 KiB page, a few hundred MiB of device memory take milliseconds.
// Mappings of a huge page or more are therefore aligned to 2 MiB and backed by
// transparent huge pages where the host has them, which makes it microseconds.
constexpr size_t kHugePage = size_t{2} << 20;

size_t roundUp(size_t value, size_t alignment) { return (value + alignment - 1) / alignment * alignment; }

// A private anonymous mapping of `bytes` (a multiple of the page size), or MAP_FAILED.
void* mapDeviceMemory(size_t bytes, int protection) {
  constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  if (bytes < kHugePage) return mmap(nullptr, bytes, protection, kFlags, -1, 0);
  if (bytes > SIZE_MAX - kHugePage) return MAP_FAILED;
  // Map a huge page more than asked, then unmap the slack before and after the
  // aligned span.
  void* raw = mmap(nullptr, bytes + kHugePage, protection, kFlags, -1, 0);
  if (raw == MAP_FAILED) return MAP_FAILED;
  const auto start = roundUp(reinterpret_cast<uintptr_t>(raw), kHugePage);
  const size_t head = start - reinterpret_cast<uintptr_t>(raw);
  if (head > 0) munmap(raw, head);
  munmap(reinterpret_cast<void*>(start + bytes), kHugePage - head);
  auto* memory = reinterpret_cast<void*>(start);
  madvise(memory, bytes, MADV_HUGEPAGE);  // a hint: without huge pages it is only slower
  return memory;
}

// A mapping that cannot change its protection leaves strict mode unable to keep
// its promise either way: stop here rather than run on open or closed.
[[noreturn]] void dieOnProtect(void* address, size_t bytes, int error) {
  std::fprintf(stderr, "PTO_SIM_STRICT: mprotect of %zu bytes at %p failed: %s\n", bytes, address,
               std::strerror(error));
  std::abort();
}

// Whether every page of [address, address + bytes) is mapped (mincore fails with
// ENOMEM on a hole).
bool stillMapped(void* address, size_t bytes) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((bytes + page - 1) / page);
  return mincore(address, bytes, resident.data()) == 0;
}

}  // namespace

int DeviceMemory::protection() const { return strict_ && open_count_ == 0 ? kClosed : kOpen; }

void* DeviceMemory::allocate(size_t bytes, size_t alignment) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (bytes > SIZE_MAX - page || alignment > page) return nullptr;
  const size_t mapped = roundUp(bytes, page);
  std::lock_guard<std::mutex> lock(mutex_);
  void* memory = mapDeviceMemory(mapped, protection());
  if (memory == MAP_FAILED) return nullptr;
  mappings_.emplace(memory, Mapping{mapped, -1});
  return memory;
}

void DeviceMemory::release(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = mappings_.find(ptr);
  munmap(it->first, it->second.bytes);
  if (it->second.fd >= 0) ::close(it->second.fd);
  mappings_.erase(it);
}

int DeviceMemory::share(void* base) {
  std::unique_lock<std::mutex> lock(mutex_);
  Mapping& mapping = mappings_.at(base);
  if (mapping.fd >= 0) return mapping.fd;
  // The contents move while no command runs on device memory; the mutex keeps new
  // ones from opening it until the memfd stands at the same address.
  closed_.wait(lock, [&] { return open_count_ == 0; });
  const int fd = memfd_create("pto-device-memory", MFD_CLOEXEC);
  if (fd < 0) return -1;
  void* staging = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(mapping.bytes)) == 0) {
    staging = mmap(nullptr, mapping.bytes, kOpen, MAP_SHARED, fd, 0);
  }
  if (staging == MAP_FAILED) {
    const int error = errno;
    ::close(fd);
    errno = error;
    return -1;
  }
  if (strict_ && mprotect(base, mapping.bytes, PROT_READ) != 0) dieOnProtect(base, mapping.bytes, errno);
  std::memcpy(staging, base, mapping.bytes);
  munmap(staging, mapping.bytes);
  // MAP_FIXED replaces the private pages in one step: the address never goes unmapped.
  if (mmap(base, mapping.bytes, protection(), MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
    const int error = errno;
    ::close(fd);
    if (!stillMapped(base, mapping.bytes)) {
      // The private pages went and the memfd did not come: the allocation's memory is lost.
      std::fprintf(stderr, "pto sim: moving %zu bytes at %p onto shared memory failed: %s\n", mapping.bytes,
                   base, std::strerror(error));
      std::abort();
    }
    if (strict_ && mprotect(base, mapping.bytes, kClosed) != 0) dieOnProtect(base, mapping.bytes, errno);
    errno = error;
    return -1;
  }
  mapping.fd = fd;
  return fd;
}

void* DeviceMemory::map(int fd, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  void* memory = mmap(nullptr, bytes, protection(), MAP_SHARED, fd, 0);
  if (memory == MAP_FAILED) return nullptr;
  mappings_.emplace(memory, Mapping{bytes, -1});
  return memory;
}

void DeviceMemory::open() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (open_count_++ == 0 && strict_) protectAllLocked(kOpen);
}

void DeviceMemory::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (--open_count_ > 0) return;
  if (strict_) protectAllLocked(kClosed);
  closed_.notify_all();
}

void DeviceMemory::protectAllLocked(int protection) {
  for (const auto& [address, mapping] : mappings_) {
    if (mprotect(address, mapping.bytes, protection) != 0) dieOnProtect(address, mapping.bytes, errno);
  }
}

}  // namespace pto::rt::sim
