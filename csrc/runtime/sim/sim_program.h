// A program loaded onto the simulated device, and the executor that runs it: the
// one place where PTO programs become calls of the instruction kernels. A stage
// runs its instructions whole, spread over the device's cores; a tiled stage runs
// tile by tile, its tiles spread over the cores, each core with its own scratch.
// At-load stages run once, when the program is made, into its constants.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "../driver.h"

namespace pto::rt::sim {

class SimProgram final : public DeviceProgram {
 public:
  // Runs the at-load stages; throws std::runtime_error as run() does when one fails.
  explicit SimProgram(std::shared_ptr<const isa::ScheduledProgram> scheduled);

  const isa::ScheduledProgram& scheduled() const { return *scheduled_; }
  // What a failure of a launch names: the instruction of a one-instruction
  // program (an eager op), else "program". A literal: it outlives every launch.
  const char* name() const { return name_; }

  // Every buffer's address for one launch: the bound ones from `bound`, the
  // workspace, in-output and constant temporaries where the schedule places them
  // (the scratch ones are set per tile when the program runs).
  std::vector<void*> bufferAddresses(std::span<void* const> bound, void* workspace) const;

  // Runs the program's stages but the at-load ones over `buffers`. Throws std::runtime_error "instruction N
  // (mnemonic): why" (just "why" for a one-instruction program) when one fails.
  // While profiling, `inside` receives an activity per stage of a program of
  // several instructions.
  void run(std::span<void* const> buffers, std::vector<ptoActivity>* inside) const;

  // The activity a launch records: kind, name, detail, bytes and FLOPs (the
  // stream fills in the device, the stream and the times). Computed once, at the
  // first launch that is profiled.
  const ptoActivity& launchActivity() const;

 private:
  void runStage(size_t s, std::span<void* const> buffers) const;
  void runTiles(size_t s, std::span<void* const> buffers, int64_t begin, int64_t end) const;
  ptoActivity stageActivity(const isa::Stage& stage, uint64_t start_ns) const;

  const std::shared_ptr<const isa::ScheduledProgram> scheduled_;
  const char* name_;
  std::vector<std::vector<int32_t>> scratch_of_;  // per stage, the buffers in its tile scratch
  // What the at-load stages wrote: the program's own memory, as a real device keeps
  // a loaded module's constants beside its code, not an allocation of the user's.
  struct FreeAligned {
    void operator()(char* memory) const;
  };
  std::unique_ptr<char, FreeAligned> constants_;
  mutable std::once_flag activity_once_;
  mutable ptoActivity activity_{};
};

}  // namespace pto::rt::sim
