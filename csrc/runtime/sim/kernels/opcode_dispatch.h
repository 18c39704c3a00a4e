// How a kernel family picks the kernel of one instruction: from the instruction table,
// never from a list of its opcodes, so that a row added to a group reaches its family's
// per-instruction template, which fails the build (a static_assert naming the family)
// until it implements the instruction.
#pragma once

#include <stdexcept>
#include <string>

#include "isa/instructions.h"

namespace pto::rt::sim::kernels {

// Calls fn.template operator()<op>() for the opcode, one of `group`'s.
template <isa::Group group, typename Fn>
void dispatchOpcode(isa::Opcode opcode, Fn&& fn) {
  switch (opcode) {
#define PTO_INSTRUCTION(op, name, grp, inputs, dtypes, output, immediates, properties) \
    case isa::Opcode::op:                                                          \
      if constexpr (isa::Group::grp == group) return fn.template operator()<isa::Opcode::op>(); \
      break;
#include "isa/instructions.def"
  }
  // execute() sends each instruction to its own group's family: another family's is a bug here.
  throw std::logic_error(std::string(isa::info(opcode).name) + " is not a " +
                         std::string(isa::groupName(group)) + " instruction");
}

// Whether `ops` are exactly `group`'s instructions: a family that runs its whole group
// with one kernel says which instructions it covers, checked against the table in a
// static_assert, so that a row added to its group fails the build there.
template <isa::Group group, isa::Opcode... ops>
constexpr bool coversGroup() {
  size_t in_group = 0;
  for (size_t i = 0; i < isa::kOpcodeCount; ++i) in_group += isa::groupOf(static_cast<isa::Opcode>(i)) == group;
  return in_group == sizeof...(ops) && ((isa::groupOf(ops) == group) && ...);
}

}  // namespace pto::rt::sim::kernels
