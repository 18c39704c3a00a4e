#include "execute.h"

#include <iterator>

namespace pto::rt::sim::kernels {
namespace {

using Kernel = void (*)(const isa::Instruction&, std::span<void* const>);

// Each instruction's kernel family, in opcode order.
constexpr Kernel kKernels[] = {
#define PTO_INSTRUCTION(op, name, group, inputs, dtypes, output, immediates, properties) &execute##group,
#include "isa/instructions.def"
};
static_assert(std::size(kKernels) == isa::kOpcodeCount);

}  // namespace

void execute(const isa::Instruction& instruction, std::span<void* const> buffers) {
  kKernels[static_cast<size_t>(instruction.opcode)](instruction, buffers);
}

}  // namespace pto::rt::sim::kernels
