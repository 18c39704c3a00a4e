#include "execute.h"

namespace pto::rt::sim::kernels {

void execute(const isa::Instruction& instruction, std::span<void* const> buffers) {
  switch (isa::groupOf(instruction.opcode)) {
    case isa::Group::Unary: return executeUnary(instruction, buffers);
    case isa::Group::Binary: return executeBinary(instruction, buffers);
    case isa::Group::Ternary: return executeTernary(instruction, buffers);
    case isa::Group::Compare: return executeCompare(instruction, buffers);
    case isa::Group::Select: return executeSelect(instruction, buffers);
    case isa::Group::Convert: return executeConvert(instruction, buffers);
    case isa::Group::Fill: return executeFill(instruction, buffers);
    case isa::Group::Reduce: return executeReduce(instruction, buffers);
    case isa::Group::Matmul: return executeMatmul(instruction, buffers);
    case isa::Group::Row:
      switch (instruction.opcode) {
        case isa::Opcode::kLayerNorm:
        case isa::Opcode::kRmsNorm:
        case isa::Opcode::kRowRstd: return executeNorm(instruction, buffers);
        default: return executeRow(instruction, buffers);
      }
    case isa::Group::Gather: return executeGather(instruction, buffers);
    case isa::Group::Iota: return executeIota(instruction, buffers);
    case isa::Group::Scatter: return executeIndexAdd(instruction, buffers);
    case isa::Group::Triangle: return executeTriangle(instruction, buffers);
    case isa::Group::Random: return executeRandom(instruction, buffers);
    case isa::Group::Sort: return executeSort(instruction, buffers);
    case isa::Group::Scan: return executeScan(instruction, buffers);
    case isa::Group::ScatterElements: return executeScatterElements(instruction, buffers);
    case isa::Group::WrapIndex: return executeWrapIndex(instruction, buffers);
    case isa::Group::Nonzero: return executeNonzero(instruction, buffers);
  }
}

}  // namespace pto::rt::sim::kernels
