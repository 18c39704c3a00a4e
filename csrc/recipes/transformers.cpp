// Transformer recipes: torch's inference fast paths, what nn.MultiheadAttention
// (aten::_native_multi_head_attention) and nn.TransformerEncoderLayer
// (aten::_transformer_encoder_layer_fwd) call in eval under no_grad, computed as the
// CPU computes them: the in-projection as one GEMM, q scaled, the heads' scores, the
// mask as the CPU's masked softmax reads it (any nonzero element masks), the weights'
// product written in (batch, token, head) order so the out-projection reads it as rows.
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aten_instructions.h"
#include "families.h"

namespace pto::recipes {
namespace {

using isa::DType;
using isa::Opcode;

constexpr Opcode kAdd = atenInstruction("add").opcode;

// out = a @ weight^T + bias over a's rows (aten::linear): the bias moved into out and
// the GEMM accumulating onto it, as the addmm recipe does.
void linear(Recipe& r, const View& out, const View& a, const View& weight, const View& bias) {
  const int64_t rows = a.numel() / a.shape.back();
  const std::optional<View> out_rows = viewAs(out, {rows, out.shape.back()});
  if (!out_rows) throw NotApplicable("a linear whose output is not rows");
  r.emit(Opcode::kMove, *out_rows, {expand(bias, out_rows->shape)});
  r.emit(Opcode::kMatmul, *out_rows, {r.reshape(a, {rows, a.shape.back()}), permute(weight, {1, 0})}, {1.0, 1.0});
}

// torch.layer_norm over the last dim into `out`, one tlayernorm.
View layerNorm(Recipe& r, const View& out, const View& x, const View& weight, const View& bias, double eps) {
  const std::vector<int64_t> rows{x.numel() / x.shape.back(), x.shape.back()};
  const std::optional<View> out_rows = viewAs(out, rows);
  if (!out_rows) throw NotApplicable("a layer norm whose output is not rows");
  r.emit(Opcode::kLayerNorm, *out_rows, {r.reshape(x, rows), expand(weight, rows), expand(bias, rows)}, {eps});
  return out;
}

struct Attention {
  View query, key, value, qkv_weight, qkv_bias, proj_weight, proj_bias;
  std::optional<View> mask;
  std::optional<int64_t> mask_type;
  int64_t heads = 1;
};

bool sameView(const View& a, const View& b) {
  return a.buffer == b.buffer && a.shape == b.shape && a.strides == b.strides && a.offset == b.offset;
}

// The mask as the CPU's _masked_softmax takes it, at the scores' (batch, heads, L, L):
// mask_type 0 an (L, L) mask, 1 a (batch, L) key padding mask, else the scores' shape.
View maskAtScores(Recipe& r, const View& mask, int64_t mask_type, const std::vector<int64_t>& scores) {
  const View masked = mask.dtype == DType::kBool
                          ? mask
                          : r.emit(atenInstruction("ne").opcode, r.temporary(DType::kBool, mask.shape),
                                   {mask, r.operand(0.0, mask.dtype, mask.shape)});
  const int64_t batch = scores[0], length = scores[3];
  if (mask_type == 0 && mask.rank() == 2) {
    if (mask.shape != std::vector<int64_t>{length, length}) throw NotApplicable("an src_mask not (L, L)");
    return expand(masked, scores);
  }
  if (mask_type == 1 && mask.rank() == 2) {
    if (mask.shape != std::vector<int64_t>{batch, length}) throw NotApplicable("a key padding mask not (B, L)");
    return expand(*viewAs(masked, {batch, 1, 1, length}), scores);
  }
  if (mask_type < 0 || mask_type > 2 || mask.shape != scores) throw NotApplicable("a mask of another shape");
  return masked;
}

// Multi-head attention of `a` into `out` (batch, tokens, out-projection rows); the
// softmax weights into `weights` where asked for, per head or averaged over the heads.
void multiHeadAttention(Recipe& r, const Attention& a, const View& out, const std::optional<View>& weights,
                        bool average_weights) {
  const View& query = a.query;
  if (query.rank() != 3 || query.numel() == 0 || a.key.shape != query.shape || a.value.shape != query.shape) {
    throw NotApplicable("attention over other than (batch, tokens, embed_dim) of tokens");
  }
  for (const View& t : {a.key, a.value, a.qkv_weight, a.qkv_bias, a.proj_weight, a.proj_bias}) {
    if (t.dtype != query.dtype) throw NotApplicable("attention over several dtypes");
  }
  const int64_t batch = query.shape[0], tokens = query.shape[1], embed = query.shape[2], heads = a.heads;
  if (heads <= 0 || embed % heads != 0) throw NotApplicable("heads that do not divide embed_dim");
  const int64_t head_dim = embed / heads;
  const DType dtype = query.dtype, compute = widened(dtype);

  // q, k and v side by side in one (batch, tokens, 3 * embed) buffer: one GEMM per
  // distinct input (one for self-attention), as the CPU's qkv_projection.
  const View qkv = r.temporary(dtype, {batch, tokens, 3 * embed});
  std::vector<std::pair<View, int64_t>> inputs{{a.query, 3}};  // an input and how many of q, k, v it gives
  if (!sameView(a.key, a.value)) inputs = {{a.query, 1}, {a.key, 1}, {a.value, 1}};
  else if (!sameView(a.query, a.key)) inputs = {{a.query, 1}, {a.key, 2}};
  int64_t begin = 0;
  for (const auto& [input, parts] : inputs) {
    const int64_t end = begin + parts * embed;
    linear(r, sliced(qkv, 2, begin, end), input, sliced(a.qkv_weight, 0, begin, end), sliced(a.qkv_bias, 0, begin, end));
    begin = end;
  }
  // Part `part` (q, k, v) as (batch, heads, tokens, head_dim): strides, no copy.
  auto heads_of = [&](int64_t part) {
    return View{qkv.buffer, dtype, {batch, heads, tokens, head_dim}, {tokens * 3 * embed, head_dim, 3 * embed, 1},
                qkv.offset + part * embed};
  };
  // q scaled by sqrt(1 / head_dim) before the scores' product, as the CPU's
  // transform_bias_rescale_qkv and F.multi_head_attention_forward (the slow path) scale
  // it: scaling the product instead rounds otherwise wherever the factor is not a power
  // of two (head_dim 50: 1 ulp off the slow path, which a fast path matches bit for bit).
  const std::vector<int64_t> head_shape{batch, heads, tokens, head_dim};
  const View scaled_query =
      r.emit(atenInstruction("mul").opcode, r.temporary(dtype, head_shape),
             {heads_of(0), r.operand(std::sqrt(1.0 / static_cast<double>(head_dim)), dtype, head_shape)});
  const std::vector<int64_t> shape{batch, heads, tokens, tokens};
  View scores = r.temporary(dtype, shape);
  r.emit(Opcode::kMatmul, scores, {scaled_query, permute(heads_of(1), {0, 1, 3, 2})}, {1.0, 0.0});
  scores = r.cast(scores, compute);
  if (a.mask) {
    if (!a.mask_type) throw NotApplicable("a mask without its type");
    scores = r.emit(atenInstruction("where").opcode, r.temporary(compute, shape),
                    {maskAtScores(r, *a.mask, *a.mask_type, shape),
                     r.operand(-std::numeric_limits<double>::infinity(), compute, shape), scores});
  }
  const bool per_head = weights && !average_weights;
  const View probabilities = r.cast(
      r.emit(Opcode::kSoftmax, per_head ? r.resultIn(*weights, compute) : r.temporary(compute, shape), {scores}), dtype);
  if (per_head && probabilities.buffer != weights->buffer) r.copy(*weights, probabilities);
  if (weights && average_weights) {
    r.emit(Opcode::kSum, spread(*weights, shape, {1}), {probabilities}, {1.0 / static_cast<double>(heads)});
  }
  // The product in (batch, tokens, heads, head_dim) order: the out-projection's rows.
  const View context = r.temporary(dtype, {batch, tokens, embed});
  r.emit(Opcode::kMatmul, View{context.buffer, dtype, {batch, heads, tokens, head_dim}, {tokens * embed, head_dim, embed, 1}, context.offset},
         {probabilities, heads_of(2)}, {1.0, 0.0});
  linear(r, out, context, a.proj_weight, a.proj_bias);
}

std::optional<int64_t> maskType(const Arguments& args) {
  if (!args.has("mask_type")) return std::nullopt;
  return args.integer("mask_type");
}

}  // namespace

void addTransformerRecipes(Table& table) {
  table["aten::_native_multi_head_attention"] = [](Recipe& r, const Arguments& args) {
    const Attention attention{args.tensor("query"),       args.tensor("key"),         args.tensor("value"),
                              args.tensor("qkv_weight"),  args.tensor("qkv_bias"),    args.tensor("proj_weight"),
                              args.tensor("proj_bias"),   args.optionalTensor("mask"), maskType(args),
                              args.integer("num_head")};
    if (args.integer("embed_dim") != attention.query.shape.back()) throw NotApplicable("embed_dim not the query's");
    const bool need_weights = args.flag("need_weights", true);
    // Without weights the compiler's graph still has the meta kernel's empty tensor for
    // them (eager returns none): an empty fill makes it the program's own output.
    if (!need_weights && args.resultCount() > 1) r.emit(Opcode::kFill, args.result(1), {}, {0.0});
    multiHeadAttention(r, attention, args.result(0), need_weights ? std::optional<View>(args.result(1)) : std::nullopt,
                       args.flag("average_attn_weights", true));
  };
  // x + attention(x), then x + ffn(x), each normalised after (or its input before, with
  // norm_first), as the CPU's transformer_encoder_layer_forward.
  table["aten::_transformer_encoder_layer_fwd"] = [](Recipe& r, const Arguments& args) {
    const View src = args.tensor("src");
    if (src.rank() != 3 || args.integer("embed_dim") != src.shape.back()) {
      throw NotApplicable("an encoder layer over other than (batch, tokens, embed_dim)");
    }
    const DType dtype = src.dtype;
    const std::vector<int64_t> shape = src.shape;
    const bool norm_first = args.flag("norm_first");
    const double eps = args.number("eps");
    auto norm = [&](const View& x, int which, const std::optional<View>& into = std::nullopt) {
      const std::string suffix = std::to_string(which);
      return layerNorm(r, into ? *into : r.temporary(dtype, shape), x, args.tensor("norm_weight_" + suffix),
                       args.tensor("norm_bias_" + suffix), eps);
    };
    const View x = norm_first ? norm(src, 1) : src;
    const View attended = r.temporary(dtype, shape);
    multiHeadAttention(r,
                       {x, x, x, args.tensor("qkv_weight"), args.tensor("qkv_bias"), args.tensor("proj_weight"),
                        args.tensor("proj_bias"), args.optionalTensor("mask"), maskType(args), args.integer("num_heads")},
                       attended, std::nullopt, true);
    View residual = r.emit(kAdd, r.temporary(dtype, shape), {attended, src}, {1.0});
    if (!norm_first) residual = norm(residual, 1);
    const View ffn_input = norm_first ? norm(residual, 2) : residual;
    const View w1 = args.tensor("ffn_weight_1"), w2 = args.tensor("ffn_weight_2");
    if (w1.rank() != 2 || w2.rank() != 2) throw NotApplicable("ffn weights not matrices");
    const std::vector<int64_t> hidden_shape{shape[0], shape[1], w1.shape[0]};
    const View hidden = r.temporary(dtype, hidden_shape);
    linear(r, hidden, ffn_input, w1, args.tensor("ffn_bias_1"));
    const Opcode activation = args.flag("use_gelu") ? atenInstruction("gelu").opcode : atenInstruction("relu").opcode;
    const View activated = r.emit(activation, r.temporary(dtype, hidden_shape), {hidden});
    const View ffn = r.temporary(dtype, shape);
    linear(r, ffn, activated, w2, args.tensor("ffn_bias_2"));
    const View& result = args.result();
    if (norm_first) {
      r.emit(kAdd, result, {ffn, residual}, {1.0});
    } else {
      norm(r.emit(kAdd, r.temporary(dtype, shape), {ffn, residual}, {1.0}), 2, result);
    }
  };
}

}  // namespace pto::recipes
