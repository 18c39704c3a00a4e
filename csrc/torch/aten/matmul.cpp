#include "matmul.h"

#include <ATen/native/Resize.h>
#include <ATen/Operators.h>

#include "../dtype_map.h"
#include "composite.h"
#include "elementwise.h"
#include "fallback.h"
#include "recipe_launch.h"

namespace pto::torch_glue {

at::Tensor matmulOp(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, const at::Scalar& beta,
                    const at::Scalar& alpha, const at::Tensor& out, bool batched) {
  const int64_t rank = batched ? 3 : 2;
  const bool same_dtype = b.scalar_type() == a.scalar_type() &&
                          (!bias.defined() || bias.scalar_type() == a.scalar_type()) &&
                          (!out.defined() || out.scalar_type() == a.scalar_type());
  const bool on_one_device = b.device() == a.device() && (!bias.defined() || bias.device() == a.device()) &&
                             (!out.defined() || out.device() == a.device());
  if (a.dim() != rank || b.dim() != rank || !same_dtype || !on_one_device || beta.isComplex() ||
      alpha.isComplex() || !ptoDType(a.scalar_type())) {
    return {};  // the CPU path raises PyTorch's own error for these
  }
  const char* const first = batched ? "batch1" : "mat1";
  const char* const second = batched ? "batch2" : "mat2";
  TORCH_CHECK(a.size(-1) == b.size(-2), first, " and ", second, " shapes cannot be multiplied (",
              a.size(-2), "x", a.size(-1), " and ", b.size(-2), "x", b.size(-1), ")");
  std::vector<int64_t> shape{a.size(-2), b.size(-1)};
  if (batched) {
    TORCH_CHECK(a.size(0) == b.size(0), "batch1 and batch2 must have same number of batches, got ",
                a.size(0), " and ", b.size(0));
    shape.insert(shape.begin(), a.size(0));
  }
  at::Tensor output = out.defined() ? out : at::empty(shape, a.options());
  if (out.defined()) at::native::resize_output(output, shape);
  if (output.numel() == 0) return output;
  // mm and bmm are addmm and baddbmm with no bias: one recipe each (csrc/recipes/products.cpp).
  const bool biased = bias.defined() && beta.toDouble() != 0.0;
  RecipeCall call(batched ? atenName<ATEN_OP(baddbmm)>() : atenName<ATEN_OP(addmm)>());
  call.tensor("self", biased ? bias : at::Tensor()).tensor(first, a).tensor(second, b);
  call.value("beta", biased ? beta.toDouble() : 0.0).value("alpha", alpha.toDouble()).result(output);
  return call.launch() ? output : at::Tensor();
}

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

// addr_ writes self, so self must already be [n, m] (addr broadcasts it; the
// in-place form cannot grow it): the CPU kernel's checks, in its order and words.
at::Tensor& addrInplace(at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2, const at::Scalar& beta,
                        const at::Scalar& alpha) {
  TORCH_CHECK(vec1.dim() == 1, "addr: Expected 1-D argument vec1, but got ", vec1.dim(), "-D");
  TORCH_CHECK(vec2.dim() == 1, "addr: Expected 1-D argument vec2, but got ", vec2.dim(), "-D");
  TORCH_CHECK(self.dim() == 2, "2D tensor expected, got ", self.dim(), "D tensor for input");
  TORCH_CHECK(self.size(0) == vec1.size(0) && self.size(1) == vec2.size(0), "size mismatch, input: ", self.sizes(),
              ", v1: ", vec1.sizes(), ", v2: ", vec2.sizes());
  return assignInplace(self, at::addr(self, vec1, vec2, beta, alpha));
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

namespace {

// The product of two vectors as a one-by-one tmatmul, a[1, n] @ b[n, 1]; undefined
// where the CPU's dot would refuse them (its error comes from the fallback).
at::Tensor dotOf(const at::Tensor& self, const at::Tensor& other) {
  if (self.dim() != 1 || other.dim() != 1 || self.numel() != other.numel()) return {};
  at::Tensor out = at::empty({}, self.options());
  return matmulOp(self.unsqueeze(0), other.unsqueeze(1), {}, 0.0, 1.0, out.view({1, 1}), false).defined()
             ? out
             : at::Tensor();
}

}  // namespace

at::Tensor dot(const at::Tensor& self, const at::Tensor& other) {
  at::Tensor r = dotOf(self, other);
  return r.defined() ? r : Fallback<ATEN_OP(dot)>::call(self, other);
}

at::Tensor vdot(const at::Tensor& self, const at::Tensor& other) {
  at::Tensor r = self.is_complex() ? at::Tensor() : dotOf(self, other);
  return r.defined() ? r : Fallback<ATEN_OP(vdot)>::call(self, other);
}

at::Tensor addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                 const at::Scalar& beta, const at::Scalar& alpha) {
  at::Tensor out = at::empty({0}, mat.options());
  return addmvOut(self, mat, vec, beta, alpha, out);
}

}  // namespace pto::torch_glue
