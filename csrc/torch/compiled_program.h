// A compiled PTO program run over torch tensors, for the `pypto` torch.compile
// backend: each input and output buffer is bound to a tensor's own memory (pto
// tensors; on the simulated device also CPU tensors, whose memory is the same host
// memory: zero copy), temporaries go to one arena from the caching allocator, and
// the whole program is ONE launch on the current stream.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/compiled_program.h"

namespace pto::backend {

class CompiledGraphProgram {
 public:
  // Parses PTO-AS and runs the compiler's passes; throws std::invalid_argument
  // naming the line (parse errors) or the pass and instruction (verification).
  CompiledGraphProgram(const std::string& pto_as, bool debug, bool fuse = true);

  std::string text() const { return compiler::print(*compiled_); }
  int fusedKernels() const { return compiled_->fusedKernelCount(); }
  int kernelCount() const { return static_cast<int>(compiled_->kernels.size()); }
  uint64_t arenaBytes() const { return compiled_->arena_bytes; }
  int instructionCount() const { return static_cast<int>(compiled_->program.instructions.size()); }
  // Each buffer's kind as PTO-AS names it: "input", "output" or "temp".
  std::vector<std::string> bufferKinds() const;

  // One tensor per buffer, in order (none for temporaries), launched on the current
  // stream of pto device `device`. Returns without waiting, as eager ops do.
  void run(const std::vector<std::optional<at::Tensor>>& buffers, c10::DeviceIndex device) const;

 private:
  std::shared_ptr<const compiler::CompiledProgram> compiled_;
};

}  // namespace pto::backend
