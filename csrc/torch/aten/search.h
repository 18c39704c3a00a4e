// torch.searchsorted and torch.bucketize on pto: one tsearchsorted of the values in
// their sorted lines (a one-dimensional sequence is shared by every value through
// stride 0). Where PyTorch promotes (the sequence and the values of two dtypes, a
// number searched for), the operands are converted to the common dtype first; a
// sorter's order is applied by a tgather of the lines; an int32 result (out_int32)
// is the positions converted. Arguments PyTorch's checks refuse go to the CPU
// fallback, which raises its error.
#pragma once

#include <ATen/ATen.h>

#include <optional>

namespace pto::torch_glue {

at::Tensor searchsorted(const at::Tensor& sorted_sequence, const at::Tensor& self, bool out_int32, bool right,
                        std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter);
at::Tensor& searchsortedOut(const at::Tensor& sorted_sequence, const at::Tensor& self, bool out_int32, bool right,
                            std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter,
                            at::Tensor& out);
at::Tensor searchsortedScalar(const at::Tensor& sorted_sequence, const at::Scalar& self, bool out_int32, bool right,
                              std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter);
at::Tensor& searchsortedScalarOut(const at::Tensor& sorted_sequence, const at::Scalar& self, bool out_int32,
                                  bool right, std::optional<c10::string_view> side,
                                  const std::optional<at::Tensor>& sorter, at::Tensor& out);

// bucketize(values, boundaries) is searchsorted(boundaries, values) over one-dimensional boundaries.
at::Tensor bucketize(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right);
at::Tensor& bucketizeOut(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right,
                         at::Tensor& out);
at::Tensor bucketizeScalar(const at::Scalar& self, const at::Tensor& boundaries, bool out_int32, bool right);

}  // namespace pto::torch_glue
