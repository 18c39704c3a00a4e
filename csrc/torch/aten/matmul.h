// Matrix products on pto as tmatmul: mm, bmm, addmm, baddbmm (matmul and linear
// reach them through PyTorch's own decompositions).
#pragma once

#include <ATen/ATen.h>

namespace pto::backend {

// out = beta * bias + alpha * (a @ b) for matrices (batched: 3-d batches).
// bias may be undefined. Returns an undefined tensor when PTO cannot run it
// (complex tensors or scalars among them).
at::Tensor matmulOp(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, const at::Scalar& beta,
                    const at::Scalar& alpha, const at::Tensor& out, bool batched);

}  // namespace pto::backend
