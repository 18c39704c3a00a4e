#include "sim_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

}  // namespace

void* DeviceMemory::allocate(size_t bytes, size_t alignment) {
  if (!strict_) return std::aligned_alloc(alignment, bytes);
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (bytes > SIZE_MAX - page) return nullptr;
  const size_t mapped = roundUp(bytes, page);
  std::lock_guard<std::mutex> lock(mutex_);
  void* memory = mapDeviceMemory(mapped, open_count_ > 0 ? kOpen : kClosed);
  if (memory == MAP_FAILED) return nullptr;
  mappings_.emplace(memory, mapped);
  return memory;
}

void DeviceMemory::release(void* ptr) {
  if (!strict_) {
    std::free(ptr);
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = mappings_.find(ptr);
  munmap(it->first, it->second);
  mappings_.erase(it);
}

void DeviceMemory::open() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (open_count_++ == 0) protectAllLocked(kOpen);
}

void DeviceMemory::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (--open_count_ == 0) protectAllLocked(kClosed);
}

void DeviceMemory::protectAllLocked(int protection) {
  for (const auto& [address, bytes] : mappings_) {
    if (mprotect(address, bytes, protection) != 0) dieOnProtect(address, bytes, errno);
  }
}

}  // namespace pto::rt::sim
