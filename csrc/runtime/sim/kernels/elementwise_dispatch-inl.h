// What the elementwise kernel files (elementwise_unary.cpp, elementwise_binary.cpp,
// elementwise_select_convert.cpp) share, per Highway target: the opcode dispatch
// (opcode_dispatch.h), the dtypes an opcode takes, the strided loop of an instruction.
// Included once per target (vector_target.h), hence the toggle guard.
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
#include "opcode_dispatch.h"
#include "strided_loop.h"

HWY_BEFORE_NAMESPACE();
namespace pto::rt::sim::kernels::HWY_NAMESPACE {

using isa::Group;
using isa::Opcode;

template <Opcode op, typename T>
constexpr bool accepts() { return isa::acceptedDTypes(op).contains(dtypeOf<T>()); }

inline StridedLoop loopOf(const isa::Instruction& instruction, std::span<void* const> buffers) {
  return makeLoop(instruction.operands, buffers);
}

}  // namespace pto::rt::sim::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // PTO_SIM_KERNELS_ELEMENTWISE_DISPATCH_INL_H_
