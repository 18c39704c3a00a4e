// Pointwise aten ops pto runs as one or a few native instructions, with the formulas
// and NaN behaviour of PyTorch's CPU kernels: clamp, masked_fill, leaky_relu, nan_to_num,
// isnan, isposinf/isneginf, signbit, the logical ops, and the optimizers' updates
// (addcmul, addcdiv, lerp). Each step dispatches to pto's own kernels, so nothing
// leaves the device.
#pragma once

#include <ATen/ATen.h>

namespace pto::torch_glue {

at::Tensor clamp(const at::Tensor& self, const std::optional<at::Scalar>& min, const std::optional<at::Scalar>& max);
at::Tensor& clampOut(const at::Tensor& self, const std::optional<at::Scalar>& min, const std::optional<at::Scalar>& max,
                     at::Tensor& out);
at::Tensor& clampInplace(at::Tensor& self, const std::optional<at::Scalar>& min, const std::optional<at::Scalar>& max);
at::Tensor clampMin(const at::Tensor& self, const at::Scalar& min);
at::Tensor& clampMinOut(const at::Tensor& self, const at::Scalar& min, at::Tensor& out);
at::Tensor& clampMinInplace(at::Tensor& self, const at::Scalar& min);
at::Tensor clampMax(const at::Tensor& self, const at::Scalar& max);
at::Tensor& clampMaxOut(const at::Tensor& self, const at::Scalar& max, at::Tensor& out);
at::Tensor& clampMaxInplace(at::Tensor& self, const at::Scalar& max);
// The Tensor overloads' out forms (their functional and in-place forms are torch's
// composites over these): bounds of any shape that broadcasts, an out of any dtype the
// result safely casts to, as the CPU's.
at::Tensor& clampTensorOut(const at::Tensor& self, const std::optional<at::Tensor>& min,
                           const std::optional<at::Tensor>& max, at::Tensor& out);
at::Tensor& clampMinTensorOut(const at::Tensor& self, const at::Tensor& min, at::Tensor& out);
at::Tensor& clampMaxTensorOut(const at::Tensor& self, const at::Tensor& max, at::Tensor& out);

// hardtanh is a clamp (relu6 included); its gradient is an instruction (activation.h).
at::Tensor hardtanh(const at::Tensor& self, const at::Scalar& min, const at::Scalar& max);
at::Tensor& hardtanhOut(const at::Tensor& self, const at::Scalar& min, const at::Scalar& max, at::Tensor& out);
at::Tensor& hardtanhInplace(at::Tensor& self, const at::Scalar& min, const at::Scalar& max);

// masked_fill_: tsel(mask, value, self) written over self.
at::Tensor& maskedFillScalar(at::Tensor& self, const at::Tensor& mask, const at::Scalar& value);
at::Tensor& maskedFillTensor(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value);
at::Tensor leakyReluOf(const at::Tensor& self, const at::Scalar& slope);
at::Tensor& leakyReluOut(const at::Tensor& self, const at::Scalar& slope, at::Tensor& out);
at::Tensor& leakyReluInplace(at::Tensor& self, const at::Scalar& slope);
at::Tensor nanToNum(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                    std::optional<double> neginf);
at::Tensor& nanToNumOut(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                        std::optional<double> neginf, at::Tensor& out);
at::Tensor& nanToNumInplace(at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                            std::optional<double> neginf);

at::Tensor& isposinfOut(const at::Tensor& self, at::Tensor& out);
at::Tensor& isneginfOut(const at::Tensor& self, at::Tensor& out);
at::Tensor& logicalAndOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);
at::Tensor& logicalOrOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);
at::Tensor& logicalXorOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);
at::Tensor& logicalNotOut(const at::Tensor& self, at::Tensor& out);

at::Tensor& addcmulOut(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                       const at::Scalar& value, at::Tensor& out);
at::Tensor addcmul(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                   const at::Scalar& value);
at::Tensor& addcmulInplace(at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                           const at::Scalar& value);
at::Tensor& addcdivOut(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                       const at::Scalar& value, at::Tensor& out);
at::Tensor addcdiv(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                   const at::Scalar& value);
at::Tensor& addcdivInplace(at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                           const at::Scalar& value);
at::Tensor& lerpOut(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight, at::Tensor& out);
at::Tensor lerp(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight);
at::Tensor& lerpInplace(at::Tensor& self, const at::Tensor& end, const at::Scalar& weight);
// lerp with a tensor weight: one tlerpw; dtypes PyTorch refuses or complex ones on the CPU.
at::Tensor& lerpTensorOut(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight, at::Tensor& out);
at::Tensor lerpTensor(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight);
at::Tensor& lerpTensorInplace(at::Tensor& self, const at::Tensor& end, const at::Tensor& weight);

// NaN is the one value unequal to itself; integers and bool have none.
at::Tensor isnan(const at::Tensor& self);

// signbit: one comparison with 0 of a floating tensor's bits as signed integers.
at::Tensor signbit(const at::Tensor& self);
at::Tensor& signbitOut(const at::Tensor& self, at::Tensor& out);

}  // namespace pto::torch_glue
