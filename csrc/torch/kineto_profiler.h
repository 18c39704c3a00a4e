// Device activity in torch.profiler: a Kineto child profiler, as torch_npu's and
// Intel XPU's, registered through torch's PrivateUse1 profiler registry.
//
// With ProfilerActivity.PrivateUse1 (torch.profiler) or use_device="pto", Kineto
// asks PtoActivityProfiler for a session. While it runs, the session subscribes to
// the runtime's activity records, and Kineto's correlation id of each enclosing
// aten op is pushed to the runtime as an external id, so every launch names the op
// that made it. When the trace is processed the session hands Kineto, per launch,
// the runtime call on its host thread (PRIVATEUSE1_RUNTIME) and the kernels, copies
// and fills it queued on (device, stream), both linked to the op and joined by a
// flow. Only the runtime's profiler API is read: nothing here knows the driver.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>

#include "runtime/pto_runtime.h"

namespace pto::torch_glue {

class PtoActivityProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  PtoActivityProfilerSession();
  ~PtoActivityProfilerSession() override;

  void start() override;
  void stop() override;
  std::vector<std::string> errors() override { return {}; }
  void processTrace(libkineto::ActivityLogger& logger) override;
  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked_activity,
                    int64_t start_time, int64_t end_time) override;
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override;
  std::vector<libkineto::ResourceInfo> getResourceInfos() override;
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(trace_); }
  void pushCorrelationId(uint64_t id) override;
  void popCorrelationId() override;

 private:
  static void onRecord(const ptoActivity* activity, void* session);
  // Kineto's clock (the system clock, ns) for a time of the runtime's (steady, ns).
  int64_t kinetoTime(uint64_t runtime_ns) const { return static_cast<int64_t>(runtime_ns) + clock_offset_ns_; }
  int32_t streamLane(int32_t device, uint64_t stream);
  static libkineto::DeviceInfo deviceInfo(int32_t device);

  std::mutex mutex_;
  std::vector<ptoActivity> records_;  // guarded by mutex_
  bool subscribed_ = false;
  int64_t clock_offset_ns_ = 0;
  std::map<std::pair<int32_t, uint64_t>, int32_t> lanes_;  // (device, stream) -> its lane on the device, by first use
  std::set<int32_t> devices_;                              // the devices that ran something
  std::unique_ptr<libkineto::CpuTraceBuffer> trace_;
};

class PtoActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return activities_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& activity_types,
                                                                 const libkineto::Config& config) override;
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t ts_ms, int64_t duration_ms,
                                                                 const std::set<libkineto::ActivityType>& activity_types,
                                                                 const libkineto::Config& config) override;

 private:
  std::string name_{"pto"};
  std::set<libkineto::ActivityType> activities_{
      libkineto::ActivityType::CONCURRENT_KERNEL, libkineto::ActivityType::GPU_MEMCPY,
      libkineto::ActivityType::GPU_MEMSET, libkineto::ActivityType::PRIVATEUSE1_RUNTIME};
};

}  // namespace pto::torch_glue
