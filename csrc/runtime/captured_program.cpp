// capturedProgram (program.h): a captured graph's nodes rewritten as one program
// over the allocations they touch, for a compiler to optimise and a driver to load.
#include <unordered_map>
#include <utility>
#include <vector>

#include "entry_point.h"
#include "handles.h"
#include "program.h"

namespace pto::rt {
namespace {

// Builds the one program of a graph's nodes (capturedProgram).
class ProgramOfNodes {
 public:
  explicit ProgramOfNodes(Driver* driver) : driver_(driver) {}

  // The buffer standing for the allocation holding [address, address + bytes),
  // and the element offset of `address` in it for `dtype` (false when misaligned).
  ptoError bind(void* address, uint64_t bytes, isa::DType dtype, int32_t* buffer, int64_t* offset) {
    ptoPointerAttributes attributes{};
    PTO_RETURN_IF_ERROR(driver_->pointerGetAttributes(address, &attributes));
    char* base = attributes.base != nullptr ? static_cast<char*>(attributes.base) : static_cast<char*>(address);
    const uint64_t size = attributes.base != nullptr ? attributes.size : bytes;
    const auto bytes_in = static_cast<uint64_t>(static_cast<char*>(address) - base);
    if (bytes_in % isa::dtypeSize(dtype) != 0) {
      return failf(PTO_ERROR_NOT_SUPPORTED, "capturedProgram: ", address, " is not aligned to ",
                   isa::dtypeName(dtype), " inside its allocation");
    }
    auto [it, added] = index_of_.try_emplace(base, static_cast<int32_t>(out_.memory.size()));
    if (added) {
      out_.memory.push_back(base);
      out_.program.buffers.push_back({isa::BufferKind::kInput, size});
    }
    *buffer = it->second;
    *offset = static_cast<int64_t>(bytes_in / isa::dtypeSize(dtype));
    return PTO_SUCCESS;
  }

  ptoError addLaunch(const GraphNode& node) {
    const isa::ScheduledProgram& scheduled = *node.scheduled;
    std::vector<int32_t> buffer_of(scheduled.program.buffers.size(), -1);
    std::vector<int64_t> offset_of(buffer_of.size(), 0);
    for (isa::Instruction instruction : scheduled.program.instructions) {
      for (isa::Operand& operand : instruction.operands) {
        const auto b = static_cast<size_t>(operand.buffer);
        if (scheduled.placements[b].placement != isa::Placement::kBound) {
          if (buffer_of[b] < 0) {  // a temporary of this launch
            buffer_of[b] = static_cast<int32_t>(out_.memory.size());
            out_.memory.push_back(nullptr);
            out_.program.buffers.push_back({isa::BufferKind::kTemp, scheduled.program.buffers[b].bytes});
          }
        } else {
          int64_t offset = 0;
          PTO_RETURN_IF_ERROR(bind(node.buffers[b], scheduled.program.buffers[b].bytes, operand.dtype, &buffer_of[b], &offset));
          offset_of[b] = offset;
        }
        operand.buffer = buffer_of[b];
        operand.offset += offset_of[b];
      }
      add(std::move(instruction));
    }
    return PTO_SUCCESS;
  }

  // A copy or fill of `bytes` bytes: one instruction over u8 views.
  ptoError addBytes(isa::Opcode opcode, void* dst, const void* src, uint64_t bytes, double value) {
    isa::Instruction instruction;
    instruction.opcode = opcode;
    instruction.immediates[0] = value;
    for (const void* address : {static_cast<const void*>(dst), src}) {
      if (address == nullptr) continue;
      isa::Operand operand = isa::contiguousOperand(0, isa::DType::kUInt8, {static_cast<int64_t>(bytes)});
      PTO_RETURN_IF_ERROR(bind(const_cast<void*>(address), bytes, isa::DType::kUInt8, &operand.buffer, &operand.offset));
      instruction.operands.push_back(operand);
    }
    add(std::move(instruction));
    return PTO_SUCCESS;
  }

  CapturedProgram take() { return std::move(out_); }

 private:
  void add(isa::Instruction instruction) {
    isa::Buffer& written = out_.program.buffers[static_cast<size_t>(instruction.operands[0].buffer)];
    if (written.kind == isa::BufferKind::kInput) written.kind = isa::BufferKind::kOutput;
    out_.program.instructions.push_back(std::move(instruction));
  }

  Driver* driver_;
  CapturedProgram out_;
  std::unordered_map<void*, int32_t> index_of_;
};

}  // namespace

ptoError capturedProgram(ptoGraph graph, CapturedProgram* out) {
  PTO_DRIVER_OR_RETURN(driver);
  PTO_RETURN_IF_ERROR(live_graphs.check(graph, "capturedProgram"));
  PTO_REQUIRE(out != nullptr, "capturedProgram: out is null");
  ProgramOfNodes builder(driver);
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    const GraphNode& node = graph->nodes[n];
    switch (node.kind) {
      case GraphNode::Kind::kProgram:
        PTO_RETURN_IF_ERROR(builder.addLaunch(node));
        break;
      case GraphNode::Kind::kMemset:
        PTO_RETURN_IF_ERROR(builder.addBytes(isa::Opcode::kFill, node.dst, nullptr, node.bytes,
                                                     static_cast<uint8_t>(node.fill_value)));
        break;
      case GraphNode::Kind::kMemcpy:
        if (node.copy_kind == PTO_MEMCPY_DEVICE_TO_DEVICE) {
          PTO_RETURN_IF_ERROR(builder.addBytes(isa::Opcode::kMove, node.dst, node.src, node.bytes, 0));
          break;
        }
        return failf(PTO_ERROR_NOT_SUPPORTED, "capturedProgram: node ", n, " copies between host and device memory, "
                     "which no program expresses");
      case GraphNode::Kind::kHostFunc:
        return failf(PTO_ERROR_NOT_SUPPORTED, "capturedProgram: node ", n, " is a host function, which no program "
                     "expresses");
    }
  }
  *out = builder.take();
  return PTO_SUCCESS;
}

}  // namespace pto::rt
