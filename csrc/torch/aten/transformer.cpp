#include "transformer.h"

#include <ATen/Operators.h>
#include <ATen/SDPBackend.h>

#include <initializer_list>

#include "fallback.h"
#include "recipe_launch.h"

namespace pto::torch_glue {
namespace {

// The CPU's checks of a linear layer `weight` (and `bias`) over rows of `features`
// elements, as its GEMM and bias add make them.
void checkLinear(int64_t features, const at::Tensor& weight, const at::Tensor& bias) {
  TORCH_CHECK(weight.dim() == 2, "2d weights expected");
  TORCH_CHECK(weight.size(1) == features, "mat1 and mat2 shapes cannot be multiplied (rows x ", features, " and ",
              weight.size(1), "x", weight.size(0), ")");
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "The size of the bias ", bias.sizes(),
              " must match the layer's outputs ", weight.size(0));
}

void checkSameDevice(const at::Tensor& query, std::initializer_list<at::Tensor> tensors) {
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(!t.defined() || t.device() == query.device(),
                "Expected all tensors to be on the same device, but found at least two devices, ", query.device(),
                " and ", t.device(), "!");
  }
}

// The CPU's masked softmax checks: mask_type 0 an (L, L) src_mask, 1 a (B, L) key
// padding mask, 2 (or a mask of another rank) the scores' (B, heads, L, L).
void checkMask(const at::Tensor& mask, std::optional<int64_t> mask_type, const at::Tensor& query, int64_t heads) {
  TORCH_CHECK(mask_type.has_value(), "Mask Type should be defined");
  const int64_t type = *mask_type, batch = query.size(0), length = query.size(1);
  TORCH_CHECK(type >= 0 && type <= 2,
              "Mask Type should be 0 (src_mask) or 1 (src_key_padding_mask), or 2 (default_mask)");
  if (type == 0 && mask.dim() == 2) {
    TORCH_CHECK(mask.size(0) == length && mask.size(1) == length, "For mask_type == 0 mask shape should be (L, L)");
  } else if (type == 1 && mask.dim() == 2) {
    TORCH_CHECK(mask.size(0) == batch && mask.size(1) == length, "For mask_type == 1 mask shape should be (B, L)");
  } else {
    TORCH_CHECK(mask.sizes() == at::IntArrayRef({batch, heads, length, length}),
                "For mask_type == 2 mask shape should match input shape");
  }
}

// The CPU's checks of native_multi_head_attention's arguments.
void checkAttention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim,
                    int64_t num_head, const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
                    const at::Tensor& proj_weight, const at::Tensor& proj_bias, const std::optional<at::Tensor>& mask,
                    std::optional<int64_t> mask_type) {
  checkSameDevice(query, {key, value, qkv_weight, qkv_bias, proj_weight, proj_bias, mask.value_or(at::Tensor())});
  TORCH_CHECK(query.dim() == 3, "expected 3-D `query`, got ", query.dim(), "-D tensor");
  TORCH_CHECK(query.size(2) == embed_dim, "passed-in embed_dim ", embed_dim, " didn't match last dim of query ",
              query.size(2));
  TORCH_CHECK(key.dim() == 3, "expected 3-D `key`, got ", key.dim(), "-D tensor");
  TORCH_CHECK(value.dim() == 3, "expected 3-D `value`, got ", value.dim(), "-D tensor");
  TORCH_CHECK(query.sizes() == key.sizes() && key.sizes() == value.sizes(),
              "expected `query`/`key`/`value` shapes to match");
  TORCH_CHECK(qkv_weight.dim() == 2, "expected 2-D `qkv_weight`, got ", qkv_weight.dim(), "-D tensor");
  TORCH_CHECK(embed_dim * 3 == qkv_weight.size(0), "expected `qkv_weight` first dim to be 3x embed_dim");
  TORCH_CHECK(embed_dim == qkv_weight.size(1), "expected `qkv_weight` second dim to be embed_Dim");
  TORCH_CHECK(qkv_bias.dim() == 1, "expected 1-D `qkv_bias`, got ", qkv_bias.dim(), "-D tensor");
  TORCH_CHECK(qkv_bias.size(0) == 3 * embed_dim,
              "expected `qkv_bias` first dim and first dim of query to be equal");
  TORCH_CHECK(num_head > 0 && embed_dim % num_head == 0, "`embed_dim` must divide evenly by `num_heads`");
  for (const at::Tensor& t : {key, value, qkv_weight, qkv_bias, proj_weight, proj_bias}) {
    TORCH_CHECK(t.scalar_type() == query.scalar_type(), "expected m1 and m2 to have the same dtype, but got: ",
                query.scalar_type(), " != ", t.scalar_type());
  }
  checkLinear(embed_dim, proj_weight, proj_bias);
  if (mask && query.numel() != 0) checkMask(*mask, mask_type, query, num_head);
}

}  // namespace

int64_t fusedSdpChoice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                       const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                       std::optional<double> scale, bool enable_gqa) {
  return static_cast<int64_t>(at::SDPBackend::math);
}

std::tuple<at::Tensor, at::Tensor> nativeMultiHeadAttention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim, int64_t num_head,
    const at::Tensor& qkv_weight, const at::Tensor& qkv_bias, const at::Tensor& proj_weight,
    const at::Tensor& proj_bias, const std::optional<at::Tensor>& mask, bool need_weights, bool average_attn_weights,
    std::optional<int64_t> mask_type) {
  checkAttention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias, mask,
                 mask_type);
  if (query.numel() == 0) return {at::empty_like(query), at::Tensor()};
  const int64_t batch = query.size(0), tokens = query.size(1);
  at::Tensor out = at::empty({batch, tokens, proj_weight.size(0)}, query.options());
  at::Tensor weights;
  if (need_weights) {
    weights = average_attn_weights ? at::empty({batch, tokens, tokens}, query.options())
                                   : at::empty({batch, num_head, tokens, tokens}, query.options());
  }
  RecipeCall call(atenName<ATEN_OP(_native_multi_head_attention)>());
  call.tensor("query", query).tensor("key", key).tensor("value", value);
  call.value("embed_dim", embed_dim).value("num_head", num_head);
  call.tensor("qkv_weight", qkv_weight).tensor("qkv_bias", qkv_bias);
  call.tensor("proj_weight", proj_weight).tensor("proj_bias", proj_bias).tensor("mask", mask);
  call.value("need_weights", need_weights).value("average_attn_weights", average_attn_weights);
  call.value("mask_type", mask_type ? recipes::Value{*mask_type} : recipes::Value{});
  call.result(out);
  if (need_weights) call.result(weights);
  if (call.launch()) return {out, weights};
  return Fallback<ATEN_OP(_native_multi_head_attention)>::call(query, key, value, embed_dim, num_head, qkv_weight,
                                                               qkv_bias, proj_weight, proj_bias, mask, need_weights,
                                                               average_attn_weights, mask_type);
}

at::Tensor transformerEncoderLayer(const at::Tensor& src, int64_t embed_dim, int64_t num_heads,
                                   const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
                                   const at::Tensor& proj_weight, const at::Tensor& proj_bias, bool use_gelu,
                                   bool norm_first, double eps, const at::Tensor& norm_weight_1,
                                   const at::Tensor& norm_bias_1, const at::Tensor& norm_weight_2,
                                   const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1,
                                   const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2,
                                   const at::Tensor& ffn_bias_2, const std::optional<at::Tensor>& mask,
                                   std::optional<int64_t> mask_type) {
  if (src.numel() == 0) return src.clone();
  checkAttention(src, src, src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, mask, mask_type);
  checkSameDevice(src, {norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1,
                        ffn_weight_2, ffn_bias_2});
  TORCH_CHECK(proj_weight.size(0) == embed_dim, "output with shape ", src.sizes(),
              " doesn't match the broadcast shape of the attention's output (last dim ", proj_weight.size(0), ")");
  for (const at::Tensor& t : {norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2}) {
    TORCH_CHECK(t.dim() == 1 && t.size(0) == embed_dim, "Expected weight to be of same shape as normalized_shape [",
                embed_dim, "], but got weight of shape ", t.sizes());
  }
  checkLinear(embed_dim, ffn_weight_1, ffn_bias_1);
  checkLinear(ffn_weight_1.size(0), ffn_weight_2, ffn_bias_2);
  TORCH_CHECK(ffn_weight_2.size(0) == embed_dim, "output with shape ", src.sizes(),
              " doesn't match the broadcast shape of the feed-forward's output (last dim ", ffn_weight_2.size(0), ")");
  for (const at::Tensor& t : {norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1,
                              ffn_weight_2, ffn_bias_2}) {
    TORCH_CHECK(t.scalar_type() == src.scalar_type(), "expected m1 and m2 to have the same dtype, but got: ",
                src.scalar_type(), " != ", t.scalar_type());
  }
  at::Tensor out = at::empty(src.sizes(), src.options());
  RecipeCall call(atenName<ATEN_OP(_transformer_encoder_layer_fwd)>());
  call.tensor("src", src).value("embed_dim", embed_dim).value("num_heads", num_heads);
  call.tensor("qkv_weight", qkv_weight).tensor("qkv_bias", qkv_bias);
  call.tensor("proj_weight", proj_weight).tensor("proj_bias", proj_bias);
  call.value("use_gelu", use_gelu).value("norm_first", norm_first).value("eps", eps);
  call.tensor("norm_weight_1", norm_weight_1).tensor("norm_bias_1", norm_bias_1);
  call.tensor("norm_weight_2", norm_weight_2).tensor("norm_bias_2", norm_bias_2);
  call.tensor("ffn_weight_1", ffn_weight_1).tensor("ffn_bias_1", ffn_bias_1);
  call.tensor("ffn_weight_2", ffn_weight_2).tensor("ffn_bias_2", ffn_bias_2);
  call.tensor("mask", mask).value("mask_type", mask_type ? recipes::Value{*mask_type} : recipes::Value{});
  if (call.result(out).launch()) return out;
  return Fallback<ATEN_OP(_transformer_encoder_layer_fwd)>::call(
      src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps,
      norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask,
      mask_type);
}

}  // namespace pto::torch_glue
