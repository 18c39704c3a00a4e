// A bound program: a PTO program the compiler scheduled, run over torch tensors,
// for the `pypto` torch.compile backend and pypto.asm. Each input and output
// buffer is bound to a tensor's own memory (pto tensors; CPU tensors too where
// the device reaches host memory: zero copy), temporaries go to one workspace
// from the caching allocator, and the whole program is ONE launch on the current
// stream. It is loaded onto a device at its first run there.
#pragma once

#include <ATen/ATen.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "isa/schedule.h"
#include "runtime/pto_runtime.h"

namespace pto::torch_glue {

class BoundProgram {
 public:
  // Parses PTO-AS and runs the compiler's passes for the current device; throws
  // std::invalid_argument naming the line (parse errors) or the pass and
  // instruction (verification).
  BoundProgram(const std::string& pto_as, bool debug, bool fuse = true);
  ~BoundProgram();
  BoundProgram(const BoundProgram&) = delete;
  BoundProgram& operator=(const BoundProgram&) = delete;

  std::string text() const { return isa::print(*scheduled_); }
  int fusedStages() const { return scheduled_->fusedStageCount(); }
  int stageCount() const { return static_cast<int>(scheduled_->stages.size()); }
  uint64_t workspaceBytes() const { return scheduled_->workspace_bytes; }
  int instructionCount() const { return static_cast<int>(scheduled_->program.instructions.size()); }
  // Each buffer's kind as PTO-AS names it: "input", "output" or "temp".
  std::vector<std::string> bufferKinds() const;

  // One tensor per buffer, in order (none for temporaries), launched on the current
  // stream of pto device `device`. Returns without waiting, as eager ops do.
  void run(const std::vector<std::optional<at::Tensor>>& buffers, c10::DeviceIndex device);

 private:
  // The program on `device`, loaded at the first run there (an invalid index throws).
  struct Loaded {
    std::atomic<ptoProgram> program{nullptr};  // published after binds_host_memory is set
    bool binds_host_memory = false;            // the device reaches CPU tensors' memory
  };
  const Loaded& loadedOn(c10::DeviceIndex device);

  std::shared_ptr<const isa::ScheduledProgram> scheduled_;
  std::mutex load_mutex_;
  const c10::DeviceIndex device_count_;
  const std::unique_ptr<Loaded[]> loaded_;  // per device
};

}  // namespace pto::torch_glue
