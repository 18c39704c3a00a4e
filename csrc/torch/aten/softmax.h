// softmax and log_softmax on pto, forward and backward: their recipes
// (csrc/recipes/rows.cpp), one fused row instruction each over the softmax
// dimension moved last (a view, no copy).
#pragma once

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>

#include <initializer_list>

#include "fallback.h"
#include "recipe_launch.h"

namespace pto::torch_glue {

// Runs op's recipe into `out` from `inputs` (self, or grad_output and output), all of
// out's dtype, device and shape. False: not native.
bool rowOp(const std::string& op, const at::Tensor& out, std::initializer_list<at::Tensor> inputs, int64_t dim);

// aten._safe_softmax (attention's softmax in torch's math path): one tsoftmax whose
// rows of -inf give 0; torch's composite (softmax, then a guard) elsewhere (an integer
// or complex input with no floating dtype to compute in: the composite's error).
at::Tensor safeSoftmax(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype);

template <class Op, class Out>
struct Forward {
  static at::Tensor functional(const at::Tensor& self, int64_t dim, bool half_to_float) {
    if (!half_to_float) {
      at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
      if (rowOp(atenName<Op>(), out, {self}, dim)) return out;
    }
    return Fallback<Op>::call(self, dim, half_to_float);
  }
  static at::Tensor& out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& result) {
    if (!half_to_float && result.device() == self.device()) {
      at::native::resize_output(result, self.sizes());
      if (rowOp(atenName<Op>(), result, {self}, dim)) return result;
    }
    return Fallback<Out>::call(self, dim, half_to_float, result);
  }
};

template <class Op, class Out>
struct Backward {
  static at::Tensor functional(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                               at::ScalarType input_dtype) {
    if (input_dtype == grad.scalar_type()) {
      at::Tensor result = at::empty_like(grad, at::MemoryFormat::Contiguous);
      if (rowOp(atenName<Op>(), result, {grad, output}, dim)) return result;
    }
    return Fallback<Op>::call(grad, output, dim, input_dtype);
  }
  static at::Tensor& out(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                         at::ScalarType input_dtype, at::Tensor& result) {
    if (input_dtype == grad.scalar_type() && result.device() == grad.device()) {
      at::native::resize_output(result, grad.sizes());
      if (rowOp(atenName<Op>(), result, {grad, output}, dim)) return result;
    }
    return Fallback<Out>::call(grad, output, dim, input_dtype, result);
  }
};

}  // namespace pto::torch_glue
