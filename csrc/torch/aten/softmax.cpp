#include "softmax.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/ops/_safe_softmax_compositeexplicitautograd_dispatch.h>

namespace pto::torch_glue {

bool rowOp(const std::string& op, const at::Tensor& out, std::initializer_list<at::Tensor> inputs, int64_t dim) {
  // Integer and complex rows: the CPU kernel's NotImplementedError, from the fallback.
  if (!at::isFloatingType(out.scalar_type())) return false;
  for (const at::Tensor& t : inputs) {
    if (t.scalar_type() != out.scalar_type() || t.device() != out.device() || t.sizes() != out.sizes()) {
      return false;
    }
  }
  at::maybe_wrap_dim(dim, out.dim());  // the CPU's IndexError for a dim out of range
  RecipeCall call(op);
  if (inputs.size() == 1) {
    call.tensor("self", *inputs.begin());
  } else {
    call.tensor("grad_output", *inputs.begin()).tensor("output", *(inputs.begin() + 1));
  }
  return call.value("dim", dim).result(out).launch();
}

at::Tensor safeSoftmax(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  const at::ScalarType out_dtype = dtype.value_or(self.scalar_type());
  if (at::isFloatingType(self.scalar_type()) && at::isFloatingType(out_dtype)) {
    at::Tensor out = at::empty(self.sizes(), self.options().dtype(out_dtype));
    if (RecipeCall("aten::_safe_softmax").tensor("self", self).value("dim", wrapped).result(out).launch()) return out;
  }
  return at::compositeexplicitautograd::_safe_softmax(self, dim, dtype);
}

}  // namespace pto::torch_glue
