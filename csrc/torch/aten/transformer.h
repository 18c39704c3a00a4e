// torch's inference fast paths on pto: what nn.MultiheadAttention and
// nn.TransformerEncoderLayer call in eval under no_grad. The CPU's argument checks,
// then their recipes (csrc/recipes/transformers.cpp); the CPU fallback only where a
// recipe does not apply. And which kernel F.scaled_dot_product_attention takes on pto.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <tuple>

namespace pto::torch_glue {

// aten::_native_multi_head_attention: (the attention's output, its weights per head or
// averaged over them where need_weights, else undefined).
std::tuple<at::Tensor, at::Tensor> nativeMultiHeadAttention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim, int64_t num_head,
    const at::Tensor& qkv_weight, const at::Tensor& qkv_bias, const at::Tensor& proj_weight,
    const at::Tensor& proj_bias, const std::optional<at::Tensor>& mask, bool need_weights, bool average_attn_weights,
    std::optional<int64_t> mask_type);

// aten::_fused_sdp_choice (torch._fused_sdp_choice): the kernel
// scaled_dot_product_attention runs for these inputs, on pto always torch's math path
// (matmuls and a one-instruction safe softmax, with native autograd): pto registers no
// fused attention kernel, so torch never asks the device. The CPU's answer (its flash
// kernel), which the fallback gave, is not what pto runs.
int64_t fusedSdpChoice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                       const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                       std::optional<double> scale, bool enable_gqa);

// aten::_transformer_encoder_layer_fwd.
at::Tensor transformerEncoderLayer(const at::Tensor& src, int64_t embed_dim, int64_t num_heads,
                                   const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
                                   const at::Tensor& proj_weight, const at::Tensor& proj_bias, bool use_gelu,
                                   bool norm_first, double eps, const at::Tensor& norm_weight_1,
                                   const at::Tensor& norm_bias_1, const at::Tensor& norm_weight_2,
                                   const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1,
                                   const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2,
                                   const at::Tensor& ffn_bias_2, const std::optional<at::Tensor>& mask,
                                   std::optional<int64_t> mask_type);

}  // namespace pto::torch_glue
