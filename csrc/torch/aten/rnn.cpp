#include "rnn.h"

namespace pto::torch_glue {
namespace {

at::Tensor withBias(const at::Tensor& gates, const std::optional<at::Tensor>& bias) {
  return bias.has_value() && bias->defined() ? gates + *bias : gates;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> fusedLstmCell(const at::Tensor& input_gates,
                                                             const at::Tensor& hidden_gates, const at::Tensor& cx,
                                                             const std::optional<at::Tensor>& input_bias,
                                                             const std::optional<at::Tensor>& hidden_bias) {
  const at::Tensor gates = withBias(input_gates, input_bias) + withBias(hidden_gates, hidden_bias);
  const auto chunks = gates.chunk(4, 1);
  const at::Tensor in = chunks[0].sigmoid(), forget = chunks[1].sigmoid(), cell = chunks[2].tanh(),
                   out = chunks[3].sigmoid();
  const at::Tensor cy = forget * cx + in * cell;
  const at::Tensor hy = out * cy.tanh();
  return {hy, cy, at::cat({in, forget, cell, out}, 1)};
}

std::tuple<at::Tensor, at::Tensor> fusedGruCell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                const at::Tensor& hx, const std::optional<at::Tensor>& input_bias,
                                                const std::optional<at::Tensor>& hidden_bias) {
  const auto in = withBias(input_gates, input_bias).chunk(3, 1);
  const auto hidden = withBias(hidden_gates, hidden_bias).chunk(3, 1);
  const at::Tensor reset = (in[0] + hidden[0]).sigmoid(), update = (in[1] + hidden[1]).sigmoid();
  const at::Tensor candidate = (in[2] + reset * hidden[2]).tanh();
  const at::Tensor hy = candidate + update * (hx - candidate);
  return {hy, at::cat({reset, update, candidate, hx, hidden[2]}, 1)};
}

}  // namespace pto::torch_glue
