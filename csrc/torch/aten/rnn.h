// The fused LSTM and GRU cells torch's RNN code calls for every device but the CPU
// (aten::_thnn_fused_lstm_cell / _gru_cell: CUDA has kernels, nothing else does),
// as compositions of pto ops. Registered under autograd, so the composition's own
// ops carry the gradients and the fused cells' backward kernels are never needed.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <tuple>

namespace pto::torch_glue {

// gates = input_gates + hidden_gates (+ biases), chunked as [i, f, g, o]:
// cy = sigmoid(f) * cx + sigmoid(i) * tanh(g), hy = sigmoid(o) * tanh(cy);
// the workspace holds the four activated gates, as CUDA's does.
std::tuple<at::Tensor, at::Tensor, at::Tensor> fusedLstmCell(const at::Tensor& input_gates,
                                                             const at::Tensor& hidden_gates, const at::Tensor& cx,
                                                             const std::optional<at::Tensor>& input_bias,
                                                             const std::optional<at::Tensor>& hidden_bias);

// Gates chunked as [r, z, n]: r and z are sigmoids of the summed gates, n =
// tanh(input_n + r * hidden_n), hy = n + z * (hx - n); the workspace holds r, z, n,
// hx and hidden_n, as CUDA's does.
std::tuple<at::Tensor, at::Tensor> fusedGruCell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                const at::Tensor& hx, const std::optional<at::Tensor>& input_bias,
                                                const std::optional<at::Tensor>& hidden_bias);

}  // namespace pto::torch_glue
