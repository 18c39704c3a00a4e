// The matrix-product aten ops pto runs natively; others (mv, dot, complex ...)
// and mismatched inputs go to the CPU fallback.
#include <ATen/native/Resize.h>
#include <ATen/Operators.h>
#include <torch/library.h>

#include "fallback.h"
#include "matmul.h"

namespace pto::backend {
namespace {

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  at::Tensor r = matmulOp(self, mat2, {}, 0.0, 1.0, {}, false);
  return r.defined() ? r : Fallback<ATEN_OP(mm)>::call(self, mat2);
}

at::Tensor& mmOut(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  if (!matmulOp(self, mat2, {}, 0.0, 1.0, out, false).defined()) Fallback<ATEN_OP2(mm, out)>::call(self, mat2, out);
  return out;
}

at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  at::Tensor r = matmulOp(self, mat2, {}, 0.0, 1.0, {}, true);
  return r.defined() ? r : Fallback<ATEN_OP(bmm)>::call(self, mat2);
}

at::Tensor& bmmOut(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  if (!matmulOp(self, mat2, {}, 0.0, 1.0, out, true).defined()) Fallback<ATEN_OP2(bmm, out)>::call(self, mat2, out);
  return out;
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                 const at::Scalar& beta, const at::Scalar& alpha) {
  at::Tensor r = matmulOp(mat1, mat2, self, beta, alpha, {}, false);
  return r.defined() ? r : Fallback<ATEN_OP(addmm)>::call(self, mat1, mat2, beta, alpha);
}

at::Tensor& addmmOut(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                     const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  if (!matmulOp(mat1, mat2, self, beta, alpha, out, false).defined()) {
    Fallback<ATEN_OP2(addmm, out)>::call(self, mat1, mat2, beta, alpha, out);
  }
  return out;
}

at::Tensor& addmmInplace(at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                         const at::Scalar& beta, const at::Scalar& alpha) {
  const bool fits = self.dim() == 2 && mat1.dim() == 2 && mat2.dim() == 2 &&
                    self.size(0) == mat1.size(0) && self.size(1) == mat2.size(1);
  if (!fits || !matmulOp(mat1, mat2, self, beta, alpha, self, false).defined()) {
    Fallback<ATEN_OP(addmm_)>::call(self, mat1, mat2, beta, alpha);
  }
  return self;
}

at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                   const at::Scalar& beta, const at::Scalar& alpha) {
  at::Tensor r = matmulOp(batch1, batch2, self, beta, alpha, {}, true);
  return r.defined() ? r : Fallback<ATEN_OP(baddbmm)>::call(self, batch1, batch2, beta, alpha);
}

at::Tensor& baddbmmOut(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                       const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  if (!matmulOp(batch1, batch2, self, beta, alpha, out, true).defined()) {
    Fallback<ATEN_OP2(baddbmm, out)>::call(self, batch1, batch2, beta, alpha, out);
  }
  return out;
}

// addmv as a one-column tmatmul: out[n] = beta * self + alpha * mat[n, m] @ vec[m].
at::Tensor& addmvOut(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                     const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  const bool fits = mat.dim() == 2 && vec.dim() == 1 && self.dim() <= 1 && mat.size(1) == vec.size(0) &&
                    (self.dim() == 0 || self.size(0) == mat.size(0) || self.size(0) == 1);
  if (fits) {
    at::native::resize_output(out, {mat.size(0)});
    const at::Tensor bias = self.expand({mat.size(0)}).unsqueeze(1);
    if (matmulOp(mat, vec.unsqueeze(1), bias, beta, alpha, out.unsqueeze(1), false).defined()) {
      return out;
    }
  }
  return Fallback<ATEN_OP2(addmv, out)>::call(self, mat, vec, beta, alpha, out);
}

at::Tensor addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                 const at::Scalar& beta, const at::Scalar& alpha) {
  at::Tensor out = at::empty({0}, mat.options());
  return addmvOut(self, mat, vec, beta, alpha, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm", TORCH_FN(mm));
  m.impl("mm.out", TORCH_FN(mmOut));
  m.impl("bmm", TORCH_FN(bmm));
  m.impl("bmm.out", TORCH_FN(bmmOut));
  m.impl("addmm", TORCH_FN(addmm));
  m.impl("addmm.out", TORCH_FN(addmmOut));
  m.impl("addmm_", TORCH_FN(addmmInplace));
  m.impl("baddbmm", TORCH_FN(baddbmm));
  m.impl("baddbmm.out", TORCH_FN(baddbmmOut));
  m.impl("addmv", TORCH_FN(addmv));
  m.impl("addmv.out", TORCH_FN(addmvOut));
}

}  // namespace pto::backend
