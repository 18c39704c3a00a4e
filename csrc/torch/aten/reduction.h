// Reductions on pto as PTO instructions (tsum, tamax, targmax, tany ...), with
// PyTorch's dim lists, keepdim, dtype rules and out= forms. Dtypes and cases PTO
// does not cover (complex, mean of integers, max of an empty tensor ...) fall back
// to the CPU, which also raises PyTorch's own errors for them.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <tuple>

#include "composite.h"
#include "fallback.h"
#include "recipe_launch.h"

namespace pto::torch_glue {

// Reduces `self` over `dims` (none or empty: every dimension) by the reduction recipe
// `recipe` ("aten::sum.dim_IntList", "aten::argmax": self, dim, keepdim), its result
// computed in `compute` and written as a new tensor of dtype `result`, or into `out`.
// Undefined result: not supported natively (the caller falls back).
at::Tensor reduce(const std::string& recipe, const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                  at::ScalarType compute, at::ScalarType result, const at::Tensor& out);

// max.dim / min.dim through their recipe ("aten::max.dim"): values and indices.
// Undefined tensors where PTO does not compute them.
std::tuple<at::Tensor, at::Tensor> reduceWithIndex(const std::string& recipe, const at::Tensor& self, int64_t dim,
                                                   bool keepdim);

// An optional dim as the dims a reduction takes: none means every dimension (argmax,
// aminmax). The view refers to `dim`'s value, which must outlive it.
inline at::OptionalIntArrayRef dimsOf(const std::optional<int64_t>& dim) {
  return dim ? at::OptionalIntArrayRef(at::IntArrayRef(*dim)) : std::nullopt;
}

// The number of elements each output element folds.
int64_t reducedCount(const at::Tensor& self, at::OptionalIntArrayRef dims);

// Whether a max/min over `dims` has no element to take (PyTorch raises for it).
bool emptyExtreme(const at::Tensor& self, at::OptionalIntArrayRef dims);

at::Tensor sumDim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                  std::optional<at::ScalarType> dtype);
at::Tensor& sumOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<at::ScalarType> dtype, at::Tensor& out);
at::Tensor sumAll(const at::Tensor& self, std::optional<at::ScalarType> dtype);
at::Tensor meanDim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<at::ScalarType> dtype);
at::Tensor& meanOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype, at::Tensor& out);
at::Tensor meanAll(const at::Tensor& self, std::optional<at::ScalarType> dtype);
at::Tensor prodDim(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype);
at::Tensor& prodOut(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype,
                    at::Tensor& out);
at::Tensor prodAll(const at::Tensor& self, std::optional<at::ScalarType> dtype);

// The vector p-norm from native pieces (|x|, powers, tsum, tamax), in float32 for
// float16/bfloat16 as PyTorch's CPU kernel computes it. Integer inputs, and the
// infinity norms of empty reductions, go to the CPU, which raises PyTorch's errors.
at::Tensor vectorNorm(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                      std::optional<at::ScalarType> dtype);
at::Tensor& vectorNormOut(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                          std::optional<at::ScalarType> dtype, at::Tensor& out);

// var_mean and std_mean: the two statistics, each native (var/std already are).
std::tuple<at::Tensor, at::Tensor> varMean(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                           const std::optional<at::Scalar>& correction, bool keepdim);
std::tuple<at::Tensor, at::Tensor> stdMean(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                           const std::optional<at::Scalar>& correction, bool keepdim);

// nansum: NaNs count as zeros.
at::Tensor nansumOf(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                  std::optional<at::ScalarType> dtype);
at::Tensor& nansumOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                      std::optional<at::ScalarType> dtype, at::Tensor& out);
at::Tensor countNonzero(const at::Tensor& self, at::IntArrayRef dim);

// aminmax: amin and amax, one reduction each (the CPU's kernel takes one pass); an
// empty reduction or an out of another dtype goes to the CPU, which raises.
std::tuple<at::Tensor&, at::Tensor&> aminmaxOut(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                                                at::Tensor& min, at::Tensor& max);
std::tuple<at::Tensor, at::Tensor> aminmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim);

// trace: the sum of the main diagonal (a strided view), in sum's dtype.
at::Tensor traceOf(const at::Tensor& self);

// The families reduction_registration.cpp stamps per op: its recipe (that of Op, or of
// the Reduction op named), else the CPU fallback (Op, Out).
template <class Op, class Out>
struct Extreme {
  static at::Tensor functional(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
    if (!emptyExtreme(self, dim)) {
      at::Tensor r = reduce(atenName<Op>(), self, dim, keepdim, self.scalar_type(), self.scalar_type(), {});
      if (r.defined()) return r;
    }
    return Fallback<Op>::call(self, dim, keepdim);
  }
  static at::Tensor& out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& result) {
    const bool native = !emptyExtreme(self, dim) && result.scalar_type() == self.scalar_type() &&
        reduce(atenName<Op>(), self, dim, keepdim, self.scalar_type(), self.scalar_type(), result).defined();
    if (!native) Fallback<Out>::call(self, dim, keepdim, result);
    return result;
  }
};

// max() and min() of every element: amax's and amin's recipes.
template <class Reduction, class Op>
at::Tensor extremeAll(const at::Tensor& self) {
  if (self.numel() > 0) {
    at::Tensor r = reduce(atenName<Reduction>(), self, std::nullopt, false, self.scalar_type(), self.scalar_type(), {});
    if (r.defined()) return r;
  }
  return Fallback<Op>::call(self);
}

template <class Op, class Out>
struct ArgExtreme {
  // Bool, empty reductions: the CPU's, which refuses them. With no dim, the index runs
  // over the flattened tensor (dimsOf); keepdim keeps every dim as 1.
  static at::Tensor functional(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
    if (reducible(self, dim)) {
      at::Tensor r = reduce(atenName<Op>(), self, dimsOf(dim), keepdim, at::kLong, at::kLong, {});
      if (r.defined()) return r;
    }
    return Fallback<Op>::call(self, dim, keepdim);
  }
  // An out of another dtype too: the CPU's, which refuses it.
  static at::Tensor& out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& result) {
    const bool native = reducible(self, dim) && result.scalar_type() == at::kLong &&
                        reduce(atenName<Op>(), self, dimsOf(dim), keepdim, at::kLong, at::kLong, result).defined();
    if (!native) Fallback<Out>::call(self, dim, keepdim, result);
    return result;
  }

 private:
  static bool reducible(const at::Tensor& self, std::optional<int64_t> dim) {
    return self.scalar_type() != at::kBool && self.numel() > 0 && !(dim && reducedCount(self, at::IntArrayRef(*dim)) == 0);
  }
};

// max.dim / min.dim: values and indices.
template <class Op>
std::tuple<at::Tensor, at::Tensor> extremeWithIndex(const at::Tensor& self, int64_t dim, bool keepdim) {
  if (self.numel() > 0 && reducedCount(self, at::IntArrayRef(dim)) > 0) {
    auto [values, indices] = reduceWithIndex(atenName<Op>(), self, dim, keepdim);
    if (values.defined()) return {values, indices};
  }
  return Fallback<Op>::call(self, dim, keepdim);
}

// all/any, over every dim, one or a list: the recipe of Reduction (all.dims, any.dims).
template <class Reduction, class Op>
at::Tensor logical(const at::Tensor& self) {
  at::Tensor r = reduce(atenName<Reduction>(), self, std::nullopt, false, at::kBool,
                        self.scalar_type() == at::kByte ? at::kByte : at::kBool, {});
  return r.defined() ? r : Fallback<Op>::call(self);
}

template <class Reduction, class Op>
at::Tensor logicalDim(const at::Tensor& self, int64_t dim, bool keepdim) {
  at::Tensor r = reduce(atenName<Reduction>(), self, at::IntArrayRef(dim), keepdim, at::kBool,
                        self.scalar_type() == at::kByte ? at::kByte : at::kBool, {});
  return r.defined() ? r : Fallback<Op>::call(self, dim, keepdim);
}

// An empty dim list reduces nothing (the CPU's rule for all/any; sum's empty list
// means every dim): each element's truth, in the result dtype.
template <class Reduction, class Op>
at::Tensor logicalDims(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  if (dim && dim->empty()) {
    const at::Tensor truth = at::ne(self, 0);
    return self.scalar_type() == at::kByte ? truth.to(at::kByte) : truth;
  }
  at::Tensor r = reduce(atenName<Reduction>(), self, dim, keepdim, at::kBool,
                        self.scalar_type() == at::kByte ? at::kByte : at::kBool, {});
  return r.defined() ? r : Fallback<Op>::call(self, dim, keepdim);
}

// all/any's out= forms, over every dim, one or a list: out must be bool or uint8 (the
// CPU's check, the only one: a uint8 input's uint8 result goes into a bool out too),
// and takes the functional result (resized as resize_output resizes).
template <class Op>
at::Tensor& logicalInto(const at::Tensor& value, at::Tensor& out) {
  // Op::name is "aten::all" or "aten::any": the message names the op as the CPU's does.
  TORCH_CHECK(out.scalar_type() == at::kBool || out.scalar_type() == at::kByte,
              std::string_view(Op::name).substr(6), " only supports bool tensor for result, got: ",
              out.scalar_type());
  at::native::resize_output(out, value.sizes());
  return out.copy_(value);
}

template <class Reduction, class Op>
at::Tensor& logicalOut(const at::Tensor& self, at::Tensor& out) {
  return logicalInto<Op>(logical<Reduction, Op>(self), out);
}

template <class Reduction, class Op>
at::Tensor& logicalDimOut(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
  return logicalInto<Op>(logicalDim<Reduction, Op>(self, dim, keepdim), out);
}

template <class Reduction, class Op>
at::Tensor& logicalDimsOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, at::Tensor& out) {
  return logicalInto<Op>(logicalDims<Reduction, Op>(self, dim, keepdim), out);
}

}  // namespace pto::torch_glue
