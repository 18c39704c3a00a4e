#include "softmax.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>

#include "../dtype_map.h"
#include "instruction_launch.h"

namespace pto::backend {

using isa::Opcode;

// Runs a row instruction with `dim` moved last in every operand. False: not native.
bool rowOp(Opcode opcode, const at::Tensor& out, std::initializer_list<at::Tensor> inputs, int64_t dim) {
  for (const at::Tensor& t : inputs) {
    if (t.scalar_type() != out.scalar_type() || t.device() != out.device() || t.sizes() != out.sizes()) {
      return false;
    }
  }
  if (!accepts(opcode, out.scalar_type())) return false;
  if (out.numel() == 0) return true;
  const int64_t d = at::maybe_wrap_dim(dim, out.dim());
  std::vector<at::Tensor> moved;
  for (const at::Tensor& t : inputs) moved.push_back(out.dim() == 0 ? t : t.movedim(d, -1));
  const at::Tensor target = out.dim() == 0 ? out : out.movedim(d, -1);
  if (moved.size() == 1) launchInstruction(opcode, target, {moved[0]});
  else launchInstruction(opcode, target, {moved[0], moved[1]});
  return true;
}

}  // namespace pto::backend
