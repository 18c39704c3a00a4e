// torch.pto.PTOGraph, as at::cuda::CUDAGraph: a capture of the eager work
// queued on one stream (runtime graph capture, pto_runtime.h) with the memory it
// allocated kept in a private pool of the caching allocator, so that every
// replay finds its tensors at the addresses the capture recorded.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

#include <optional>
#include <string>
#include <vector>

#include "runtime/program.h"
#include "runtime/pto_runtime.h"

namespace pto::torch_glue {

class PTOGraph {
 public:
  // `optimize`: at the end of the capture, the captured work becomes one program
  // the compiler optimises (fusion, memory plan), and a replay launches that.
  explicit PTOGraph(bool optimize = false) : optimize_(optimize) {}
  ~PTOGraph();  // reset(): the graph and its pool go
  PTOGraph(const PTOGraph&) = delete;
  PTOGraph& operator=(const PTOGraph&) = delete;

  // Captures the current stream of the current device, which must not be its
  // default stream. `pool`: share another graph's pool (graphPoolHandle() or a
  // graph's pool()); else a pool of its own. `mode`: "global", "thread_local" or
  // "relaxed" (who may synchronize meanwhile, as torch.cuda.graph's capture_error_mode).
  void captureBegin(std::optional<c10::MempoolId_t> pool, const std::string& mode);
  // Ends the capture; throws, naming the call that invalidated it, when one did.
  void captureEnd();
  // Ends a capture an exception interrupted, keeping nothing of it.
  void abortCapture();
  // Launches the graph on the current stream: one command.
  void replay();
  // Frees the graph and drops its pool (whose memory returns once no graph uses it).
  void reset();
  c10::MempoolId_t pool() const;
  size_t nodeCount() const;
  // Whether a capture ended with a graph that replay() launches.
  bool captured() const { return graph_ != nullptr; }
  // The captured work as one program, in PTO-AS; with optimize, the program
  // the compiler made of it (what replay launches).
  std::string program() const;

 private:
  void compileCaptured();
  void releaseEverything();

  const bool optimize_;
  // With optimize: the compiled program, the memory each of its buffers stands
  // for, their sizes, and the workspace it needs (from the graph's pool).
  std::shared_ptr<const isa::ScheduledProgram> compiled_;
  ptoProgram loaded_ = nullptr;
  std::vector<void*> memory_;
  std::vector<uint64_t> memory_bytes_;
  c10::DataPtr workspace_;

  c10::DeviceIndex device_ = 0;
  std::optional<c10::Stream> capture_stream_;  // while capturing
  std::optional<c10::MempoolId_t> pool_;       // held from captureBegin until reset
  ptoGraph graph_ = nullptr;
};

// A pool id no graph uses yet, for graphs to share (torch.pto.graph_pool_handle()).
c10::MempoolId_t graphPoolHandle();

// Whether `stream` is capturing a graph (torch.Stream.is_capturing).
bool isStreamCapturing(c10::Stream stream);
// Whether the current stream of `device` is capturing a graph.
bool isCurrentStreamCapturing(c10::DeviceIndex device);

// When a call from the torch glue was refused because the current stream
// captures, rethrows `error` saying what was attempted (`what`); else rethrows it as is,
// of its own type. Call it only from the catch block that caught `error`.
[[noreturn]] void rethrowNamingCapture(const c10::Error& error, const std::string& what);

}  // namespace pto::torch_glue
