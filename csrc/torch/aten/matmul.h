// Matrix products on pto as tmatmul: mm, bmm, addmm, baddbmm (matmul and linear
// reach them through PyTorch's own decompositions).
#pragma once

#include <ATen/ATen.h>

namespace pto::backend {

// out = beta * bias + alpha * (a @ b) for matrices (batched: 3-d batches).
// bias may be undefined. Returns an undefined tensor when PTO cannot run it.
at::Tensor matmulOp(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, double beta,
                    double alpha, const at::Tensor& out, bool batched);

}  // namespace pto::backend
