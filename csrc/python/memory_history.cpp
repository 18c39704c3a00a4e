// The caching allocator's raw allocations and memory history as Python sees them
// (torch.pto.memory.caching_allocator_alloc, _record_memory_history, _snapshot):
// the snapshot is the dictionary torch.cuda.memory._snapshot() returns.
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/utils/pybind.h>

#include <c10/core/DeviceGuard.h>

#include "torch/allocator_history.h"
#include "torch/device.h"
#include "torch/device_allocator.h"

namespace py = pybind11;
using namespace pto::torch_glue;

// libtorch_python's symbolisation of captured stacks, as torch/csrc/profiler/python/
// combined_traceback.h declares them (that header needs nlohmann/json, which the
// installed torch does not ship).
namespace torch {
std::vector<py::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
void installCapturedTracebackPython();
}  // namespace torch

namespace {

const char* blockStateName(history::BlockState::State state) {
  switch (state) {
    case history::BlockState::kActiveAllocated: return "active_allocated";
    case history::BlockState::kActiveAwaitingFree: return "active_awaiting_free";
    case history::BlockState::kInactive: return "inactive";
  }
  return "unknown";
}

// Symbolises every recorded stack at once (much cheaper than one at a time).
class Frames {
 public:
  void add(const std::shared_ptr<torch::CapturedTraceback>& context) {
    if (context != nullptr) contexts_.push_back(context.get());
  }
  void symbolize() {
    const std::vector<py::object> frames = torch::py_symbolize(contexts_);
    for (size_t i = 0; i < contexts_.size(); ++i) symbolized_[contexts_[i]] = frames[i];
  }
  py::object of(const std::shared_ptr<torch::CapturedTraceback>& context) const {
    return context == nullptr ? py::list() : symbolized_.at(context.get());
  }

 private:
  std::vector<torch::CapturedTraceback*> contexts_;
  std::unordered_map<torch::CapturedTraceback*, py::object> symbolized_;
};

py::dict snapshot() {
  const std::vector<history::SegmentState> segments = deviceAllocator().segments();
  const auto traces = history::deviceTraces(deviceCount());
  std::vector<std::vector<std::shared_ptr<torch::CapturedTraceback>>> block_contexts;
  Frames frames;
  for (const history::SegmentState& segment : segments) {
    auto& contexts = block_contexts.emplace_back();
    for (const history::BlockState& block : segment.blocks) {
      contexts.push_back(block.state == history::BlockState::kInactive ? nullptr
                                                                        : history::blockContext(block.address));
      frames.add(contexts.back());
    }
  }
  for (const auto& trace : traces) {
    for (const history::TraceEntry& entry : trace) frames.add(entry.context);
  }
  frames.symbolize();

  py::list segment_list;
  for (size_t s = 0; s < segments.size(); ++s) {
    const history::SegmentState& segment = segments[s];
    py::list blocks;
    size_t allocated = 0, active = 0, requested = 0;
    for (size_t b = 0; b < segment.blocks.size(); ++b) {
      const history::BlockState& block = segment.blocks[b];
      if (block.state == history::BlockState::kActiveAllocated) allocated += block.size;
      if (block.state != history::BlockState::kInactive) active += block.size;
      requested += block.requested_size;
      py::dict item;
      item["address"] = block.address;
      item["size"] = block.size;
      item["requested_size"] = block.requested_size;
      item["state"] = blockStateName(block.state);
      item["frames"] = frames.of(block_contexts[s][b]);
      blocks.append(item);
    }
    py::dict item;
    item["device"] = segment.device;
    item["address"] = segment.address;
    item["total_size"] = segment.total_size;
    item["allocated_size"] = allocated;
    item["active_size"] = active;
    item["requested_size"] = requested;
    item["stream"] = segment.stream;
    item["segment_type"] = segment.small ? "small" : "large";
    item["segment_pool_id"] = py::make_tuple(segment.pool_id.first, segment.pool_id.second);
    item["is_expandable"] = false;
    item["blocks"] = blocks;
    segment_list.append(item);
  }

  py::list device_traces;
  for (const auto& trace : traces) {
    py::list entries;
    for (const history::TraceEntry& entry : trace) {
      py::dict item;
      item["action"] = history::actionName(entry.action);
      if (entry.action == history::Action::Oom) item["device_free"] = entry.device_free;
      else item["addr"] = entry.addr;
      item["size"] = entry.size;
      item["stream"] = entry.stream;
      item["time_us"] = entry.time_us;
      item["frames"] = frames.of(entry.context);
      entries.append(item);
    }
    device_traces.append(entries);
  }
  py::dict result;
  result["segments"] = segment_list;
  result["device_traces"] = device_traces;
  return result;
}

}  // namespace

void bindMemoryHistory(py::module_& m) {
  m.def("_record_memory_history", [](bool enabled, bool trace, bool alloc_context, bool free_context,
                                     bool cpp_frames, size_t max_entries, bool clear) {
    if (enabled) torch::installCapturedTracebackPython();
    history::configure({enabled, trace, alloc_context, free_context, cpp_frames, max_entries, clear});
  });
  m.def("_memory_snapshot", &snapshot);
  m.def("_caching_allocator_alloc", [](size_t size, int device) {
    const c10::DeviceGuard guard(c10::Device(c10::kPrivateUse1, static_cast<c10::DeviceIndex>(device)));
    return reinterpret_cast<uintptr_t>(deviceAllocator().raw_allocate(size));
  });
  m.def("_caching_allocator_delete", [](uintptr_t ptr) {
    deviceAllocator().raw_deallocate(reinterpret_cast<void*>(ptr));
  });
}
