// The sim driver's implementation of the PTO instructions: execute() runs one
// verified instruction over its buffers' memory, on the calling thread plus the
// simulated device's cores.
#pragma once

#include <span>
#include <string>

#include "isa/program.h"
#include "runtime/pto_runtime.h"

namespace pto::rt::sim::kernels {

// `buffers` holds the base address of each buffer the operands refer to.
void execute(const isa::Instruction& instruction, std::span<void* const> buffers);

// Per family; execute() dispatches on the instruction table's group.
void executeUnary(const isa::Instruction& instruction, std::span<void* const> buffers);
void executeBinary(const isa::Instruction& instruction, std::span<void* const> buffers);
void executeTernary(const isa::Instruction& instruction, std::span<void* const> buffers);
void executeCompare(const isa::Instruction& instruction, std::span<void* const> buffers);
void executeSelect(const isa::Instruction& instruction, std::span<void* const> buffers);
void executeConvert(const isa::Instruction& instruction, std::span<void* const> buffers);
void executeFill(const isa::Instruction& instruction, std::span<void* const> buffers);
void executeReduce(const isa::Instruction& instruction, std::span<void* const> buffers);
void executeMatmul(const isa::Instruction& instruction, std::span<void* const> buffers);
void executeRow(const isa::Instruction& instruction, std::span<void* const> buffers);
void executeNorm(const isa::Instruction& instruction, std::span<void* const> buffers);  // Row: tlayernorm, trmsnorm, trowrstd
void executeGather(const isa::Instruction& instruction, std::span<void* const> buffers);
void executeIota(const isa::Instruction& instruction, std::span<void* const> buffers);
void executeIndexAdd(const isa::Instruction& instruction, std::span<void* const> buffers);
void executeTriangle(const isa::Instruction& instruction, std::span<void* const> buffers);
void executeRandom(const isa::Instruction& instruction, std::span<void* const> buffers);
void executeSort(const isa::Instruction& instruction, std::span<void* const> buffers);
void executeScan(const isa::Instruction& instruction, std::span<void* const> buffers);
void executeScatterElements(const isa::Instruction& instruction, std::span<void* const> buffers);
void executeWrapIndex(const isa::Instruction& instruction, std::span<void* const> buffers);
void executeNonzero(const isa::Instruction& instruction, std::span<void* const> buffers);

}  // namespace pto::rt::sim::kernels
