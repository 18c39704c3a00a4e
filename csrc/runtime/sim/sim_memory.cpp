#include "sim_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace pto::rt::sim {
namespace {

constexpr int kOpen = PROT_READ | PROT_WRITE;
constexpr int kClosed = PROT_NONE;

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
  std::lock_guard<std::mutex> lock(mutex_);
  void* memory = mmap(nullptr, bytes, open_count_ > 0 ? kOpen : kClosed,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) return nullptr;
  mappings_.emplace(memory, bytes);
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
