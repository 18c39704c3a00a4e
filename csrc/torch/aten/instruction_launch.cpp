#include "instruction_launch.h"

#include <vector>

#include "../device.h"
#include "../dtype_map.h"
#include "../pto_check.h"
#include "../program_cache.h"

namespace pto::backend {

namespace {

isa::Operand operandOf(const at::Tensor& tensor, int32_t buffer) {
  const auto dtype = ptoDType(tensor.scalar_type());
  TORCH_CHECK(dtype, "pto: dtype ", tensor.scalar_type(), " has no PTO equivalent");
  TORCH_CHECK(tensor.dim() <= isa::kMaxRank, "pto: tensors of rank ", tensor.dim(),
              " exceed the PTO limit of ", isa::kMaxRank);
  isa::Operand operand;
  operand.buffer = buffer;
  operand.dtype = *dtype;
  operand.rank = static_cast<int32_t>(tensor.dim());
  for (int64_t d = 0; d < tensor.dim(); ++d) {
    operand.shape[d] = tensor.size(d);
    operand.strides[d] = tensor.stride(d);
  }
  operand.offset = tensor.storage_offset();
  return operand;
}

// An instruction under construction: its operands and the buffers behind them.
struct Launch {
  isa::Instruction instruction;
  std::vector<void*> buffers;
  std::vector<uint64_t> sizes;

  Launch(isa::Opcode opcode, std::array<double, isa::kMaxImmediates> immediates) {
    instruction.opcode = opcode;
    instruction.immediates = immediates;
  }

  isa::Operand& bind(const at::Tensor& tensor, const at::Tensor& out) {
    TORCH_CHECK(tensor.device() == out.device(), isa::info(instruction.opcode).name, ": operand on ",
                tensor.device(), " but the output is on ", out.device());
    const auto buffer = static_cast<int32_t>(buffers.size());
    instruction.operands.push_back(operandOf(tensor, buffer));
    buffers.push_back(tensor.storage().mutable_data());
    sizes.push_back(tensor.storage().nbytes());
    return instruction.operands.back();
  }

  // The instruction is a one-instruction program, loaded once per device and kept.
  void onStreamOf(const at::Tensor& out) {
    const c10::DeviceIndex device = out.device().index();
    const ptoProgram program = loadedProgram(instruction, device);
    const ptoStream stream = nativeStream(currentStream(device));
    PTO_CHECK(ptoProgramLaunch(program, stream, buffers.data(), sizes.data(), buffers.size(), nullptr));
  }
};

}  // namespace

void launchInstruction(isa::Opcode opcode, const at::Tensor& out,
                       std::initializer_list<at::Tensor> inputs,
                       std::array<double, isa::kMaxImmediates> immediates) {
  Launch launch(opcode, immediates);
  launch.bind(out, out);
  for (const at::Tensor& input : inputs) launch.bind(input, out);
  launch.onStreamOf(out);
}

void launchReversedMove(const at::Tensor& out, const at::Tensor& in, std::bitset<isa::kMaxRank> reversed) {
  Launch launch(isa::Opcode::kMove, {});
  launch.bind(out, out);
  isa::Operand& source = launch.bind(in, out);
  for (int d = 0; d < source.rank; ++d) {
    if (!reversed.test(static_cast<size_t>(d)) || source.shape[d] == 0) continue;
    source.offset += (source.shape[d] - 1) * source.strides[d];
    source.strides[d] = -source.strides[d];
  }
  launch.onStreamOf(out);
}

}  // namespace pto::backend
