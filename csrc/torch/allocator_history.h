// The caching allocator's memory history, as torch.cuda.memory._record_memory_history
// keeps it: while recording, every allocation, free and segment the allocator
// takes or returns is a trace entry with the stack that caused it, and each live
// block keeps the stack that allocated it. torch.pto.memory._snapshot() reads both
// (with the allocator's segments) in the format torch.cuda._memory_viz reads.
//
// The allocator calls gatherContext() before it takes its lock (gathering Python
// frames takes the GIL) and record() under it.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace pto::torch_glue::history {

enum class Action { Alloc, FreeRequested, FreeCompleted, SegmentAlloc, SegmentFree, Oom, Snapshot };
const char* actionName(Action action);

struct TraceEntry {
  Action action;
  c10::DeviceIndex device;
  uintptr_t addr;
  size_t size;
  c10::StreamId stream;
  size_t device_free;  // Oom only: what the device still had
  int64_t time_us;
  std::shared_ptr<torch::CapturedTraceback> context;  // null when not recorded
};

struct Options {
  bool enabled = false;        // keep the stack of each live block
  bool trace = false;          // keep trace entries too ("all")
  bool alloc_context = false;  // gather the stack of each allocation (context not None)
  bool free_context = false;   // and of each free (context="all")
  bool cpp_frames = false;     // C++ frames besides Python ones (stacks="all")
  size_t max_entries = 0;      // the trace is a ring of this many entries
  bool clear = false;          // forget what was recorded so far
};

void configure(const Options& options);

// The caller's stack, or null when nothing would keep it. Call without locks held.
std::shared_ptr<torch::CapturedTraceback> gatherContext(bool for_free);

void record(Action action, c10::DeviceIndex device, const void* addr, size_t size, c10::StreamId stream,
            std::shared_ptr<torch::CapturedTraceback> context, size_t device_free = 0);

// What the allocator holds, for a snapshot.
struct BlockState {
  uintptr_t address;
  size_t size;
  size_t requested_size;  // 0 unless allocated
  enum State { kActiveAllocated, kActiveAwaitingFree, kInactive } state;
};

struct SegmentState {
  c10::DeviceIndex device;
  uintptr_t address;
  size_t total_size;
  c10::StreamId stream;
  bool small;
  std::pair<uint64_t, uint64_t> pool_id;  // a graph's private pool; (0, 0): the device's shared cache
  std::vector<BlockState> blocks;  // in address order
};

// The stack that allocated the live block at `address` (null if not recorded).
std::shared_ptr<torch::CapturedTraceback> blockContext(uintptr_t address);
// The trace entries of every device, oldest first; records a Snapshot entry on each.
std::vector<std::vector<TraceEntry>> deviceTraces(c10::DeviceIndex device_count);

}  // namespace pto::torch_glue::history
