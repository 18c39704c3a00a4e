// Registers reduction.h's kernels for the aten ops they implement on pto.
#include <ATen/Operators.h>
#include <torch/library.h>

#include "reduction.h"

namespace pto::torch_glue {

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
    using F = Extreme<ATEN_OP(amax), ATEN_OP2(amax, out)>;
    m.impl("amax", TORCH_FN(F::functional));
    m.impl("amax.out", TORCH_FN(F::out));
  }
  {
    using F = Extreme<ATEN_OP(amin), ATEN_OP2(amin, out)>;
    m.impl("amin", TORCH_FN(F::functional));
    m.impl("amin.out", TORCH_FN(F::out));
  }
  m.impl("aminmax", TORCH_FN(aminmax));
  m.impl("aminmax.out", TORCH_FN(aminmaxOut));
  m.impl("max", TORCH_FN((extremeAll<ATEN_OP(amax), ATEN_OP(max)>)));
  m.impl("min", TORCH_FN((extremeAll<ATEN_OP(amin), ATEN_OP(min)>)));
  m.impl("max.dim", TORCH_FN((extremeWithIndex<ATEN_OP2(max, dim)>)));
  m.impl("min.dim", TORCH_FN((extremeWithIndex<ATEN_OP2(min, dim)>)));
  m.impl("argmax", TORCH_FN((ArgExtreme<ATEN_OP(argmax), ATEN_OP2(argmax, out)>::functional)));
  m.impl("argmax.out", TORCH_FN((ArgExtreme<ATEN_OP(argmax), ATEN_OP2(argmax, out)>::out)));
  m.impl("argmin", TORCH_FN((ArgExtreme<ATEN_OP(argmin), ATEN_OP2(argmin, out)>::functional)));
  m.impl("argmin.out", TORCH_FN((ArgExtreme<ATEN_OP(argmin), ATEN_OP2(argmin, out)>::out)));
  m.impl("any", TORCH_FN((logical<ATEN_OP2(any, dims), ATEN_OP(any)>)));
  m.impl("all", TORCH_FN((logical<ATEN_OP2(all, dims), ATEN_OP(all)>)));
  m.impl("any.dim", TORCH_FN((logicalDim<ATEN_OP2(any, dims), ATEN_OP2(any, dim)>)));
  m.impl("all.dim", TORCH_FN((logicalDim<ATEN_OP2(all, dims), ATEN_OP2(all, dim)>)));
  m.impl("any.dims", TORCH_FN((logicalDims<ATEN_OP2(any, dims), ATEN_OP2(any, dims)>)));
  m.impl("all.dims", TORCH_FN((logicalDims<ATEN_OP2(all, dims), ATEN_OP2(all, dims)>)));
  m.impl("any.all_out", TORCH_FN((logicalOut<ATEN_OP2(any, dims), ATEN_OP(any)>)));
  m.impl("all.all_out", TORCH_FN((logicalOut<ATEN_OP2(all, dims), ATEN_OP(all)>)));
  m.impl("any.out", TORCH_FN((logicalDimOut<ATEN_OP2(any, dims), ATEN_OP2(any, dim)>)));
  m.impl("all.out", TORCH_FN((logicalDimOut<ATEN_OP2(all, dims), ATEN_OP2(all, dim)>)));
  m.impl("any.dims_out", TORCH_FN((logicalDimsOut<ATEN_OP2(any, dims), ATEN_OP2(any, dims)>)));
  m.impl("all.dims_out", TORCH_FN((logicalDimsOut<ATEN_OP2(all, dims), ATEN_OP2(all, dims)>)));
}

}  // namespace pto::torch_glue
