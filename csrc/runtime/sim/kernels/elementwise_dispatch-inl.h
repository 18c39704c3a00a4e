// What the elementwise kernel files (elementwise_unary.cpp, elementwise_binary.cpp,
// elementwise_select_convert.cpp) share, per Highway target: the opcode dispatch of
// one instruction group, the dtypes an opcode takes, the strided loop of an
// instruction. Included once per target (vector_target.h), hence the toggle guard.
#if defined(PTO_SIM_KERNELS_ELEMENTWISE_DISPATCH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PTO_SIM_KERNELS_ELEMENTWISE_DISPATCH_INL_H_
#undef PTO_SIM_KERNELS_ELEMENTWISE_DISPATCH_INL_H_
#else
#define PTO_SIM_KERNELS_ELEMENTWISE_DISPATCH_INL_H_
#endif

#include <hwy/highway.h>

#include <span>

#include "element_types.h"
#include "isa/instructions.h"
#include "isa/program.h"
#include "strided_loop.h"

HWY_BEFORE_NAMESPACE();
namespace pto::rt::sim::kernels::HWY_NAMESPACE {

using isa::Group;
using isa::Opcode;

// Calls fn.template operator()<op>() for the opcode, among those of `group`.
template <Group group, typename Fn>
void dispatchOpcode(Opcode opcode, Fn&& fn) {
  switch (opcode) {
#define PTO_INSTRUCTION(op, name, grp, inputs, dtypes, output, immediates, properties) \
    case Opcode::op:                                                        \
      if constexpr (Group::grp == group) fn.template operator()<Opcode::op>(); \
      return;
#include "isa/instructions.def"
#undef PTO_INSTRUCTION
  }
}

template <Opcode op, typename T>
constexpr bool accepts() { return isa::acceptedDTypes(op).contains(dtypeOf<T>()); }

inline StridedLoop loopOf(const isa::Instruction& instruction, std::span<void* const> buffers) {
  return makeLoop(instruction.operands, buffers);
}

}  // namespace pto::rt::sim::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // PTO_SIM_KERNELS_ELEMENTWISE_DISPATCH_INL_H_
