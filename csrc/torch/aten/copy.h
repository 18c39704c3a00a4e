// Copies between CPU and pto and within pto (aten::_copy_from and friends).
#pragma once

#include <ATen/ATen.h>

namespace pto::torch_glue {

at::Tensor copyFrom(const at::Tensor& self, const at::Tensor& dst, bool non_blocking);
at::Tensor copyFromAndResize(const at::Tensor& self, const at::Tensor& dst);
at::Scalar localScalarDense(const at::Tensor& self);

}  // namespace pto::torch_glue
