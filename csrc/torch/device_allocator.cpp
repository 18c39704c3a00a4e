#include "device_allocator.h"

#include <c10/core/DeviceGuard.h>
#include <c10/util/flat_hash_map.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ranges>
#include <set>
#include <thread>
#include <vector>

#include "allocator_config.h"
#include "allocator_history.h"
#include "device.h"
#include "pluggable_allocator.h"
#include "pto_check.h"

namespace pto::torch_glue {
namespace {

using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kMinBlockSize = 512;             // every size is rounded to this
constexpr size_t kSmallSize = size_t{1} << 20;    // requests up to 1 MiB are "small"
constexpr size_t kSmallSegment = size_t{2} << 20; // small requests share 2 MiB segments
constexpr size_t kMinLargeAlloc = size_t{10} << 20;// smaller large requests share large_segment_size ones
constexpr size_t kRoundLarge = size_t{2} << 20;

struct PrivatePool;

struct Block {
  PrivatePool* pool = nullptr;  // null: the device's shared cache
  c10::DeviceIndex device = 0;
  c10::StreamId stream = 0;
  size_t size = 0;
  size_t requested = 0;
  void* ptr = nullptr;
  bool small = false;
  bool allocated = false;
  uint64_t freed_at = 0;  // the device's allocation count when it was last cached (its age)
  Block* prev = nullptr;  // neighbours inside the same segment
  Block* next = nullptr;
  // The other streams record_stream named: a few at most, and a Block made with none
  // allocates nothing (a hash set's empty table does).
  std::vector<c10::Stream> stream_uses;
  int pending_events = 0;

  bool isSplit() const { return prev != nullptr || next != nullptr; }
};

// Free blocks ordered by (stream, size, address): lower_bound of a BlockKey finds
// the best fit on the requesting stream.
struct BlockKey {
  c10::StreamId stream;
  size_t size;
  uintptr_t address;
  auto operator<=>(const BlockKey&) const = default;
};

struct BlockOrder {
  using is_transparent = void;
  static BlockKey keyOf(const Block* block) {
    return {block->stream, block->size, reinterpret_cast<uintptr_t>(block->ptr)};
  }
  static const BlockKey& keyOf(const BlockKey& key) { return key; }
  bool operator()(const auto& a, const auto& b) const { return keyOf(a) < keyOf(b); }
};
using FreeBlocks = std::set<Block*, BlockOrder>;

struct PendingFree {
  ptoEvent event;
  Block* block;
};

// A graph's or a MemPool's memory: its own free blocks and segments.
struct PrivatePool {
  FreeBlocks small_free;
  FreeBlocks large_free;
  int users = 1;        // graphs, MemPools and use_mem_pool contexts; at 0 its segments go back
  size_t segments = 0;  // allocated from the device and not yet returned
  std::shared_ptr<PluggableAllocator> allocator;  // where its segments come from; null: the runtime
  bool no_split = false;
  bool use_on_oom = false;  // its cached blocks serve allocations outside every pool that found no memory
};

// Where allocations go while a capture runs (beginAllocateToPool).
struct PoolRoute {
  c10::DeviceIndex device;
  c10::MempoolId_t id;
  std::function<bool(c10::Stream)> filter;
  CachingDeviceAllocator::OutsidePool outside;
  std::thread::id thread;  // the thread that began it
};

struct DeviceCache {
  FreeBlocks small_free;
  FreeBlocks large_free;
  DeviceStats stats;
  double memory_fraction = 1.0;  // set_per_process_memory_fraction
  size_t allowed_bytes = std::numeric_limits<size_t>::max();
  uint64_t allocations = 0;  // the clock of blocks' ages, for garbage collection
};

size_t roundSize(size_t size) {
  return size < kMinBlockSize ? kMinBlockSize : (size + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

// Expandable segments grow by what a request lacks; the closest a driver without address
// reservation comes is a segment of the request's own size (see allocateSegment).
size_t segmentSize(size_t size, const AllocatorSettings& settings) {
  if (size <= kSmallSize) return kSmallSegment;
  if (size < kMinLargeAlloc && !settings.expandable_segments) return settings.large_segment_size;
  return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

std::string formatBytes(size_t bytes) {
  char text[64];
  if (bytes >= (size_t{1} << 30)) std::snprintf(text, sizeof text, "%.2f GiB", bytes / 1073741824.0);
  else if (bytes >= (size_t{1} << 20)) std::snprintf(text, sizeof text, "%.2f MiB", bytes / 1048576.0);
  else if (bytes >= 1024) std::snprintf(text, sizeof text, "%.2f KiB", bytes / 1024.0);
  else std::snprintf(text, sizeof text, "%zu bytes", bytes);
  return text;
}

void deleteDevicePtr(void* ptr);

class AllocatorState {
 public:
  AllocatorState() : settings_(allocatorSettings()), caches_(deviceCount()) {}

  c10::DataPtr allocate(size_t nbytes) {
    const c10::DeviceIndex device = currentDevice();
    const c10::Device where(c10::kPrivateUse1, device);
    if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &deleteDevicePtr, where);
    const c10::Stream current_stream = currentStream(device);
    const c10::StreamId stream = current_stream.id();
    const size_t size = roundSize(nbytes);
    const bool small = size <= kSmallSize;
    const auto context = history::gatherContext(/*for_free=*/false);

    std::lock_guard<std::mutex> lock(mutex_);
    has_allocated_ = true;
    DeviceCache& cache = caches_[device];
    ++cache.allocations;
    PrivatePool* pool = poolFor(current_stream, nbytes);
    processPendingFrees(/*wait=*/false);
    Block* block = takeFreeBlock(cache, pool, stream, size, small);
    if (block == nullptr) {
      block = allocateSegment(cache, pool, device, stream, size, small);
      if (block != nullptr) {
        history::record(history::Action::SegmentAlloc, device, block->ptr, block->size, stream, context);
      }
    }
    if (block == nullptr && pool == nullptr) block = takeLastResortBlock(cache, stream, size, small);
    if (block == nullptr) throwOutOfMemory(cache, device, stream, nbytes);
    splitBlock(cache, block, size);
    history::record(history::Action::Alloc, device, block->ptr, block->size, stream, context);

    block->allocated = true;
    block->requested = nbytes;
    active_[block->ptr] = block;
    updatePool(cache.stats.allocation, small, 1, true);
    updatePool(cache.stats.allocated_bytes, small, block->size, true);
    updatePool(cache.stats.active, small, 1, true);
    updatePool(cache.stats.active_bytes, small, block->size, true);
    updatePool(cache.stats.requested_bytes, small, nbytes, true);
    if (isOversize(block->size)) cache.stats.oversize_allocations.increase(1);
    return c10::DataPtr(block->ptr, block->ptr, &deleteDevicePtr, where);
  }

  void free(void* ptr) {
    if (ptr == nullptr) return;
    auto context = history::gatherContext(/*for_free=*/true);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = active_.find(ptr);
    TORCH_CHECK(it != active_.end(), "pto allocator: cannot free ", ptr,
                ": the caching allocator did not hand it out (or it was freed already)");
    Block* block = it->second;
    active_.erase(it);
    history::record(history::Action::FreeRequested, block->device, block->ptr, block->size, block->stream,
                    std::move(context));
    DeviceCache& cache = caches_[block->device];
    updatePool(cache.stats.allocation, block->small, 1, false);
    updatePool(cache.stats.allocated_bytes, block->small, block->size, false);
    updatePool(cache.stats.requested_bytes, block->small, block->requested, false);
    if (isOversize(block->size)) cache.stats.oversize_allocations.decrease(1);
    block->allocated = false;
    if (block->stream_uses.empty()) {
      releaseBlock(block);
      return;
    }
    // Other streams may still read it: reuse waits until they pass this point.
    for (const c10::Stream& use : block->stream_uses) {
      ptoEvent event = nullptr;
      PTO_CHECK(ptoEventCreate(&event));
      PTO_CHECK(ptoEventRecord(event, nativeStream(use)));
      pending_.push_back({event, block});
      ++block->pending_events;
    }
    block->stream_uses.clear();
  }

  void recordStream(const c10::DataPtr& data, c10::Stream stream) {
    if (data.get() == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = active_.find(data.get_context());
    TORCH_CHECK(it != active_.end(), "record_stream: the tensor's memory does not come from the pto allocator");
    Block* block = it->second;
    if (stream.device_index() == block->device && stream.id() == block->stream) return;
    if (std::ranges::find(block->stream_uses, stream) == block->stream_uses.end()) block->stream_uses.push_back(stream);
  }

  void emptyCache() {
    std::lock_guard<std::mutex> lock(mutex_);
    processPendingFrees(/*wait=*/true);
    for (DeviceCache& cache : caches_) releaseCachedSegments(cache);
  }

  void beginAllocateToPool(PoolRoute route) {
    std::lock_guard<std::mutex> lock(mutex_);
    retainPool(route.id);
    routes_.push_back(std::move(route));
  }

  // Locked by the caller.
  void retainPool(c10::MempoolId_t id, std::shared_ptr<PluggableAllocator> allocator = nullptr,
                  bool use_on_oom = false, bool no_split = false) {
    auto [it, created] = pools_.try_emplace(id);
    if (!created) {
      ++it->second.users;  // another graph, MemPool or use_mem_pool shares it
      return;
    }
    it->second.allocator = std::move(allocator);
    it->second.use_on_oom = use_on_oom;
    it->second.no_split = no_split;
  }

  void retainUserPool(c10::MempoolId_t id, std::shared_ptr<PluggableAllocator> allocator, bool use_on_oom,
                      bool no_split) {
    std::lock_guard<std::mutex> lock(mutex_);
    retainPool(id, std::move(allocator), use_on_oom, no_split);
  }

  int poolUseCount(c10::MempoolId_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pools_.find(id);
    return it == pools_.end() ? 0 : it->second.users;
  }

  bool hasAllocated() const { return has_allocated_; }

  void setMemoryFraction(c10::DeviceIndex device, double fraction, size_t total_bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceCache& cache = caches_.at(device);
    cache.memory_fraction = fraction;
    cache.allowed_bytes = static_cast<size_t>(fraction * static_cast<double>(total_bytes));
  }

  double memoryFraction(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return caches_.at(device).memory_fraction;
  }

  void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::erase_if(routes_, [&](const PoolRoute& route) { return route.device == device && route.id == id; });
  }

  void releasePool(c10::DeviceIndex device, c10::MempoolId_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pools_.find(id);
    TORCH_INTERNAL_ASSERT(it != pools_.end(), "pto allocator: releasing unknown pool (", id.first, ", ", id.second, ")");
    if (--it->second.users > 0) return;
    processPendingFrees(/*wait=*/true);
    releaseFreeSegments(it->second.small_free);
    releaseFreeSegments(it->second.large_free);
    if (it->second.segments == 0) pools_.erase(it);
  }

  DeviceStats stats(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return caches_.at(device).stats;
  }

  template <typename Reset>
  void resetStats(c10::DeviceIndex device, Reset reset) {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceStats& stats = caches_.at(device).stats;
    for (auto* array : {&stats.allocation, &stats.segment, &stats.active, &stats.inactive_split,
                        &stats.allocated_bytes, &stats.reserved_bytes, &stats.active_bytes,
                        &stats.inactive_split_bytes, &stats.requested_bytes}) {
      for (auto& stat : *array) reset(stat);
    }
    reset(stats.oversize_allocations);
    reset(stats.oversize_segments);
  }

  // Every segment with its blocks in address order, for torch.pto.memory._snapshot().
  std::vector<history::SegmentState> segments() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::map<uintptr_t, Block*> heads;
    const auto addSegmentOf = [&heads](Block* block) {
      while (block->prev != nullptr) block = block->prev;
      heads.emplace(reinterpret_cast<uintptr_t>(block->ptr), block);
    };
    for (DeviceCache& cache : caches_) {
      for (Block* block : cache.small_free) addSegmentOf(block);
      for (Block* block : cache.large_free) addSegmentOf(block);
    }
    std::map<const PrivatePool*, c10::MempoolId_t> pool_ids;
    for (const auto& [id, pool] : pools_) {
      pool_ids.emplace(&pool, id);
      for (Block* block : pool.small_free) addSegmentOf(block);
      for (Block* block : pool.large_free) addSegmentOf(block);
    }
    for (const auto& [ptr, block] : active_) addSegmentOf(block);
    for (const PendingFree& entry : pending_) addSegmentOf(entry.block);
    std::vector<history::SegmentState> result;
    for (const auto& [address, head] : heads) {
      const c10::MempoolId_t pool_id = head->pool == nullptr ? c10::MempoolId_t{0, 0} : pool_ids.at(head->pool);
      history::SegmentState segment{head->device, address, 0, head->stream, head->small, pool_id, {}};
      for (Block* block = head; block != nullptr; block = block->next) {
        const auto state = block->allocated              ? history::BlockState::kActiveAllocated
                           : block->pending_events > 0 ? history::BlockState::kActiveAwaitingFree
                                                        : history::BlockState::kInactive;
        segment.blocks.push_back({reinterpret_cast<uintptr_t>(block->ptr), block->size,
                                  block->allocated ? block->requested : 0, state});
        segment.total_size += block->size;
      }
      result.push_back(std::move(segment));
    }
    return result;
  }

 private:
  static void updatePool(c10::CachingAllocator::StatArray& stat, bool small, size_t amount, bool increase) {
    const auto pool = static_cast<size_t>(small ? StatType::SMALL_POOL : StatType::LARGE_POOL);
    for (size_t index : {static_cast<size_t>(StatType::AGGREGATE), pool}) {
      if (increase) stat[index].increase(amount);
      else stat[index].decrease(amount);
    }
  }

  static FreeBlocks& poolOf(DeviceCache& cache, PrivatePool* pool, bool small) {
    if (pool != nullptr) return small ? pool->small_free : pool->large_free;
    return small ? cache.small_free : cache.large_free;
  }

  // The pool an allocation on `stream` comes from: a capture's, or null (the shared cache).
  PrivatePool* poolFor(c10::Stream stream, size_t nbytes) {
    const PoolRoute* refusing = nullptr;
    // The newest route first: a capture or use_mem_pool begun inside another wins.
    for (const PoolRoute& route : std::views::reverse(routes_)) {
      if (route.device != stream.device_index()) continue;
      if (route.filter(stream)) return &pools_.at(route.id);
      const bool refuses = route.outside == CachingDeviceAllocator::OutsidePool::kRefuse ||
                           (route.outside == CachingDeviceAllocator::OutsidePool::kRefuseOnThisThread &&
                            route.thread == std::this_thread::get_id());
      if (refuses) refusing = &route;
    }
    TORCH_CHECK(refusing == nullptr, "pto graph capture: an allocation of ", formatBytes(nbytes), " on stream ",
                stream.id(), " of pto:", static_cast<int>(stream.device_index()),
                " would come from outside the graph's memory pool while another stream of the device captures; "
                "allocate on the capturing stream, before the capture, or use capture_error_mode='relaxed'");
    return nullptr;
  }

  // max_split_size_mb: blocks this large are never split, and serve only requests close to their size.
  bool isOversize(size_t size) const { return size >= settings_.max_split_size; }

  void insertFree(DeviceCache& cache, Block* block) {
    block->freed_at = cache.allocations;
    FreeBlocks& free_blocks = poolOf(cache, block->pool, block->small);
    if (spare_nodes_.empty()) {
      free_blocks.insert(block);
    } else {
      FreeBlocks::node_type node = std::move(spare_nodes_.back());
      spare_nodes_.pop_back();
      node.value() = block;
      free_blocks.insert(std::move(node));
    }
    if (block->isSplit()) {
      updatePool(cache.stats.inactive_split, block->small, 1, true);
      updatePool(cache.stats.inactive_split_bytes, block->small, block->size, true);
    }
  }

  void eraseFree(DeviceCache& cache, Block* block) {
    FreeBlocks::node_type node = poolOf(cache, block->pool, block->small).extract(block);
    if (node && spare_nodes_.size() < kMaxSpares) spare_nodes_.push_back(std::move(node));
    if (block->isSplit()) {
      updatePool(cache.stats.inactive_split, block->small, 1, false);
      updatePool(cache.stats.inactive_split_bytes, block->small, block->size, false);
    }
  }

  Block* takeFreeBlock(DeviceCache& cache, PrivatePool* private_pool, c10::StreamId stream, size_t size, bool small) {
    auto& pool = poolOf(cache, private_pool, small);
    auto it = pool.lower_bound(BlockKey{stream, size, 0});
    if (it == pool.end() || (*it)->stream != stream) return nullptr;
    Block* block = *it;
    // The smallest fit: if it is oversize and the request is not, or much larger than an
    // oversize request, every larger block is too.
    if (!isOversize(size) && isOversize(block->size)) return nullptr;
    if (isOversize(size) && block->size >= size + settings_.max_non_split_rounding) return nullptr;
    eraseFree(cache, block);
    return block;
  }

  // The last resort of an allocation outside every pool that found no memory: a cached
  // block of a MemPool(use_on_oom=True).
  Block* takeLastResortBlock(DeviceCache& cache, c10::StreamId stream, size_t size, bool small) {
    for (auto& [id, pool] : pools_) {
      if (!pool.use_on_oom) continue;
      if (Block* block = takeFreeBlock(cache, &pool, stream, size, small)) return block;
    }
    return nullptr;
  }

  // garbage_collection_threshold: above that share of the memory this process may use, the
  // shared cache's whole free large segments go back to the device, the longest unused first,
  // until it is below again (CUDA's aim; its order is by age too).
  void collectGarbage(DeviceCache& cache, size_t total_bytes) {
    const size_t allowed = std::min(cache.allowed_bytes, total_bytes);
    const auto threshold = static_cast<size_t>(settings_.garbage_collection_threshold * static_cast<double>(allowed));
    const auto reserved = [&cache] {
      return cache.stats.reserved_bytes[static_cast<size_t>(StatType::AGGREGATE)].current;
    };
    if (static_cast<size_t>(reserved()) <= threshold) return;
    std::vector<Block*> whole;
    for (Block* block : cache.large_free) {
      if (!block->isSplit()) whole.push_back(block);
    }
    std::ranges::sort(whole, {}, &Block::freed_at);
    for (Block* block : whole) {
      if (static_cast<size_t>(reserved()) <= threshold) break;
      cache.large_free.erase(block);
      releaseSegment(block);
    }
  }

  // A segment's memory: from the pool's allocator or the runtime, within the memory fraction.
  ptoError mallocSegment(DeviceCache& cache, PrivatePool* pool, c10::DeviceIndex device, c10::StreamId stream,
                         size_t bytes, void** ptr) {
    const size_t reserved = cache.stats.reserved_bytes[static_cast<size_t>(StatType::AGGREGATE)].current;
    if (reserved + bytes > cache.allowed_bytes) return PTO_ERROR_OUT_OF_MEMORY;
    if (pool == nullptr || pool->allocator == nullptr) return ptoMalloc(ptr, bytes);
    *ptr = pool->allocator->rawAlloc(bytes, device, nativeStream(streamOf(device, stream)));
    return *ptr == nullptr ? PTO_ERROR_OUT_OF_MEMORY : PTO_SUCCESS;
  }

  static c10::Stream streamOf(c10::DeviceIndex device, c10::StreamId id) {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::kPrivateUse1, device), id);
  }

  // A new segment for a block of `size`, or null when the device (or the memory fraction)
  // has no room even after the cache went back.
  Block* allocateSegment(DeviceCache& cache, PrivatePool* pool, c10::DeviceIndex device, c10::StreamId stream,
                         size_t size, bool small) {
    const size_t bytes = pool != nullptr && pool->no_split ? size : segmentSize(size, settings_);
    if (!small && settings_.garbage_collection_threshold > 0) {
      size_t free_bytes = 0, total_bytes = 0;
      PTO_CHECK(ptoMemGetInfo(&free_bytes, &total_bytes));
      collectGarbage(cache, total_bytes);
    }
    // expandable_segments: the driver cannot grow a segment in place, so the stream's whole
    // free large segments, none of which fits, go back before a new one is taken: what the
    // cache holds follows what is allocated, as with segments that grow and shrink.
    if (!small && settings_.expandable_segments) {
      releaseFreeSegments(poolOf(cache, pool, false), stream);
    }
    void* ptr = nullptr;
    ptoError status = mallocSegment(cache, pool, device, stream, bytes, &ptr);
    if (status == PTO_ERROR_OUT_OF_MEMORY) {
      // Give the cache back to the device and try once more, as CUDA's allocator does.
      ++cache.stats.num_alloc_retries;
      processPendingFrees(/*wait=*/true);
      releaseCachedSegments(cache);
      status = mallocSegment(cache, pool, device, stream, bytes, &ptr);
    }
    if (status == PTO_ERROR_OUT_OF_MEMORY) return nullptr;
    PTO_CHECK(status);
    ++cache.stats.num_device_alloc;
    updatePool(cache.stats.segment, small, 1, true);
    updatePool(cache.stats.reserved_bytes, small, bytes, true);
    if (isOversize(bytes)) cache.stats.oversize_segments.increase(1);
    Block* block = newBlock();
    block->pool = pool;
    if (pool != nullptr) ++pool->segments;
    block->device = device;
    block->stream = stream;
    block->size = bytes;
    block->ptr = ptr;
    block->small = small;
    return block;
  }

  [[noreturn]] void throwOutOfMemory(DeviceCache& cache, c10::DeviceIndex device, c10::StreamId stream,
                                     size_t requested) {
    ++cache.stats.num_ooms;
    size_t free_bytes = 0, total_bytes = 0;
    PTO_CHECK(ptoMemGetInfo(&free_bytes, &total_bytes));
    const auto aggregate = static_cast<size_t>(StatType::AGGREGATE);
    const size_t allocated = cache.stats.allocated_bytes[aggregate].current;
    const size_t reserved = cache.stats.reserved_bytes[aggregate].current;
    history::record(history::Action::Oom, device, nullptr, requested, stream, nullptr, free_bytes);
    const std::string allowed = cache.memory_fraction < 1.0
                                    ? formatBytes(cache.allowed_bytes) + " is allowed to this process "
                                          "(set_per_process_memory_fraction). "
                                    : std::string();
    TORCH_CHECK_WITH(OutOfMemoryError, false, "PTO out of memory on pto:",
                     static_cast<int>(device), ". Tried to allocate ", formatBytes(requested),
                     ". The device has a total capacity of ", formatBytes(total_bytes),
                     " of which ", formatBytes(free_bytes), " is free. ", allowed,
                     formatBytes(allocated), " is allocated by PyTorch, and ",
                     formatBytes(reserved - allocated),
                     " is reserved by PyTorch but unallocated (PTO_SIM_MEMORY sets the capacity).");
  }

  void splitBlock(DeviceCache& cache, Block* block, size_t size) {
    if (block->pool != nullptr && block->pool->no_split) return;
    const size_t remaining = block->size - size;
    const bool worth_splitting = block->small || settings_.expandable_segments
                                     ? remaining >= kMinBlockSize
                                     : remaining > kSmallSize && !isOversize(size);
    if (!worth_splitting) return;
    Block* rest = newBlock();
    rest->pool = block->pool;
    rest->device = block->device;
    rest->stream = block->stream;
    rest->size = remaining;
    rest->ptr = static_cast<char*>(block->ptr) + size;
    rest->small = block->small;
    rest->prev = block;
    rest->next = block->next;
    if (rest->next != nullptr) rest->next->prev = rest;
    block->next = rest;
    block->size = size;
    insertFree(cache, rest);
  }

  // A block no stream uses any more: merge with free neighbours and cache it.
  void releaseBlock(Block* block) {
    DeviceCache& cache = caches_[block->device];
    history::record(history::Action::FreeCompleted, block->device, block->ptr, block->size, block->stream, nullptr);
    updatePool(cache.stats.active, block->small, 1, false);
    updatePool(cache.stats.active_bytes, block->small, block->size, false);
    for (Block* neighbour : {block->prev, block->next}) {
      if (neighbour == nullptr || neighbour->allocated || neighbour->pending_events > 0) continue;
      eraseFree(cache, neighbour);
      if (neighbour == block->prev) {
        block->ptr = neighbour->ptr;
        block->prev = neighbour->prev;
        if (block->prev != nullptr) block->prev->next = block;
      } else {
        block->next = neighbour->next;
        if (block->next != nullptr) block->next->prev = block;
      }
      block->size += neighbour->size;
      retireBlock(neighbour);
    }
    insertFree(cache, block);
    // The last block of a pool no graph uses any more: its segment goes back now.
    if (PrivatePool* pool = block->pool; pool != nullptr && pool->users == 0 && !block->isSplit()) {
      releaseFreeSegments(poolOf(cache, pool, block->small));
      if (pool->segments == 0) std::erase_if(pools_, [&](const auto& entry) { return &entry.second == pool; });
    }
  }

  void processPendingFrees(bool wait) {
    std::vector<PendingFree> still_pending;
    for (const PendingFree& entry : pending_) {
      // An event after failed work completes too: the block is free either way,
      // and the failure is reported by its stream, not by this allocation.
      const ptoError status = wait ? ptoEventSynchronize(entry.event) : ptoEventQuery(entry.event);
      if (status == PTO_ERROR_NOT_READY) {
        still_pending.push_back(entry);
        continue;
      }
      PTO_CHECK(ptoEventDestroy(entry.event));
      if (--entry.block->pending_events == 0) releaseBlock(entry.block);
    }
    pending_.swap(still_pending);
  }

  // The shared cache's whole free segments go back to the device.
  void releaseCachedSegments(DeviceCache& cache) {
    releaseFreeSegments(cache.small_free);
    releaseFreeSegments(cache.large_free);
  }

  // Whole free segments go back to where they came from: the pool's allocator or the runtime.
  // Those of one stream only, if given.
  void releaseFreeSegments(FreeBlocks& free_blocks, std::optional<c10::StreamId> stream = {}) {
    for (auto it = free_blocks.begin(); it != free_blocks.end();) {
      Block* block = *it;
      if (block->isSplit() || (stream && block->stream != *stream)) {
        ++it;
        continue;
      }
      it = free_blocks.erase(it);
      releaseSegment(block);
    }
  }

  // A whole free segment, out of its free set already.
  void releaseSegment(Block* block) {
    DeviceCache& cache = caches_[block->device];
    PrivatePool* pool = block->pool;
    if (pool != nullptr) --pool->segments;
    if (pool != nullptr && pool->allocator != nullptr) {
      pool->allocator->rawFree(block->ptr, block->size, block->device,
                               nativeStream(streamOf(block->device, block->stream)));
    } else {
      PTO_CHECK(ptoFree(block->ptr));
    }
    history::record(history::Action::SegmentFree, block->device, block->ptr, block->size, block->stream, nullptr);
    ++cache.stats.num_device_free;
    updatePool(cache.stats.segment, block->small, 1, false);
    updatePool(cache.stats.reserved_bytes, block->small, block->size, false);
    if (isOversize(block->size)) cache.stats.oversize_segments.decrease(1);
    retireBlock(block);
  }

  // Blocks and free-set nodes are recycled: a small allocation splits a block and
  // inserts the rest into a free set, its free merges them back, and the heap calls
  // for those were ~40 % of the pair's instructions.
  Block* newBlock() {
    if (spare_blocks_.empty()) return new Block;
    Block* block = spare_blocks_.back();
    spare_blocks_.pop_back();
    return block;
  }

  void retireBlock(Block* block) {
    if (spare_blocks_.size() >= kMaxSpares) {
      delete block;
      return;
    }
    *block = Block{};
    spare_blocks_.push_back(block);
  }

  static constexpr size_t kMaxSpares = 64;  // of each: the most splits that merge back at once in practice

  const AllocatorSettings settings_;
  std::mutex mutex_;
  std::vector<DeviceCache> caches_;
  std::map<c10::MempoolId_t, PrivatePool> pools_;
  std::vector<PoolRoute> routes_;
  ska::flat_hash_map<void*, Block*> active_;
  std::vector<PendingFree> pending_;
  std::vector<FreeBlocks::node_type> spare_nodes_;
  std::vector<Block*> spare_blocks_;
  std::atomic<bool> has_allocated_{false};
};

AllocatorState& state() {
  // Leaked on purpose: tensors may be freed during interpreter shutdown.
  static auto* instance = new AllocatorState;
  return *instance;
}

void deleteDevicePtr(void* ptr) { state().free(ptr); }

}  // namespace

c10::DataPtr CachingDeviceAllocator::allocate(size_t nbytes) { return state().allocate(nbytes); }

c10::DeleterFnPtr CachingDeviceAllocator::raw_deleter() const { return &deleteDevicePtr; }

void CachingDeviceAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  PTO_CHECK(ptoMemcpy(dest, src, count, PTO_MEMCPY_DEVICE_TO_DEVICE));
}

void CachingDeviceAllocator::emptyCache(c10::MempoolId_t) { state().emptyCache(); }

void CachingDeviceAllocator::recordStream(const c10::DataPtr& ptr, c10::Stream stream) {
  state().recordStream(ptr, stream);
}

c10::CachingDeviceAllocator::DeviceStats CachingDeviceAllocator::getDeviceStats(
    c10::DeviceIndex device) {
  return state().stats(resolveDeviceIndex(device));
}

void CachingDeviceAllocator::resetAccumulatedStats(c10::DeviceIndex device) {
  state().resetStats(resolveDeviceIndex(device), [](c10::CachingAllocator::Stat& s) { s.reset_accumulated(); });
}

void CachingDeviceAllocator::resetPeakStats(c10::DeviceIndex device) {
  state().resetStats(resolveDeviceIndex(device), [](c10::CachingAllocator::Stat& s) { s.reset_peak(); });
}

std::pair<size_t, size_t> CachingDeviceAllocator::getMemoryInfo(c10::DeviceIndex device) {
  const c10::DeviceGuard guard(c10::Device(c10::kPrivateUse1, resolveDeviceIndex(device)));
  size_t free_bytes = 0, total_bytes = 0;
  PTO_CHECK(ptoMemGetInfo(&free_bytes, &total_bytes));
  return {free_bytes, total_bytes};
}

void CachingDeviceAllocator::free(void* ptr) { state().free(ptr); }

bool CachingDeviceAllocator::hasAllocated() const { return state().hasAllocated(); }

void CachingDeviceAllocator::setMemoryFraction(c10::DeviceIndex device, double fraction) {
  TORCH_CHECK(0 <= fraction && fraction <= 1, "invalid fraction:", fraction, ". Please set within [0, 1].");
  device = resolveDeviceIndex(device);
  state().setMemoryFraction(device, fraction, getMemoryInfo(device).second);
}

double CachingDeviceAllocator::memoryFraction(c10::DeviceIndex device) {
  return state().memoryFraction(resolveDeviceIndex(device));
}

void CachingDeviceAllocator::beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id,
                                                 std::function<bool(c10::Stream)> filter, OutsidePool outside) {
  // Tensors come from the pluggable allocator then, not from any pool of this one.
  TORCH_CHECK(&currentDeviceAllocator() == this,
              "PTOPluggableAllocator does not yet support beginAllocateToPool (graph capture, use_mem_pool): "
              "pass the allocator to torch.pto.MemPool(allocator=...) instead of change_current_allocator");
  state().beginAllocateToPool({device, id, std::move(filter), outside, std::this_thread::get_id()});
}

void CachingDeviceAllocator::endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id) {
  state().endAllocateToPool(device, id);
}

void CachingDeviceAllocator::releasePool(c10::DeviceIndex device, c10::MempoolId_t id) {
  state().releasePool(device, id);
}

void CachingDeviceAllocator::retainPool(c10::MempoolId_t id, std::shared_ptr<PluggableAllocator> allocator,
                                        bool use_on_oom, bool no_split) {
  state().retainUserPool(id, std::move(allocator), use_on_oom, no_split);
}

int CachingDeviceAllocator::poolUseCount(c10::MempoolId_t id) { return state().poolUseCount(id); }

std::vector<history::SegmentState> CachingDeviceAllocator::segments() { return state().segments(); }

CachingDeviceAllocator& deviceAllocator() {
  static auto* allocator = new CachingDeviceAllocator;
  return *allocator;
}

namespace {
const bool registered = [] {
  c10::SetAllocator(c10::DeviceType::PrivateUse1, &deviceAllocator());
  return true;
}();
}  // namespace

}  // namespace pto::torch_glue
