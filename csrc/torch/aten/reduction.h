// Reductions on pto as PTO instructions (tsum, tamax, targmax, tany ...), with
// PyTorch's dim lists, keepdim, dtype rules and out= forms.
#pragma once

#include <ATen/ATen.h>

#include "isa/instructions.h"

namespace pto::backend {

// Reduces `self` over `dims` (none or empty: every dimension) computing in
// `compute`; writes a new tensor of dtype `result`, or `out`. `scale`
// multiplies a tsum (mean = tsum with 1/n). Undefined result: not supported
// natively (the caller falls back).
at::Tensor reduce(isa::Opcode opcode, const at::Tensor& self, at::OptionalIntArrayRef dims,
                  bool keepdim, at::ScalarType compute, at::ScalarType result,
                  const at::Tensor& out, double scale = 1.0);

// The number of elements each output element folds.
int64_t reducedCount(const at::Tensor& self, at::OptionalIntArrayRef dims);

}  // namespace pto::backend
