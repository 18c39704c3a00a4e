// What the sim's oneDNN kernels share (gemm_onednn.cpp, conv_onednn.cpp): the CPU
// engine, the discipline of one OpenMP thread per call, and a least-recently-used
// cache of created primitives.
#pragma once

#include <omp.h>

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <utility>

namespace pto::rt::sim::kernels {

dnnl::engine& onednnEngine();

// oneDNN (3.2, cmake/onednn.cmake) threads with OpenMP, sizing its work (when a primitive is created)
// and its team (when it runs) by omp_get_max_threads(). The device's cores already
// split every GEMM and convolution (matmul.cpp, convolution.cpp), so each call runs on
// its own thread only: a team per core would oversubscribe the cores, and its threads
// spin after each call. The setting is the calling thread's own and is restored
// afterwards, so PyTorch's CPU ops on that thread keep their threads.
class SingleOpenMpThread {
 public:
  SingleOpenMpThread() : previous_(omp_get_max_threads()) {
    if (previous_ != 1) omp_set_num_threads(1);
  }
  ~SingleOpenMpThread() {
    if (previous_ != 1) omp_set_num_threads(previous_);
  }
  SingleOpenMpThread(const SingleOpenMpThread&) = delete;
  SingleOpenMpThread& operator=(const SingleOpenMpThread&) = delete;

 private:
  int previous_;
};

// Primitives by key, created once (0.1-2 ms each) and shared by the threads that run
// them; the `capacity` most recently used are kept.
template <typename Key, typename Value, typename Hash>
class PrimitiveCache {
 public:
  explicit PrimitiveCache(size_t capacity) : capacity_(capacity) {}

  template <typename Create>
  std::shared_ptr<const Value> get(const Key& key, Create&& create) {
    {
      std::lock_guard lock(mutex_);
      if (auto found = index_.find(key); found != index_.end()) {
        entries_.splice(entries_.begin(), entries_, found->second);
        return found->second->second;
      }
    }
    // Created outside the cache's lock, so that other threads' calls on cached keys
    // need not wait, but one at a time: two threads wanting the same new key build
    // it once, and oneDNN's code generation is never entered twice at once.
    std::lock_guard creating(creation_mutex_);
    {
      std::lock_guard lock(mutex_);
      if (auto found = index_.find(key); found != index_.end()) return found->second->second;
    }
    std::shared_ptr<const Value> created = create(key);
    std::lock_guard lock(mutex_);
    entries_.emplace_front(key, created);
    index_.emplace(key, entries_.begin());
    if (entries_.size() > capacity_) {
      index_.erase(entries_.back().first);
      entries_.pop_back();
    }
    return created;
  }

 private:
  using Entry = std::pair<Key, std::shared_ptr<const Value>>;
  size_t capacity_;
  std::mutex creation_mutex_;  // taken before mutex_, never after it
  std::mutex mutex_;
  std::list<Entry> entries_;
  std::unordered_map<Key, typename std::list<Entry>::iterator, Hash> index_;
};

}  // namespace pto::rt::sim::kernels
