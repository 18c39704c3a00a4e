// softmax and log_softmax on pto, forward and backward: one fused row
// instruction each, over the softmax dimension moved last (a view, no copy).
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/Operators.h>
#include <torch/library.h>

#include "../dtype_map.h"
#include "fallback.h"
#include "instruction_launch.h"

namespace pto::backend {
namespace {

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

template <Opcode opcode, class Op, class Out>
struct Forward {
  static at::Tensor functional(const at::Tensor& self, int64_t dim, bool half_to_float) {
    if (!half_to_float) {
      at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
      if (rowOp(opcode, out, {self}, dim)) return out;
    }
    return Fallback<Op>::call(self, dim, half_to_float);
  }
  static at::Tensor& out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& result) {
    if (!half_to_float && result.device() == self.device()) {
      at::native::resize_output(result, self.sizes());
      if (rowOp(opcode, result, {self}, dim)) return result;
    }
    return Fallback<Out>::call(self, dim, half_to_float, result);
  }
};

template <Opcode opcode, class Op, class Out>
struct Backward {
  static at::Tensor functional(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                               at::ScalarType input_dtype) {
    if (input_dtype == grad.scalar_type()) {
      at::Tensor result = at::empty_like(grad, at::MemoryFormat::Contiguous);
      if (rowOp(opcode, result, {grad, output}, dim)) return result;
    }
    return Fallback<Op>::call(grad, output, dim, input_dtype);
  }
  static at::Tensor& out(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                         at::ScalarType input_dtype, at::Tensor& result) {
    if (input_dtype == grad.scalar_type() && result.device() == grad.device()) {
      at::native::resize_output(result, grad.sizes());
      if (rowOp(opcode, result, {grad, output}, dim)) return result;
    }
    return Fallback<Out>::call(grad, output, dim, input_dtype, result);
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  {
    using F = Forward<Opcode::kSoftmax, ATEN_OP(_softmax), ATEN_OP2(_softmax, out)>;
    m.impl("_softmax", TORCH_FN(F::functional));
    m.impl("_softmax.out", TORCH_FN(F::out));
  }
  {
    using F = Forward<Opcode::kLogSoftmax, ATEN_OP(_log_softmax), ATEN_OP2(_log_softmax, out)>;
    m.impl("_log_softmax", TORCH_FN(F::functional));
    m.impl("_log_softmax.out", TORCH_FN(F::out));
  }
  {
    using F = Backward<Opcode::kSoftmaxGrad, ATEN_OP(_softmax_backward_data),
                       ATEN_OP2(_softmax_backward_data, out)>;
    m.impl("_softmax_backward_data", TORCH_FN(F::functional));
    m.impl("_softmax_backward_data.out", TORCH_FN(F::out));
  }
  {
    using F = Backward<Opcode::kLogSoftmaxGrad, ATEN_OP(_log_softmax_backward_data),
                       ATEN_OP2(_log_softmax_backward_data, out)>;
    m.impl("_log_softmax_backward_data", TORCH_FN(F::functional));
    m.impl("_log_softmax_backward_data.out", TORCH_FN(F::out));
  }
}

}  // namespace pto::backend
