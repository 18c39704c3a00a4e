// cat on pto (and stack, which PyTorch builds on it): each input is one tmov
// (or tcvt, when promoted) into its slice of the output.
#pragma once

#include <ATen/ATen.h>

namespace pto::torch_glue {

at::Tensor& catOut(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out);
at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim);

}  // namespace pto::torch_glue
