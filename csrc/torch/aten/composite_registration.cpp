// aten ops that pto runs as short sequences of native instructions, with the
// same formulas as PyTorch's CPU kernels (the optimizers' updates). Each step
// dispatches to pto's own kernels, so nothing leaves the device.
#include <torch/library.h>

#include "composite.h"

namespace pto::backend {
namespace {

// The dtype addcmul/addcdiv return: their three inputs promoted together.
at::ScalarType resultOf(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2) {
  return at::promote_types(at::result_type(self, tensor1), at::result_type(tensor1, tensor2));
}

// out = self + value * tensor1 * tensor2
at::Tensor addcmulWide(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                       const at::Scalar& value) {
  return at::add(widened(self), at::mul(widened(tensor1), widened(tensor2)), value);
}

at::Tensor& addcmulOut(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                       const at::Scalar& value, at::Tensor& out) {
  return assignPointwise(out, {self, tensor1, tensor2}, addcmulWide(self, tensor1, tensor2, value));
}

at::Tensor addcmul(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                   const at::Scalar& value) {
  return addcmulWide(self, tensor1, tensor2, value).to(resultOf(self, tensor1, tensor2));
}

at::Tensor& addcmulInplace(at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                           const at::Scalar& value) {
  return self.copy_(addcmulWide(self, tensor1, tensor2, value));
}

// out = self + value * tensor1 / tensor2 (a true division, as PyTorch now requires).
void checkAddcdivTypes(const at::Tensor& tensor1, const at::Tensor& tensor2) {
  TORCH_CHECK(!(at::isIntegralType(tensor1.scalar_type(), true) && at::isIntegralType(tensor2.scalar_type(), true)),
              "Integer division with addcdiv is no longer supported, and in a future release addcdiv will "
              "perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be "
              "implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer "
              "inputs and as (input + value * tensor1 / tensor2) for float inputs. The future addcdiv "
              "behavior is just the latter implementation: (input + value * tensor1 / tensor2), for all dtypes.");
}

at::Tensor addcdivWide(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                       const at::Scalar& value) {
  checkAddcdivTypes(tensor1, tensor2);
  return at::add(widened(self), at::div(widened(tensor1), widened(tensor2)), value);
}

at::Tensor& addcdivOut(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                       const at::Scalar& value, at::Tensor& out) {
  return assignPointwise(out, {self, tensor1, tensor2}, addcdivWide(self, tensor1, tensor2, value));
}

at::Tensor addcdiv(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                   const at::Scalar& value) {
  return addcdivWide(self, tensor1, tensor2, value).to(resultOf(self, tensor1, tensor2));
}

at::Tensor& addcdivInplace(at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                           const at::Scalar& value) {
  return self.copy_(addcdivWide(self, tensor1, tensor2, value));
}

// lerp as PyTorch computes it: from the nearer end (|weight| < 0.5, complex weights
// by their modulus), for precision.
at::Tensor lerpWide(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight) {
  const at::Tensor start = widened(self), stop = widened(end);
  const at::Tensor difference = at::sub(stop, start);
  const c10::complex<double> w = weight.toComplexDouble();
  if (std::abs(w) < 0.5) return at::add(start, difference, weight);
  const at::Scalar rest = weight.isComplex() ? at::Scalar(1.0 - w) : at::Scalar(1.0 - w.real());
  return at::sub(stop.expand_as(difference), difference, rest);
}

at::Tensor& lerpOut(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight, at::Tensor& out) {
  return assignPointwise(out, {self, end}, lerpWide(self, end, weight));
}

at::Tensor lerp(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight) {
  return lerpWide(self, end, weight).to(self.scalar_type());
}

at::Tensor& lerpInplace(at::Tensor& self, const at::Tensor& end, const at::Scalar& weight) {
  return self.copy_(lerpWide(self, end, weight));
}

// NaN is the one value unequal to itself; integers and bool have none.
at::Tensor isnan(const at::Tensor& self) {
  if (!at::isFloatingType(self.scalar_type())) return at::zeros(self.sizes(), self.options().dtype(at::kBool));
  return at::ne(self, self);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("isnan", TORCH_FN(isnan));
  m.impl("addcmul", TORCH_FN(addcmul));
  m.impl("addcmul_", TORCH_FN(addcmulInplace));
  m.impl("addcmul.out", TORCH_FN(addcmulOut));
  m.impl("addcdiv", TORCH_FN(addcdiv));
  m.impl("addcdiv_", TORCH_FN(addcdivInplace));
  m.impl("addcdiv.out", TORCH_FN(addcdivOut));
  m.impl("lerp.Scalar", TORCH_FN(lerp));
  m.impl("lerp_.Scalar", TORCH_FN(lerpInplace));
  m.impl("lerp.Scalar_out", TORCH_FN(lerpOut));
}

}  // namespace pto::backend
