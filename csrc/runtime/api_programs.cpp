// The C entry points for programs and captured graphs as handles: loading a
// program (verified first), the checks of a launch's buffers, launching and
// releasing programs and graphs.
#include <memory>
#include <string>
#include <vector>

#include "capture.h"
#include "entry_point.h"
#include "handles.h"
#include "profiler.h"
#include "program.h"

namespace pto::rt {

ptoError loadProgram(std::shared_ptr<const isa::ScheduledProgram> program, ptoProgram* handle) {
  PTO_DRIVER_OR_RETURN(driver);
  if (handle == nullptr || program == nullptr) return fail(PTO_ERROR_INVALID_VALUE, "ptoProgramLoad: null argument");
  if (std::string why = isa::verify(program->program); !why.empty()) {
    return fail(PTO_ERROR_INVALID_VALUE, "ptoProgramLoad: " + why);
  }
  if (std::string why = isa::verifySchedule(*program); !why.empty()) {
    return fail(PTO_ERROR_INVALID_VALUE, "ptoProgramLoad: unsound schedule: " + why);
  }
  auto impl = std::make_unique<ptoProgramImpl>();
  impl->device = tls_current_device;
  impl->program = std::move(program);
  PTO_RETURN_IF_ERROR(driver->loadProgram(impl->device, impl->program, &impl->loaded));
  *handle = impl.release();
  live_programs.add(*handle);
  return PTO_SUCCESS;
}

}  // namespace pto::rt

using pto::rt::live_graphs;
using pto::rt::live_programs;

extern "C" {

ptoError ptoProgramLoad(ptoProgram* program, const char* pto_as) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_REQUIRE(program != nullptr && pto_as != nullptr, "ptoProgramLoad: null argument");
  pto::isa::ParseResult parsed = pto::isa::parse(pto_as);
  PTO_REQUIRE(parsed.error.empty(), "ptoProgramLoad: PTO-AS ", parsed.error);
  return pto::rt::loadProgram(
      std::make_shared<const pto::isa::ScheduledProgram>(pto::isa::scheduleInOrder(std::move(parsed.program))), program);
}

ptoError ptoProgramRelease(ptoProgram program) {
  PTO_DRIVER_OR_RETURN(driver);
  if (program == nullptr) return PTO_SUCCESS;
  PTO_RETURN_IF_ERROR(live_programs.remove(program, "ptoProgramRelease"));
  delete program;  // the driver keeps its program alive while launches of it are queued
  return PTO_SUCCESS;
}

ptoError ptoProgramGetWorkspaceSize(ptoProgram program, size_t* bytes) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_RETURN_IF_ERROR(live_programs.check(program, "ptoProgramGetWorkspaceSize"));
  PTO_REQUIRE(bytes != nullptr, "ptoProgramGetWorkspaceSize: bytes is null");
  *bytes = program->program->workspace_bytes;
  return PTO_SUCCESS;
}

ptoError ptoProgramLaunch(ptoProgram program, ptoStream stream, void* const* buffers,
                          const uint64_t* buffer_bytes, size_t buffer_count, void* workspace) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_RETURN_IF_ERROR(live_programs.check(program, "ptoProgramLaunch"));
  const pto::isa::ScheduledProgram& scheduled = *program->program;
  const std::vector<pto::isa::Buffer>& declared = scheduled.program.buffers;
  PTO_REQUIRE(buffer_count == declared.size(), "ptoProgramLaunch: the program declares ", declared.size(),
              " buffers, the launch binds ", buffer_count);
  PTO_REQUIRE(buffer_count == 0 || (buffers != nullptr && buffer_bytes != nullptr), "ptoProgramLaunch: buffers is null");
  for (size_t b = 0; b < buffer_count; ++b) {
    if (scheduled.placements[b].placement != pto::isa::Placement::kBound) continue;
    PTO_REQUIRE(buffers[b] != nullptr || declared[b].bytes == 0, "ptoProgramLaunch: buffer %", b, " is not bound");
    PTO_REQUIRE(buffer_bytes[b] >= declared[b].bytes, "ptoProgramLaunch: buffer %", b, " needs ", declared[b].bytes,
                " bytes, got ", buffer_bytes[b]);
  }
  PTO_REQUIRE(workspace != nullptr || scheduled.workspace_bytes == 0, "ptoProgramLaunch: the program needs ",
              scheduled.workspace_bytes, " bytes of workspace");
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  int32_t stream_device = -1;
  PTO_RETURN_IF_ERROR(driver->streamGetDevice(stream, &stream_device));
  PTO_REQUIRE(stream_device == program->device, "ptoProgramLaunch: the program is loaded on pto:", program->device,
              ", the stream belongs to pto:", stream_device);
  return pto::rt::issueOrRecord(
      stream, "ptoProgramLaunch",
      [&](pto::rt::GraphNode& node) {
        node.kind = pto::rt::GraphNode::Kind::kProgram;
        node.scheduled = program->program;
        node.program = program->loaded;
        node.buffers.assign(buffers, buffers + buffer_count);
        node.workspace = workspace;
        return PTO_SUCCESS;
      },
      [&] {
        const pto::rt::profiler::LaunchScope launch("ptoProgramLaunch");
        return driver->launchProgram(stream, program->loaded, std::span<void* const>(buffers, buffer_count),
                                     workspace);
      });
}

ptoError ptoGraphLaunch(ptoGraph graph, ptoStream stream) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_RETURN_IF_ERROR(live_graphs.check(graph, "ptoGraphLaunch"));
  PTO_RETURN_IF_ERROR(pto::rt::resolveStream(driver, &stream));
  PTO_REQUIRE(!pto::rt::isCapturing(stream), "ptoGraphLaunch: launching a graph into a capture is not supported");
  int32_t stream_device = -1;
  PTO_RETURN_IF_ERROR(driver->streamGetDevice(stream, &stream_device));
  PTO_REQUIRE(stream_device == graph->device, "ptoGraphLaunch: the graph was captured on pto:", graph->device,
              ", the stream belongs to pto:", stream_device);
  const pto::rt::profiler::LaunchScope launch("ptoGraphLaunch");
  return driver->launchGraph(stream, graph->instantiated);
}

ptoError ptoGraphDestroy(ptoGraph graph) {
  PTO_DRIVER_OR_RETURN(driver);
  if (graph == nullptr) return PTO_SUCCESS;
  PTO_RETURN_IF_ERROR(live_graphs.remove(graph, "ptoGraphDestroy"));
  delete graph;  // the driver keeps its graph alive while launches of it are queued
  return PTO_SUCCESS;
}

ptoError ptoGraphGetNodeCount(ptoGraph graph, size_t* count) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_RETURN_IF_ERROR(live_graphs.check(graph, "ptoGraphGetNodeCount"));
  PTO_REQUIRE(count != nullptr, "ptoGraphGetNodeCount: count is null");
  *count = graph->nodes.size();
  return PTO_SUCCESS;
}

}  // extern "C"
