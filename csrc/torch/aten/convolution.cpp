#include "convolution.h"

#include "fallback.h"

namespace pto::backend {
namespace {

at::Tensor backTo(const at::Tensor& result, const c10::Device& device) {
  return result.defined() ? result.to(device) : result;
}

}  // namespace

at::Tensor convolutionOverrideable(const at::Tensor& input, const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                   c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                   bool transposed, c10::IntArrayRef output_padding, int64_t groups) {
  enterCpuFallback("aten::convolution_overrideable");
  std::optional<at::Tensor> bias_cpu;
  if (bias && bias->defined()) bias_cpu = bias->cpu();
  const at::Tensor output = at::convolution(input.cpu(), weight.cpu(), bias_cpu, stride, padding,
                                            dilation, transposed, output_padding, groups);
  return output.to(input.device());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolutionBackwardOverrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  enterCpuFallback("aten::convolution_backward_overrideable");
  const int64_t bias_size = transposed ? weight.size(1) * groups : weight.size(0);
  const std::vector<c10::SymInt> bias_sizes{c10::SymInt(bias_size)};
  auto [grad_input, grad_weight, grad_bias] = at::convolution_backward_symint(
      grad_output.cpu(), input.cpu(), weight.cpu(), c10::SymIntArrayRef(bias_sizes),
      c10::fromIntArrayRefSlow(stride), c10::fromIntArrayRefSlow(padding),
      c10::fromIntArrayRefSlow(dilation), transposed, c10::fromIntArrayRefSlow(output_padding),
      c10::SymInt(groups), output_mask);
  const c10::Device device = input.device();
  return {backTo(grad_input, device), backTo(grad_weight, device), backTo(grad_bias, device)};
}

}  // namespace pto::backend
