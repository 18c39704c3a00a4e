// pypto_torch._C's memory controls beyond the statistics torch.accelerator reads:
// MemPool and use_mem_pool, the pluggable allocator, the memory fraction and the
// pinned host allocator's statistics (torch.pto.memory).
#include <torch/csrc/utils/pybind.h>

#include <ATen/core/CachingHostAllocator.h>

#include "torch/device_allocator.h"
#include "torch/mem_pool.h"
#include "torch/pluggable_allocator.h"

namespace py = pybind11;
using namespace pto::torch_glue;

namespace {

py::dict statDict(const c10::CachingAllocator::Stat& stat) {
  py::dict result;
  result["current"] = stat.current;
  result["peak"] = stat.peak;
  result["allocated"] = stat.allocated;
  result["freed"] = stat.freed;
  return result;
}

py::dict durationDict(const c10::CachingAllocator::DurationStat& stat) {
  py::dict result;
  result["total"] = stat.total;
  result["max"] = stat.max;
  result["min"] = stat.min;
  result["count"] = stat.count;
  result["avg"] = stat.count == 0 ? 0 : stat.total / stat.count;
  return result;
}

// torch.cuda.host_memory_stats_as_nested_dict's keys (torch/csrc/cuda/Module.cpp).
py::dict hostMemoryStats() {
  const at::HostStats stats = at::getHostAllocator(at::kPrivateUse1)->get_stats();
  py::dict result;
  result["num_host_alloc"] = stats.num_host_alloc;
  result["num_host_free"] = stats.num_host_free;
  result["allocations"] = statDict(stats.allocations);
  result["allocated_bytes"] = statDict(stats.allocated_bytes);
  result["active_requests"] = statDict(stats.active_requests);
  result["active_bytes"] = statDict(stats.active_bytes);
  result["host_alloc_time"] = durationDict(stats.host_alloc_time);
  result["host_free_time"] = durationDict(stats.host_free_time);
  return result;
}

c10::DeviceIndex deviceIndex(int device) { return static_cast<c10::DeviceIndex>(device); }

// One aggregate counter of the current device allocator's statistics, for
// torch.pto.memory_allocated and its kin: torch.accelerator's reads it from
// memory_stats, a dict of every counter flattened in Python (~190 us a call here).
int64_t allocatorBytes(int device, const std::string& which, bool peak) {
  c10::DeviceAllocator* allocator = c10::getDeviceAllocator(at::kPrivateUse1);
  if (!allocator->initialized()) return 0;
  const c10::CachingDeviceAllocator::DeviceStats stats = allocator->getDeviceStats(deviceIndex(device));
  TORCH_CHECK(which == "allocated_bytes" || which == "reserved_bytes", "unknown allocator statistic ", which);
  const auto& counters = which == "allocated_bytes" ? stats.allocated_bytes : stats.reserved_bytes;
  const c10::CachingAllocator::Stat& all = counters[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
  return peak ? all.peak : all.current;
}

}  // namespace

void bindMemory(py::module_& m) {
  py::class_<PluggableAllocator, std::shared_ptr<PluggableAllocator>>(m, "_PTOAllocator")
      .def(py::init([](uintptr_t alloc, uintptr_t free) {
             return std::make_shared<PluggableAllocator>(reinterpret_cast<PluggableAllocator::AllocFn>(alloc),
                                                         reinterpret_cast<PluggableAllocator::FreeFn>(free));
           }),
           py::arg("alloc_fn"), py::arg("free_fn"));
  m.def("_change_current_allocator", &changeCurrentAllocator);

  py::class_<MemPool>(m, "_MemPool")
      .def(py::init<std::shared_ptr<PluggableAllocator>, bool, bool>(), py::arg("allocator") = nullptr,
           py::arg("use_on_oom") = false, py::arg("no_split") = false)
      .def_property_readonly("id", &MemPool::id)
      .def_property_readonly("allocator", &MemPool::allocator)
      .def("use_count", &MemPool::useCount);
  m.def("_begin_allocate_current_thread_to_pool",
        [](int device, c10::MempoolId_t id) { beginAllocateCurrentThreadToPool(deviceIndex(device), id); });
  m.def("_end_allocate_to_pool",
        [](int device, c10::MempoolId_t id) { deviceAllocator().endAllocateToPool(deviceIndex(device), id); });
  m.def("_release_pool",
        [](int device, c10::MempoolId_t id) { deviceAllocator().releasePool(deviceIndex(device), id); });

  m.def("_set_memory_fraction",
        [](double fraction, int device) { deviceAllocator().setMemoryFraction(deviceIndex(device), fraction); });
  m.def("_get_memory_fraction", [](int device) { return deviceAllocator().memoryFraction(deviceIndex(device)); });

  m.def("_allocator_bytes", &allocatorBytes, py::arg("device"), py::arg("which"), py::arg("peak"));
  m.def("_host_memory_stats", &hostMemoryStats);
  m.def("_reset_accumulated_host_memory_stats",
        [] { at::getHostAllocator(at::kPrivateUse1)->reset_accumulated_stats(); });
  m.def("_reset_peak_host_memory_stats", [] { at::getHostAllocator(at::kPrivateUse1)->reset_peak_stats(); });
}
