// Matrix products on pto as tmatmul: mm, bmm, addmm, baddbmm, addmv, dot and vdot
// (matmul and linear reach them through PyTorch's own decompositions). Complex ones and
// mismatched inputs go to the CPU fallback, which gives its result or error.
#pragma once

#include <ATen/ATen.h>

namespace pto::torch_glue {

// out = beta * bias + alpha * (a @ b) for matrices (batched: 3-d batches).
// bias may be undefined. Returns an undefined tensor when PTO cannot run it
// (complex tensors or scalars among them).
at::Tensor matmulOp(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, const at::Scalar& beta,
                    const at::Scalar& alpha, const at::Tensor& out, bool batched);


at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2);
at::Tensor& mmOut(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out);
at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2);
at::Tensor& bmmOut(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out);
at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                 const at::Scalar& beta, const at::Scalar& alpha);
at::Tensor& addmmOut(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                     const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out);
at::Tensor& addmmInplace(at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                         const at::Scalar& beta, const at::Scalar& alpha);
at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                   const at::Scalar& beta, const at::Scalar& alpha);
at::Tensor& baddbmmOut(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                       const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out);

// addr_ as addr written over self, after the CPU's checks of self's shape.
at::Tensor& addrInplace(at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2, const at::Scalar& beta,
                        const at::Scalar& alpha);
// addmv as a one-column tmatmul: out[n] = beta * self + alpha * mat[n, m] @ vec[m].
at::Tensor& addmvOut(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                     const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out);
at::Tensor addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                 const at::Scalar& beta, const at::Scalar& alpha);
// dot, and vdot of real vectors (whose conjugate is themselves): a one-by-one tmatmul.
at::Tensor dot(const at::Tensor& self, const at::Tensor& other);
at::Tensor vdot(const at::Tensor& self, const at::Tensor& other);

}  // namespace pto::torch_glue
