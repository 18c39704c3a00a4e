// Sorting and scans on pto: sort (stable or not; argsort and msort come through
// it) is one targsort for the indices and one tgather of the values with them;
// topk is one ttopk and one tgather; cumsum and cumprod are one tcumsum / tcumprod,
// after a tcvt when the result's dtype is not the input's (integers and bools sum
// in int64, as in PyTorch). Only the out= forms are registered: PyTorch's
// structured composites (sort.stable, topk, cumsum, cumsum_ ...) check their
// arguments, allocate the results and call them. kthvalue, median and nanmedian
// pick from one stable sort.
#pragma once

#include <ATen/ATen.h>

namespace pto::torch_glue {

// Always stable: an unstable sort may order equal values any way, and this is one.
std::tuple<at::Tensor&, at::Tensor&> sortOut(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                              bool descending, at::Tensor& values, at::Tensor& indices);

// Always sorted: with sorted=False PyTorch promises no order, so this one will do.
std::tuple<at::Tensor&, at::Tensor&> topkOut(const at::Tensor& self, c10::SymInt k, int64_t dim, bool largest,
                                              bool sorted, at::Tensor& values, at::Tensor& indices);

// kthvalue: the k-th smallest along dim, NaN counted largest.
std::tuple<at::Tensor&, at::Tensor&> kthvalueOut(const at::Tensor& self, int64_t k, int64_t dim, bool keepdim,
                                                 at::Tensor& values, at::Tensor& indices);

// cumsum and cumprod: the scan of self, converted to out's dtype, into out; out may be
// self (in place).
at::Tensor& cumsumOut(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor& out);
at::Tensor& cumprodOut(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor& out);

// median and nanmedian, along dim or over every element: the lower median, from one
// stable sort; NaN handled as PyTorch does (median: the first NaN; nanmedian: skipped).
std::tuple<at::Tensor&, at::Tensor&> medianDimOut(const at::Tensor& self, int64_t dim, bool keepdim,
                                                  at::Tensor& values, at::Tensor& indices);
std::tuple<at::Tensor&, at::Tensor&> nanmedianDimOut(const at::Tensor& self, int64_t dim, bool keepdim,
                                                     at::Tensor& values, at::Tensor& indices);
at::Tensor median(const at::Tensor& self);
at::Tensor nanmedian(const at::Tensor& self);

}  // namespace pto::torch_glue
