#include "launch.h"

#include <algorithm>
#include <array>
#include <exception>
#include <memory>
#include <string>

#include "execute.h"
#include "instruction_cost.h"

namespace pto::kernels {
namespace {

constexpr int kMaxBuffers = 4;

// What a launch carries to the worker: too big for the runtime's inline
// argument block, so the block holds a pointer to it and the kernel frees it.
struct LaunchRecord {
  isa::Instruction instruction;
  std::array<void*, kMaxBuffers> buffers{};
  size_t buffer_count = 0;
};

ptoError runRecord(const void* args) {
  std::unique_ptr<LaunchRecord> record(*static_cast<LaunchRecord* const*>(args));
  if (ptoProfilerEnabled()) {
    const InstructionCost cost = costOf(record->instruction);
    ptoProfilerAnnotate(operandSummary(record->instruction).c_str(), cost.bytes, cost.flops);
  }
  try {
    execute(record->instruction, std::span<void* const>(record->buffers.data(), record->buffer_count));
  } catch (const std::exception& error) {
    return ptoSetKernelError(PTO_ERROR_LAUNCH_FAILED, error.what());
  }
  return PTO_SUCCESS;
}

}  // namespace

ptoError launch(ptoStream stream, const isa::Instruction& instruction,
                std::span<void* const> buffers, std::span<const uint64_t> buffer_bytes) {
  if (buffers.size() > kMaxBuffers || buffers.size() != buffer_bytes.size()) {
    return ptoSetKernelError(PTO_ERROR_INVALID_VALUE, "launch: at most 4 buffers, each with a size");
  }
  if (std::string error = isa::verifyInstruction(instruction, buffer_bytes); !error.empty()) {
    return ptoSetKernelError(PTO_ERROR_INVALID_VALUE, error.c_str());
  }
  auto record = std::make_unique<LaunchRecord>();
  record->instruction = instruction;
  std::copy(buffers.begin(), buffers.end(), record->buffers.begin());
  record->buffer_count = buffers.size();
  LaunchRecord* raw = record.get();
  const char* name = isa::info(instruction.opcode).name.data();  // a literal from the table
  const ptoError status = ptoLaunchKernel(stream, name, &runRecord, &raw, sizeof raw);
  if (status == PTO_SUCCESS) record.release();  // the kernel owns it now
  return status;
}

}  // namespace pto::kernels
