// Device time in PyTorch's profiler: the PrivateUse1 profiler stubs (as CUDA's and
// torch_npu's). With torch.autograd.profiler.profile(use_device="pto") every op is
// bracketed by two pto events on the current stream, and their elapsed time is the
// op's device time ("Self PTO" in key_averages()). pypto_torch.Profiler shows the
// instructions themselves; this shows them per aten op, beside CPU time. With
// Kineto (torch.profiler's ProfilerActivity.PrivateUse1, or use_kineto=True) the
// device's own activity is shown instead: kineto_profiler.h.
#include <c10/core/DeviceGuard.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include "device.h"
#include "pto_check.h"

namespace pto::torch_glue {
namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

struct PtoProfilerStubs final : torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event, int64_t* cpu_ns) const override {
    const c10::DeviceIndex index = currentDevice();
    if (device != nullptr) *device = index;
    ptoEvent raw = nullptr;
    PTO_CHECK(ptoEventCreate(&raw));
    *event = std::shared_ptr<void>(raw, [](void* e) { ptoEventDestroy(static_cast<ptoEvent>(e)); });
    if (cpu_ns != nullptr) *cpu_ns = c10::getTime();
    PTO_CHECK(ptoEventRecord(raw, currentNativeStream(index)));
  }

  float elapsed(const ProfilerVoidEventStub* start, const ProfilerVoidEventStub* end) const override {
    const auto first = static_cast<ptoEvent>(start->get()), second = static_cast<ptoEvent>(end->get());
    // Failed work between the two still took time; its stream reports the failure.
    ptoEventSynchronize(first);
    ptoEventSynchronize(second);
    float milliseconds = 0;
    PTO_CHECK(ptoEventElapsedTime(&milliseconds, first, second));
    return milliseconds * 1000.0f;  // the profiler counts microseconds
  }

  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }

  void onEachDevice(std::function<void(int)> op) const override {
    for (c10::DeviceIndex index = 0; index < deviceCount(); ++index) {
      const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, index));
      op(index);
    }
  }

  void synchronize() const override { PTO_CHECK(ptoDeviceSynchronize()); }
};

const bool registered = [] {
  static PtoProfilerStubs stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  return true;
}();

}  // namespace
}  // namespace pto::torch_glue
