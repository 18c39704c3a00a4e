#include "kineto_profiler.h"

#include <algorithm>
#include <chrono>
#include <iterator>

#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include "pto_check.h"

namespace pto::torch_glue {
namespace {

using libkineto::ActivityType;

// Where device lanes sort in a trace viewer: after the host's processes.
constexpr int64_t kDeviceSortIndex = 1 << 24;

// Depth of the ids this thread pushed to the runtime: Kineto may pop an id it
// pushed before this session existed.
thread_local int tls_pushed_ids = 0;

ActivityType deviceActivityType(ptoActivityKind kind) {
  switch (kind) {
    case PTO_ACTIVITY_COPY: return ActivityType::GPU_MEMCPY;
    case PTO_ACTIVITY_FILL: return ActivityType::GPU_MEMSET;
    default: return ActivityType::CONCURRENT_KERNEL;
  }
}

bool requested(const std::set<ActivityType>& activity_types) {
  return activity_types.contains(ActivityType::CONCURRENT_KERNEL) ||
         activity_types.contains(ActivityType::GPU_MEMCPY) || activity_types.contains(ActivityType::GPU_MEMSET);
}

}  // namespace

PtoActivityProfilerSession::PtoActivityProfilerSession() = default;

PtoActivityProfilerSession::~PtoActivityProfilerSession() {
  if (subscribed_) ptoProfilerUnsubscribe(&onRecord, this);
}

void PtoActivityProfilerSession::start() {
  using namespace std::chrono;
  const int64_t system_ns = duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count();
  clock_offset_ns_ = system_ns - static_cast<int64_t>(ptoProfilerNow());
  PTO_CHECK(ptoProfilerSubscribe(&onRecord, this));
  subscribed_ = true;
  status_ = libkineto::TraceStatus::RECORDING;
}

// torch.profiler synchronizes the device before it stops the trace, so the work
// its ops queued has been recorded.
void PtoActivityProfilerSession::stop() {
  if (subscribed_) PTO_CHECK(ptoProfilerUnsubscribe(&onRecord, this));
  subscribed_ = false;
  status_ = libkineto::TraceStatus::PROCESSING;
}

void PtoActivityProfilerSession::onRecord(const ptoActivity* activity, void* session) {
  auto* self = static_cast<PtoActivityProfilerSession*>(session);
  const std::lock_guard<std::mutex> lock(self->mutex_);
  self->records_.push_back(*activity);
}

void PtoActivityProfilerSession::pushCorrelationId(uint64_t id) {
  ptoProfilerPushExternalId(id);
  ++tls_pushed_ids;
}

void PtoActivityProfilerSession::popCorrelationId() {
  if (tls_pushed_ids == 0) return;
  --tls_pushed_ids;
  ptoProfilerPopExternalId();
}

int32_t PtoActivityProfilerSession::streamLane(int32_t device, uint64_t stream) {
  const auto found = lanes_.find({device, stream});
  if (found != lanes_.end()) return found->second;
  const auto on_device = std::count_if(lanes_.begin(), lanes_.end(), [&](const auto& lane) { return lane.first.first == device; });
  return lanes_[{device, stream}] = static_cast<int32_t>(on_device);
}

void PtoActivityProfilerSession::processTrace(libkineto::ActivityLogger& logger) {
  processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
}

void PtoActivityProfilerSession::processTrace(libkineto::ActivityLogger& logger,
                                              libkineto::getLinkedActivityCallback linked_activity, int64_t start_time,
                                              int64_t end_time) {
  std::vector<ptoActivity> records;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    records.swap(records_);
  }
  std::map<uint64_t, uint64_t> external_ids;  // a launch's correlation id -> the enclosing op's
  for (const ptoActivity& a : records) {
    if (a.kind == PTO_ACTIVITY_LAUNCH) external_ids[a.correlation_id] = a.external_id;
  }
  auto linked = [&](uint64_t correlation) -> const libkineto::ITraceActivity* {
    const auto found = external_ids.find(correlation);
    return found == external_ids.end() || found->second == 0 ? nullptr
                                                             : linked_activity(static_cast<int32_t>(found->second));
  };

  trace_ = std::make_unique<libkineto::CpuTraceBuffer>();
  trace_->span = libkineto::TraceSpan(start_time, end_time, "pto");
  trace_->gpuOpCount = -1;
  for (const ptoActivity& a : records) {
    // A program's time is its stages': they are its leaves, as in pypto.Profiler.
    if (a.kind == PTO_ACTIVITY_PROGRAM) continue;
    const bool launch = a.kind == PTO_ACTIVITY_LAUNCH;
    trace_->emplace_activity(trace_->span, launch ? ActivityType::PRIVATEUSE1_RUNTIME : deviceActivityType(a.kind),
                             std::string(a.name));
    libkineto::GenericTraceActivity& act = *trace_->activities.back();
    act.startTime = kinetoTime(a.start_ns);
    act.endTime = kinetoTime(a.end_ns);
    act.id = static_cast<int32_t>(a.correlation_id);
    act.linked = linked(a.correlation_id);
    if (launch) {
      act.device = static_cast<int32_t>(libkineto::processId());
      act.resource = static_cast<int32_t>(a.thread_id);
      act.threadId = act.resource;
    } else {
      act.device = a.device;
      act.resource = streamLane(a.device, a.stream);
      devices_.insert(a.device);
      act.addMetadataQuoted("operands", a.detail);
      act.addMetadata("stream", a.stream);
      act.addMetadata("bytes", a.bytes);
    }
    act.addMetadata("correlation", a.correlation_id);
    if (a.correlation_id != 0) {
      act.flow.id = static_cast<uint32_t>(a.correlation_id);
      act.flow.type = libkineto::kLinkAsyncCpuGpu;
      act.flow.start = launch;
    }
    logger.handleActivity(act);
  }
  // Kineto names one device per session (getDeviceInfo): the first; the others here.
  for (auto device = std::next(devices_.begin(), devices_.empty() ? 0 : 1); device != devices_.end(); ++device) {
    logger.handleDeviceInfo(deviceInfo(*device), start_time);
  }
}

libkineto::DeviceInfo PtoActivityProfilerSession::deviceInfo(int32_t device) {
  return {device, kDeviceSortIndex + device, "pto:" + std::to_string(device), "PTO " + std::to_string(device)};
}

std::unique_ptr<libkineto::DeviceInfo> PtoActivityProfilerSession::getDeviceInfo() {
  if (devices_.empty()) return nullptr;
  return std::make_unique<libkineto::DeviceInfo>(deviceInfo(*devices_.begin()));
}

std::vector<libkineto::ResourceInfo> PtoActivityProfilerSession::getResourceInfos() {
  std::vector<libkineto::ResourceInfo> infos;
  for (const auto& [key, lane] : lanes_) {
    const auto& [device, stream] = key;
    infos.push_back({lane, lane, device, "stream " + std::to_string(lane)});
  }
  return infos;
}

std::unique_ptr<libkineto::IActivityProfilerSession> PtoActivityProfiler::configure(
    const std::set<ActivityType>& activity_types, const libkineto::Config&) {
  if (!requested(activity_types)) return nullptr;
  return std::make_unique<PtoActivityProfilerSession>();
}

std::unique_ptr<libkineto::IActivityProfilerSession> PtoActivityProfiler::configure(
    int64_t, int64_t, const std::set<ActivityType>& activity_types, const libkineto::Config& config) {
  return configure(activity_types, config);
}

REGISTER_PRIVATEUSE1_PROFILER(PtoActivityProfiler);

}  // namespace pto::torch_glue
