// Scatter on pto: scatter, scatter_add and scatter_reduce are one tscatter /
// tscatteradd / tscattermul / tscattermax / tscattermin (their functional and
// in-place forms reach the out= kernels here through torch's composites, after its
// shape checks). An index out of range fails the kernel, and the next synchronising
// call raises, naming it.
#pragma once

#include <ATen/ATen.h>

namespace pto::torch_glue {

at::Tensor& scatterSrcOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                          at::Tensor& out);
at::Tensor& scatterValueOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value,
                            at::Tensor& out);
at::Tensor& scatterAddOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                          at::Tensor& out);
at::Tensor& scatterReduceOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                             c10::string_view reduce, at::Tensor& out);
at::Tensor& scatterValueReduceOut(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                  const at::Scalar& value, c10::string_view reduce, at::Tensor& out);

// scatter_reduce: one tscatteradd / tscattermul / tscattermax / tscattermin. Without
// self, the positions scattered to first take 0 (sum, mean), 1 (prod) or one of
// their values (amax, amin, which may see it twice). A mean divides the sum by the
// count of values, self counting as one, as torch does; integer means, which torch
// rounds down, stay on the CPU.
at::Tensor& scatterReduceTwoOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                c10::string_view reduce, bool include_self, at::Tensor& out);

}  // namespace pto::torch_glue
