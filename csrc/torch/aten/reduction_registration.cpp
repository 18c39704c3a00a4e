// The reduction aten ops pto runs natively. Dtypes and cases PTO does not cover
// (complex, mean of integers, max of an empty tensor ...) fall back to the CPU,
// which also raises PyTorch's own errors for them.
#include <ATen/Operators.h>
#include <torch/library.h>

#include <cmath>

#include "composite.h"
#include "fallback.h"
#include "reduction.h"

namespace pto::backend {
namespace {

using isa::Opcode;

// sum/prod: integers (and bool) accumulate into int64 unless a dtype is given.
at::ScalarType sumType(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  if (dtype) return *dtype;
  return at::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? at::kLong : self.scalar_type();
}

bool emptyExtreme(const at::Tensor& self, at::OptionalIntArrayRef dims) {
  return self.numel() == 0 || reducedCount(self, dims) == 0;
}

at::Tensor sumDim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                  std::optional<at::ScalarType> dtype) {
  const auto type = sumType(self, dtype);
  at::Tensor r = reduce(Opcode::kSum, self, dim, keepdim, type, type, {});
  return r.defined() ? r : Fallback<ATEN_OP2(sum, dim_IntList)>::call(self, dim, keepdim, dtype);
}

at::Tensor& sumOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<at::ScalarType> dtype, at::Tensor& out) {
  const auto type = dtype ? *dtype : out.scalar_type();
  if (!reduce(Opcode::kSum, self, dim, keepdim, type, type, out).defined()) {
    Fallback<ATEN_OP2(sum, IntList_out)>::call(self, dim, keepdim, dtype, out);
  }
  return out;
}

at::Tensor sumAll(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  return sumDim(self, std::nullopt, false, dtype);
}

at::Tensor meanDim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<at::ScalarType> dtype) {
  const auto type = dtype.value_or(self.scalar_type());
  const int64_t count = reducedCount(self, dim);
  if (at::isFloatingType(type) && count > 0) {
    at::Tensor r = reduce(Opcode::kSum, self, dim, keepdim, type, type, {}, 1.0 / static_cast<double>(count));
    if (r.defined()) return r;
  }
  return Fallback<ATEN_OP2(mean, dim)>::call(self, dim, keepdim, dtype);
}

at::Tensor& meanOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype, at::Tensor& out) {
  const auto type = dtype.value_or(out.scalar_type());
  const int64_t count = reducedCount(self, dim);
  const bool native = at::isFloatingType(type) && count > 0 &&
      reduce(Opcode::kSum, self, dim, keepdim, type, type, out, 1.0 / static_cast<double>(count)).defined();
  if (!native) Fallback<ATEN_OP2(mean, out)>::call(self, dim, keepdim, dtype, out);
  return out;
}

at::Tensor meanAll(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  return meanDim(self, std::nullopt, false, dtype);
}

at::Tensor prodDim(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  const auto type = sumType(self, dtype);
  at::Tensor r = reduce(Opcode::kProd, self, at::IntArrayRef(dim), keepdim, type, type, {});
  return r.defined() ? r : Fallback<ATEN_OP2(prod, dim_int)>::call(self, dim, keepdim, dtype);
}

at::Tensor& prodOut(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype,
                    at::Tensor& out) {
  const auto type = dtype ? *dtype : out.scalar_type();
  if (!reduce(Opcode::kProd, self, at::IntArrayRef(dim), keepdim, type, type, out).defined()) {
    Fallback<ATEN_OP2(prod, int_out)>::call(self, dim, keepdim, dtype, out);
  }
  return out;
}

at::Tensor prodAll(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  const auto type = sumType(self, dtype);
  at::Tensor r = reduce(Opcode::kProd, self, std::nullopt, false, type, type, {});
  return r.defined() ? r : Fallback<ATEN_OP(prod)>::call(self, dtype);
}

// The vector p-norm from native pieces (|x|, powers, tsum, tamax), in float32 for
// float16/bfloat16 as PyTorch's CPU kernel computes it. Integer inputs, and the
// infinity norms of empty reductions, go to the CPU, which raises PyTorch's errors.
at::Tensor vectorNorm(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                      std::optional<at::ScalarType> dtype) {
  const at::ScalarType type = dtype.value_or(self.scalar_type());
  const double p = ord.toDouble();
  const bool native = at::isFloatingType(self.scalar_type()) && at::isFloatingType(type) &&
                      !(std::isinf(p) && (self.numel() == 0 || reducedCount(self, dim) == 0));
  if (!native) return Fallback<ATEN_OP(linalg_vector_norm)>::call(self, ord, dim, keepdim, dtype);
  const at::Tensor x = widened(self.to(type)).abs();
  at::Tensor norm;
  if (std::isinf(p)) norm = p > 0 ? at::amax(x, dim.value_or(at::IntArrayRef{}), keepdim)
                                  : at::amin(x, dim.value_or(at::IntArrayRef{}), keepdim);
  else if (p == 0) norm = at::sum(at::ne(x, 0).to(x.scalar_type()), dim, keepdim);
  else if (p == 1) norm = at::sum(x, dim, keepdim);
  else if (p == 2) norm = at::sum(at::mul(x, x), dim, keepdim).sqrt_();
  else norm = at::sum(at::pow(x, p), dim, keepdim).pow_(1.0 / p);
  return norm.to(type);
}

at::Tensor& vectorNormOut(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                          std::optional<at::ScalarType> dtype, at::Tensor& out) {
  return assign(out, vectorNorm(self, ord, dim, keepdim, dtype));
}

// var_mean and std_mean: the two statistics, each native (var/std already are).
std::tuple<at::Tensor, at::Tensor> varMean(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                           const std::optional<at::Scalar>& correction, bool keepdim) {
  return {at::var(self, dim, correction, keepdim), at::mean(self, dim, keepdim)};
}

std::tuple<at::Tensor, at::Tensor> stdMean(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                           const std::optional<at::Scalar>& correction, bool keepdim) {
  return {at::std(self, dim, correction, keepdim), at::mean(self, dim, keepdim)};
}

// nansum: NaNs count as zeros.
at::Tensor nansumOf(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                  std::optional<at::ScalarType> dtype) {
  const at::Tensor zeroed = at::isFloatingType(self.scalar_type())
                                ? at::where(at::isnan(self), at::zeros({}, self.options()), self) : self;
  return at::sum(zeroed, dim, keepdim, dtype);
}

at::Tensor& nansumOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                      std::optional<at::ScalarType> dtype, at::Tensor& out) {
  return assign(out, nansumOf(self, dim, keepdim, dtype));
}

at::Tensor countNonzero(const at::Tensor& self, at::IntArrayRef dim) {
  return at::sum(at::ne(self, 0), dim, false, at::kLong);
}

// trace: the sum of the main diagonal (a strided view), in sum's dtype.
at::Tensor traceOf(const at::Tensor& self) {
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  return at::sum(self.diagonal());
}

template <Opcode opcode, class Op, class Out>
struct Extreme {
  static at::Tensor functional(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
    if (!emptyExtreme(self, dim)) {
      at::Tensor r = reduce(opcode, self, dim, keepdim, self.scalar_type(), self.scalar_type(), {});
      if (r.defined()) return r;
    }
    return Fallback<Op>::call(self, dim, keepdim);
  }
  static at::Tensor& out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& result) {
    const bool native = !emptyExtreme(self, dim) && result.scalar_type() == self.scalar_type() &&
        reduce(opcode, self, dim, keepdim, self.scalar_type(), self.scalar_type(), result).defined();
    if (!native) Fallback<Out>::call(self, dim, keepdim, result);
    return result;
  }
};

template <Opcode opcode, class Op>
at::Tensor extremeAll(const at::Tensor& self) {
  if (self.numel() > 0) {
    at::Tensor r = reduce(opcode, self, std::nullopt, false, self.scalar_type(), self.scalar_type(), {});
    if (r.defined()) return r;
  }
  return Fallback<Op>::call(self);
}

template <Opcode opcode, class Op, class Out>
struct ArgExtreme {
  static at::Tensor functional(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
    if (self.numel() > 0 && !(dim && reducedCount(self, at::IntArrayRef(*dim)) == 0)) {
      // With no dim, the index runs over the flattened tensor; keepdim keeps every dim as 1.
      at::Tensor r = reduce(opcode, self, dim ? at::OptionalIntArrayRef(at::IntArrayRef(*dim)) : std::nullopt,
                            keepdim, self.scalar_type(), at::kLong, {});
      if (r.defined()) return r;
    }
    return Fallback<Op>::call(self, dim, keepdim);
  }
};

// max.dim / min.dim: values and indices, two instructions over the same input.
template <Opcode value_op, Opcode index_op, class Op>
std::tuple<at::Tensor, at::Tensor> extremeWithIndex(const at::Tensor& self, int64_t dim, bool keepdim) {
  if (self.numel() > 0 && reducedCount(self, at::IntArrayRef(dim)) > 0) {
    at::Tensor values = reduce(value_op, self, at::IntArrayRef(dim), keepdim, self.scalar_type(), self.scalar_type(), {});
    if (values.defined()) {
      at::Tensor indices = reduce(index_op, self, at::IntArrayRef(dim), keepdim, self.scalar_type(), at::kLong, {});
      return {values, indices};
    }
  }
  return Fallback<Op>::call(self, dim, keepdim);
}

template <Opcode opcode, class Op>
at::Tensor logical(const at::Tensor& self) {
  at::Tensor r = reduce(opcode, self, std::nullopt, false, at::kBool,
                        self.scalar_type() == at::kByte ? at::kByte : at::kBool, {});
  return r.defined() ? r : Fallback<Op>::call(self);
}

template <Opcode opcode, class Op>
at::Tensor logicalDim(const at::Tensor& self, int64_t dim, bool keepdim) {
  at::Tensor r = reduce(opcode, self, at::IntArrayRef(dim), keepdim, at::kBool,
                        self.scalar_type() == at::kByte ? at::kByte : at::kBool, {});
  return r.defined() ? r : Fallback<Op>::call(self, dim, keepdim);
}

template <Opcode opcode, class Op>
at::Tensor logicalDims(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  at::Tensor r = reduce(opcode, self, dim, keepdim, at::kBool,
                        self.scalar_type() == at::kByte ? at::kByte : at::kBool, {});
  return r.defined() ? r : Fallback<Op>::call(self, dim, keepdim);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sum", TORCH_FN(sumAll));
  m.impl("sum.dim_IntList", TORCH_FN(sumDim));
  m.impl("sum.IntList_out", TORCH_FN(sumOut));
  m.impl("prod", TORCH_FN(prodAll));
  m.impl("prod.dim_int", TORCH_FN(prodDim));
  m.impl("prod.int_out", TORCH_FN(prodOut));
  m.impl("linalg_vector_norm", TORCH_FN(vectorNorm));
  m.impl("linalg_vector_norm.out", TORCH_FN(vectorNormOut));
  m.impl("var_mean.correction", TORCH_FN(varMean));
  m.impl("std_mean.correction", TORCH_FN(stdMean));
  m.impl("nansum", TORCH_FN(nansumOf));
  m.impl("nansum.out", TORCH_FN(nansumOut));
  m.impl("count_nonzero.dim_IntList", TORCH_FN(countNonzero));
  m.impl("trace", TORCH_FN(traceOf));
  m.impl("mean", TORCH_FN(meanAll));
  m.impl("mean.dim", TORCH_FN(meanDim));
  m.impl("mean.out", TORCH_FN(meanOut));
  {
    using F = Extreme<Opcode::kAmax, ATEN_OP(amax), ATEN_OP2(amax, out)>;
    m.impl("amax", TORCH_FN(F::functional));
    m.impl("amax.out", TORCH_FN(F::out));
  }
  {
    using F = Extreme<Opcode::kAmin, ATEN_OP(amin), ATEN_OP2(amin, out)>;
    m.impl("amin", TORCH_FN(F::functional));
    m.impl("amin.out", TORCH_FN(F::out));
  }
  m.impl("max", TORCH_FN((extremeAll<Opcode::kAmax, ATEN_OP(max)>)));
  m.impl("min", TORCH_FN((extremeAll<Opcode::kAmin, ATEN_OP(min)>)));
  m.impl("max.dim", TORCH_FN((extremeWithIndex<Opcode::kAmax, Opcode::kArgmax, ATEN_OP2(max, dim)>)));
  m.impl("min.dim", TORCH_FN((extremeWithIndex<Opcode::kAmin, Opcode::kArgmin, ATEN_OP2(min, dim)>)));
  m.impl("argmax", TORCH_FN((ArgExtreme<Opcode::kArgmax, ATEN_OP(argmax), ATEN_OP2(argmax, out)>::functional)));
  m.impl("argmin", TORCH_FN((ArgExtreme<Opcode::kArgmin, ATEN_OP(argmin), ATEN_OP2(argmin, out)>::functional)));
  m.impl("any", TORCH_FN((logical<Opcode::kAny, ATEN_OP(any)>)));
  m.impl("all", TORCH_FN((logical<Opcode::kAll, ATEN_OP(all)>)));
  m.impl("any.dim", TORCH_FN((logicalDim<Opcode::kAny, ATEN_OP2(any, dim)>)));
  m.impl("all.dim", TORCH_FN((logicalDim<Opcode::kAll, ATEN_OP2(all, dim)>)));
  m.impl("any.dims", TORCH_FN((logicalDims<Opcode::kAny, ATEN_OP2(any, dims)>)));
  m.impl("all.dims", TORCH_FN((logicalDims<Opcode::kAll, ATEN_OP2(all, dims)>)));
}

}  // namespace pto::backend
