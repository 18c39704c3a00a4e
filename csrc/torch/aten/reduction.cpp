#include "reduction.h"

#include <ATen/Operators.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/Resize.h>

#include <cmath>
#include <vector>

#include "../dtype_map.h"
#include "composite.h"
#include "elementwise.h"
#include "isa/program.h"
#include "recipe_launch.h"

namespace pto::torch_glue {

namespace {

// The dimensions a reduction folds: every one without dims (at any rank), else
// those PyTorch's dim_list_to_bitset names (its checks and messages: up to 64 dims).
std::vector<bool> reducedDims(const at::Tensor& self, at::OptionalIntArrayRef dims) {
  const bool all = !dims || dims->empty();
  std::vector<bool> mask(static_cast<size_t>(self.dim()), all);
  if (all) return mask;
  const auto named = at::dim_list_to_bitset(*dims, self.dim());
  for (int64_t d = 0; d < self.dim(); ++d) mask[d] = named[d];
  return mask;
}

// sum/prod: integers (and bool) accumulate into int64 unless a dtype is given.
at::ScalarType sumType(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  if (dtype) return *dtype;
  return at::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? at::kLong : self.scalar_type();
}

// Above PTO's rank: the kept dimensions first and the folded ones last, each group
// merged into one by a copy: a [kept, folded] matrix whose rows the reduction folds
// (an index result counts along the folded dimensions' order).
at::Tensor foldedMatrix(const at::Tensor& self, const std::vector<bool>& mask) {
  std::vector<int64_t> order;
  int64_t kept = 1, folded = 1;
  for (const bool folding : {false, true}) {
    for (int64_t d = 0; d < self.dim(); ++d) {
      if (mask[d] != folding) continue;
      order.push_back(d);
      (folding ? folded : kept) *= self.size(d);
    }
  }
  return self.permute(order).contiguous().view({kept, folded});
}

// The result's shape: self's with the reduced dimensions 1 (keepdim) or gone.
std::vector<int64_t> reducedShape(const at::Tensor& self, const std::vector<bool>& mask, bool keepdim) {
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (!mask[d]) shape.push_back(self.size(d));
    else if (keepdim) shape.push_back(1);
  }
  return shape;
}

// The reduction recipe `recipe` (its arguments self, dim and keepdim; csrc/recipes/
// reductions.cpp) of `self` over `mask` into `results`, laid out as the op returns
// them. Above PTO's rank it reduces the rows of the [kept, folded] matrix into
// contiguous rows copied into the results. False, with nothing written, where the
// recipe does not apply (a dtype its instructions do not take).
bool launchReduction(const std::string& recipe, const at::Tensor& self, const std::vector<bool>& mask, bool keepdim,
                     const std::vector<at::Tensor>& results) {
  RecipeCall call(recipe);
  if (self.dim() > isa::kMaxRank) {
    const at::Tensor matrix = foldedMatrix(self, mask);
    call.tensor("self", matrix).value("dim", std::vector<int64_t>{1}).value("keepdim", false);
    std::vector<at::Tensor> rows;
    for (const at::Tensor& result : results) {
      rows.push_back(at::empty({matrix.size(0)}, result.options()));
      call.result(rows.back());
    }
    if (!call.launch()) return false;
    for (size_t i = 0; i < results.size(); ++i) results[i].copy_(rows[i].view(results[i].sizes()));
    return true;
  }
  std::vector<int64_t> reduced;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (mask[d]) reduced.push_back(d);
  }
  call.tensor("self", self).value("dim", reduced).value("keepdim", keepdim);
  for (const at::Tensor& result : results) call.result(result);
  return call.launch();
}

// mean through its recipe (a sum scaled by 1 / count) into `output`, computed in
// `type`. False where PTO does not compute it: integers, no element to average
// (NaN), a dtype PTO lacks.
bool meanInto(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim, at::ScalarType type,
              const at::Tensor& output) {
  if (!at::isFloatingType(type) || !ptoDType(type) || !ptoDType(self.scalar_type()) ||
      !ptoDType(output.scalar_type()) || reducedCount(self, dims) == 0) {
    return false;
  }
  if (output.numel() == 0) return true;
  const at::Tensor target = output.scalar_type() == type ? output : at::empty(output.sizes(), output.options().dtype(type));
  if (!launchReduction("aten::mean.dim", self, reducedDims(self, dims), keepdim, {target})) return false;
  if (!target.is_same(output)) output.copy_(target);
  return true;
}

}  // namespace

int64_t reducedCount(const at::Tensor& self, at::OptionalIntArrayRef dims) {
  const auto mask = reducedDims(self, dims);
  int64_t count = 1;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (mask[d]) count *= self.size(d);
  }
  return count;
}

at::Tensor reduce(const std::string& recipe, const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                  at::ScalarType compute, at::ScalarType result, const at::Tensor& out) {
  if (!ptoDType(compute) || !ptoDType(result) || !ptoDType(self.scalar_type())) return {};
  const auto mask = reducedDims(self, dims);
  const std::vector<int64_t> result_shape = reducedShape(self, mask, keepdim);
  at::Tensor output;
  if (out.defined()) {
    TORCH_CHECK(out.device() == self.device(), "Expected out tensor to be on ", self.device(),
                " but got ", out.device());
    at::native::resize_output(out, result_shape);
    output = out;
  } else {
    output = at::empty(result_shape, self.options().dtype(result));
  }
  if (output.numel() == 0) return output;
  const at::Tensor target =
      output.scalar_type() == compute ? output : at::empty(result_shape, output.options().dtype(compute));
  if (!launchReduction(recipe, self, mask, keepdim, {target})) return {};
  if (!target.is_same(output)) output.copy_(target);  // to any dtype out may have, complex too
  return output;
}

std::tuple<at::Tensor, at::Tensor> reduceWithIndex(const std::string& recipe, const at::Tensor& self, int64_t dim,
                                                   bool keepdim) {
  if (!ptoDType(self.scalar_type())) return {};
  const auto mask = reducedDims(self, at::IntArrayRef(dim));
  const std::vector<int64_t> shape = reducedShape(self, mask, keepdim);
  at::Tensor values = at::empty(shape, self.options());
  at::Tensor indices = at::empty(shape, self.options().dtype(at::kLong));
  if (values.numel() > 0 && !launchReduction(recipe, self, mask, keepdim, {values, indices})) return {};
  return {values, indices};
}

bool emptyExtreme(const at::Tensor& self, at::OptionalIntArrayRef dims) {
  return self.numel() == 0 || reducedCount(self, dims) == 0;
}

at::Tensor sumDim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                  std::optional<at::ScalarType> dtype) {
  const auto type = sumType(self, dtype);
  at::Tensor r = reduce(atenName<ATEN_OP2(sum, dim_IntList)>(), self, dim, keepdim, type, type, {});
  return r.defined() ? r : Fallback<ATEN_OP2(sum, dim_IntList)>::call(self, dim, keepdim, dtype);
}

at::Tensor& sumOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<at::ScalarType> dtype, at::Tensor& out) {
  const auto type = dtype ? *dtype : out.scalar_type();
  if (!reduce(atenName<ATEN_OP2(sum, dim_IntList)>(), self, dim, keepdim, type, type, out).defined()) {
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
  const auto mask = reducedDims(self, dim);
  at::Tensor output = at::empty(reducedShape(self, mask, keepdim), self.options().dtype(type));
  if (meanInto(self, dim, keepdim, type, output)) return output;
  return Fallback<ATEN_OP2(mean, dim)>::call(self, dim, keepdim, dtype);
}

at::Tensor& meanOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype, at::Tensor& out) {
  const auto type = dtype.value_or(out.scalar_type());
  TORCH_CHECK(out.device() == self.device(), "Expected out tensor to be on ", self.device(), " but got ", out.device());
  at::native::resize_output(out, reducedShape(self, reducedDims(self, dim), keepdim));
  if (!meanInto(self, dim, keepdim, type, out)) Fallback<ATEN_OP2(mean, out)>::call(self, dim, keepdim, dtype, out);
  return out;
}

at::Tensor meanAll(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  return meanDim(self, std::nullopt, false, dtype);
}

at::Tensor prodDim(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  const auto type = sumType(self, dtype);
  at::Tensor r = reduce(atenName<ATEN_OP2(prod, dim_int)>(), self, at::IntArrayRef(dim), keepdim, type, type, {});
  return r.defined() ? r : Fallback<ATEN_OP2(prod, dim_int)>::call(self, dim, keepdim, dtype);
}

at::Tensor& prodOut(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype,
                    at::Tensor& out) {
  const auto type = dtype ? *dtype : out.scalar_type();
  if (!reduce(atenName<ATEN_OP2(prod, dim_int)>(), self, at::IntArrayRef(dim), keepdim, type, type, out).defined()) {
    Fallback<ATEN_OP2(prod, int_out)>::call(self, dim, keepdim, dtype, out);
  }
  return out;
}

at::Tensor prodAll(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  const auto type = sumType(self, dtype);
  at::Tensor r = reduce(atenName<ATEN_OP2(prod, dim_int)>(), self, std::nullopt, false, type, type, {});
  return r.defined() ? r : Fallback<ATEN_OP(prod)>::call(self, dtype);
}

// The vector p-norm from native pieces (|x|, powers, tsum, tamax), in float32 for
// float16/bfloat16 as PyTorch's CPU kernel computes it. Integer inputs, and the
// norms without an identity (negative or infinite order) of empty reductions, go to
// the CPU, which raises PyTorch's errors.
at::Tensor vectorNorm(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                      std::optional<at::ScalarType> dtype) {
  const at::ScalarType type = dtype.value_or(self.scalar_type());
  const double p = ord.toDouble();
  const bool native = at::isFloatingType(self.scalar_type()) && at::isFloatingType(type) &&
                      !((std::isinf(p) || p < 0) && (self.numel() == 0 || reducedCount(self, dim) == 0));
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

// nansum: NaNs count as zeros. Complex inputs are refused as by every ATen backend
// (sum would take them and let a NaN part through).
at::Tensor nansumOf(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                  std::optional<at::ScalarType> dtype) {
  TORCH_CHECK(!at::isComplexType(self.scalar_type()), "nansum does not support complex inputs");
  const at::Tensor zeroed = at::isFloatingType(self.scalar_type())
                                ? at::where(at::isnan(self), at::zeros({}, self.options()), self) : self;
  return at::sum(zeroed, dim, keepdim, dtype);
}

at::Tensor& nansumOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                      std::optional<at::ScalarType> dtype, at::Tensor& out) {
  // As sum's: out's dtype is the one it sums in when none is given; the CPU's kernel
  // then has none for a floating input into an integer out.
  TORCH_CHECK_NOT_IMPLEMENTED(dtype || !at::isFloatingType(self.scalar_type()) ||
                                  !at::isIntegralType(out.scalar_type(), /*includeBool=*/true),
                              "\"nansum_cpu\" not implemented for '", c10::toString(out.scalar_type()), "'");
  return assign(out, nansumOf(self, dim, keepdim, dtype.value_or(out.scalar_type())));
}

at::Tensor countNonzero(const at::Tensor& self, at::IntArrayRef dim) {
  return at::sum(at::ne(self, 0), dim, false, at::kLong);
}

std::tuple<at::Tensor&, at::Tensor&> aminmaxOut(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                                                at::Tensor& min, at::Tensor& max) {
  const at::OptionalIntArrayRef dims = dimsOf(dim);
  const at::ScalarType type = self.scalar_type();
  const bool native = !emptyExtreme(self, dims) && min.scalar_type() == type && max.scalar_type() == type &&
                      !sharesStorage(min, self) && !sharesStorage(max, self) && !sharesStorage(min, max) &&
                      reduce("aten::amin", self, dims, keepdim, type, type, min).defined() &&
                      reduce("aten::amax", self, dims, keepdim, type, type, max).defined();
  if (!native) return Fallback<ATEN_OP2(aminmax, out)>::call(self, dim, keepdim, min, max);
  return {min, max};
}

std::tuple<at::Tensor, at::Tensor> aminmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  at::Tensor min = at::empty({0}, self.options()), max = at::empty({0}, self.options());
  aminmaxOut(self, dim, keepdim, min, max);
  return {min, max};
}

// trace: the sum of the main diagonal (a strided view), in sum's dtype.
at::Tensor traceOf(const at::Tensor& self) {
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  return at::sum(self.diagonal());
}

}  // namespace pto::torch_glue
