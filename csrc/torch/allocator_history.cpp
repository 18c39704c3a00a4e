#include "allocator_history.h"

#include <c10/util/flat_hash_map.h>

#include <atomic>
#include <chrono>
#include <mutex>

namespace pto::torch_glue::history {
namespace {

// Whether anything is recorded: read without a lock by every allocation and free, before
// they build an entry (most processes never record).
std::atomic<bool> recording = false;

struct DeviceTrace {
  std::vector<TraceEntry> entries;  // a ring once it holds max_entries
  size_t next = 0;                  // where the ring writes next (and the oldest entry)
};

class History {
 public:
  void configure(const Options& options) {
    std::lock_guard<std::mutex> lock(mutex_);
    options_ = options;
    recording = options.enabled;
    if (options.clear || !options.enabled) {
      traces_.clear();
      block_contexts_.clear();
    }
    for (DeviceTrace& trace : traces_) {
      if (trace.entries.size() > options.max_entries) trim(trace, options.max_entries);
    }
  }

  std::shared_ptr<torch::CapturedTraceback> gatherContext(bool for_free) {
    if (!recording) return nullptr;
    Options options;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      options = options_;
    }
    const bool wanted = for_free ? options.trace && options.free_context : options.alloc_context;
    if (!options.enabled || !wanted) return nullptr;
    return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, options.cpp_frames);
  }

  // Stamps the entry's time only once it is kept.
  void record(TraceEntry entry) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!options_.enabled) return;
    entry.time_us = nowMicroseconds();
    if (entry.action == Action::Alloc) block_contexts_[entry.addr] = entry.context;
    if (entry.action == Action::FreeCompleted) block_contexts_.erase(entry.addr);
    if (options_.trace) append(std::move(entry));
  }

  std::shared_ptr<torch::CapturedTraceback> blockContext(uintptr_t address) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = block_contexts_.find(address);
    return found == block_contexts_.end() ? nullptr : found->second;
  }

  std::vector<std::vector<TraceEntry>> deviceTraces(c10::DeviceIndex device_count) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::vector<TraceEntry>> result(device_count);
    for (c10::DeviceIndex device = 0; device < device_count; ++device) {
      if (options_.enabled && options_.trace) {
        append(TraceEntry{Action::Snapshot, device, 0, 0, 0, 0, nowMicroseconds(), nullptr});
      }
      if (static_cast<size_t>(device) >= traces_.size()) continue;
      const DeviceTrace& trace = traces_[device];
      for (size_t i = 0; i < trace.entries.size(); ++i) {
        result[device].push_back(trace.entries[(trace.next + i) % trace.entries.size()]);
      }
    }
    return result;
  }

 private:
  static int64_t nowMicroseconds() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch()).count();
  }

  void append(TraceEntry entry) {
    if (options_.max_entries == 0) return;
    if (static_cast<size_t>(entry.device) >= traces_.size()) traces_.resize(entry.device + 1);
    DeviceTrace& trace = traces_[entry.device];
    if (trace.entries.size() < options_.max_entries) {
      trace.entries.push_back(std::move(entry));
      return;
    }
    trace.entries[trace.next] = std::move(entry);
    trace.next = (trace.next + 1) % trace.entries.size();
  }

  // Keeps the newest `count` entries, oldest first.
  static void trim(DeviceTrace& trace, size_t count) {
    std::vector<TraceEntry> kept;
    const size_t size = trace.entries.size();
    for (size_t i = size - count; i < size; ++i) kept.push_back(trace.entries[(trace.next + i) % size]);
    trace.entries = std::move(kept);
    trace.next = 0;
  }

  std::mutex mutex_;
  Options options_;
  std::vector<DeviceTrace> traces_;
  ska::flat_hash_map<uintptr_t, std::shared_ptr<torch::CapturedTraceback>> block_contexts_;
};

History& instance() {
  // Leaked on purpose: tensors may be freed during interpreter shutdown.
  static auto* history = new History;
  return *history;
}

}  // namespace

const char* actionName(Action action) {
  switch (action) {
    case Action::Alloc: return "alloc";
    case Action::FreeRequested: return "free_requested";
    case Action::FreeCompleted: return "free_completed";
    case Action::SegmentAlloc: return "segment_alloc";
    case Action::SegmentFree: return "segment_free";
    case Action::Oom: return "oom";
    case Action::Snapshot: return "snapshot";
  }
  return "unknown";
}

void configure(const Options& options) { instance().configure(options); }

std::shared_ptr<torch::CapturedTraceback> gatherContext(bool for_free) {
  return instance().gatherContext(for_free);
}

void record(Action action, c10::DeviceIndex device, const void* addr, size_t size, c10::StreamId stream,
            std::shared_ptr<torch::CapturedTraceback> context, size_t device_free) {
  if (!recording) return;
  instance().record(TraceEntry{action, device, reinterpret_cast<uintptr_t>(addr), size, stream, device_free,
                               /*time_us=*/0, std::move(context)});
}

std::shared_ptr<torch::CapturedTraceback> blockContext(uintptr_t address) {
  return instance().blockContext(address);
}

std::vector<std::vector<TraceEntry>> deviceTraces(c10::DeviceIndex device_count) {
  return instance().deviceTraces(device_count);
}

}  // namespace pto::torch_glue::history
