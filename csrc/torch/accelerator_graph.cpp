// torch.accelerator.Graph on pto: torch's device-generic graph interface
// (ATen/core/GraphImplInterface.h) over PTOGraph, which captures, replays and keeps
// the pool; the same refusals with the same messages. What the interface adds:
// its capture modes, keep_graph's explicit instantiate(), and a debug dump.
#include <ATen/core/GraphImplInterface.h>
#include <c10/util/Exception.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "pto_graph.h"

namespace pto::torch_glue {
namespace {

// torch.cuda's default is "global"; PTOGraph takes torch.cuda.graph's names.
const char* captureModeName(at::GraphCaptureMode mode) {
  switch (mode) {
    case at::GraphCaptureMode::Default:
    case at::GraphCaptureMode::Global: return "global";
    case at::GraphCaptureMode::ThreadLocal: return "thread_local";
    case at::GraphCaptureMode::Relaxed: return "relaxed";
  }
  TORCH_CHECK_VALUE(false, "unknown graph capture mode ", static_cast<int>(mode));
}

class AcceleratorGraph final : public at::GraphImplInterface {
 public:
  // keep_graph changes nothing on pto: the runtime instantiates a graph as its
  // capture ends (ptoStreamEndCapture), and the captured program stays readable
  // (program(), debug_dump) either way; instantiate() is then only a check.
  explicit AcceleratorGraph(const at::GraphImplArgs&) {}

  void capture_begin(at::MempoolId_t pool, at::GraphCaptureMode mode) override {
    // {0, 0}: no pool given, the graph gets one of its own.
    const bool shared = pool != at::MempoolId_t{0, 0};
    graph_.captureBegin(shared ? std::optional(pool) : std::nullopt, captureModeName(mode));
  }

  void capture_end() override { graph_.captureEnd(); }

  void instantiate() override {
    TORCH_CHECK(graph_.captured(), "Graph.instantiate: nothing was captured (or the graph was reset)");
  }

  void replay() override { graph_.replay(); }

  void reset() override { graph_.reset(); }

  at::MempoolId_t pool() const override { return graph_.pool(); }

  void enable_debug_mode() override { debug_mode_ = true; }

  // The captured program in PTO-AS, as torch.cuda's dumps its graph in DOT.
  void debug_dump(const std::string& path) override {
    if (!debug_mode_) {
      TORCH_WARN("pto graph debug_dump: debug mode is not enabled, set it with [graph].enable_debug_mode()");
      return;
    }
    const std::string program = graph_.program();
    std::ofstream file(path);
    TORCH_CHECK(file, "Graph.debug_dump: cannot write '", path, "': ", std::strerror(errno));
    file << program;
    TORCH_CHECK(file.flush(), "Graph.debug_dump: writing '", path, "' failed: ", std::strerror(errno));
  }

 private:
  PTOGraph graph_;
  bool debug_mode_ = false;
};

}  // namespace
}  // namespace pto::torch_glue

namespace at {
// torch looks the implementation up by c10::DeviceTypeName(PrivateUse1, /*lower_case=*/false):
// the backend's name upper-cased once pypto_torch renamed it to "pto" ("PrivateUse1" before).
REGISTER_GRAPH_IMPL(PTO, pto::torch_glue::AcceleratorGraph);
}  // namespace at
