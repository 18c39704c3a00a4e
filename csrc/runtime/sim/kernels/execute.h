// The sim driver's implementation of the PTO instructions: execute() runs one
// verified instruction over its buffers' memory, on the calling thread plus the
// simulated device's cores.
#pragma once

#include <span>

#include "isa/program.h"

namespace pto::rt::sim::kernels {

// `buffers` holds the base address of each buffer the operands refer to.
void execute(const isa::Instruction& instruction, std::span<void* const> buffers);

// One kernel family per group of instructions.def (executeUnary, executeRow ...), each
// defined in its family's file: execute() indexes a table of them by opcode, built from
// the instruction table, so a group without its family fails the link, naming it. A
// family picks its instruction with dispatchOpcode (opcode_dispatch.h), where an
// instruction without its kernel fails the build.
#define PTO_GROUP(group) \
  void execute##group(const isa::Instruction& instruction, std::span<void* const> buffers);
#include "isa/instructions.def"

}  // namespace pto::rt::sim::kernels
