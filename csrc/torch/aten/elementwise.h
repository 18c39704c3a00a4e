// Elementwise aten ops as PTO instructions: type promotion, broadcasting, and
// the functional, in-place and out= forms, with PyTorch's rules and messages.
// An op whose dtypes PTO lacks (complex, ...) goes to the CPU fallback.
#pragma once

#include <ATen/ATen.h>

#include "aten_instructions.h"

namespace pto::backend {

// out == undefined: functional (returns a new tensor); out == self: in-place.
// Returns an undefined tensor when PTO cannot run it (the caller falls back).
at::Tensor binaryOp(isa::Opcode opcode, Promotion promotion, const at::Tensor& self,
                    const at::Tensor& other, const at::Tensor& out, double alpha = 1.0);
at::Tensor unaryOp(isa::Opcode opcode, Promotion promotion, const at::Tensor& self,
                   const at::Tensor& out);
at::Tensor whereOp(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other,
                   const at::Tensor& out);

// dst <- src (same shape) on one pto device: tmov, or tcvt when the dtypes differ.
// Returns false when PTO lacks one of the dtypes.
bool copyOnDevice(const at::Tensor& dst, const at::Tensor& src);

at::Tensor& fill(at::Tensor& self, const at::Scalar& value);  // falls back itself if needed

}  // namespace pto::backend
