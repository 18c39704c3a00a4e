// Product recipes: matrix products, attention as one program, and the gathers and
// scatters of embeddings and losses.
#include <cmath>
#include <limits>
#include <vector>

#include "aten_instructions.h"
#include "families.h"

namespace pto::recipes {
namespace {

using isa::DType;
using isa::Opcode;

// out = alpha * a @ b (+ beta * out): the GEMM's operands in the result's dtype.
void matmul(Recipe& r, const View& out, const View& a, const View& b, double alpha, double beta) {
  r.emit(Opcode::kMatmul, out, {r.cast(a, out.dtype), r.cast(b, out.dtype)}, {alpha, beta});
}

// beta * bias + alpha * a @ b as aten computes it: the bias is moved into the output
// and the GEMM accumulates onto it (tmatmul's beta), so float16/bfloat16 results are
// rounded once, as eager's are. Fusion puts the move in the GEMM's tiles.
void addmm(Recipe& r, const Arguments& args, std::string_view a, std::string_view b) {
  const View& out = args.result();
  const double beta = args.number("beta", 1.0);
  if (beta != 0) r.emit(Opcode::kMove, out, {r.operand(args.operand("self"), out.dtype, out.shape)});
  matmul(r, out, args.tensor(a), args.tensor(b), args.number("alpha", 1.0), beta);
}

View transposedLast(const View& view) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < view.rank(); ++d) dims.push_back(d);
  std::swap(dims[dims.size() - 1], dims[dims.size() - 2]);
  return permute(view, dims);
}

// Attention as one program: scores = scale * q @ k^T (masked), their row softmax, then
// @ v; also the rows' logsumexp, which the backward reads.
void attention(Recipe& r, const Arguments& args) {
  if (args.number("dropout_p", 0.0) != 0.0) throw NotApplicable("attention with dropout");
  const View q = args.tensor("query"), k = args.tensor("key"), v = args.tensor("value");
  const DType compute = widened(q.dtype);
  const double scale = args.number("scale", 1.0 / std::sqrt(static_cast<double>(q.shape.back())));
  std::vector<int64_t> shape(q.shape.begin(), q.shape.end() - 2);
  std::vector<int64_t> k_shape = shape;
  shape.push_back(q.shape[q.shape.size() - 2]);
  shape.push_back(k.shape[k.shape.size() - 2]);
  k_shape.push_back(k.shape.back());
  k_shape.push_back(k.shape[k.shape.size() - 2]);
  const Opcode where = atenInstruction("where").opcode, add = atenInstruction("add").opcode;
  View scores = r.temporary(q.dtype, shape);
  r.emit(Opcode::kMatmul, scores, {q, expand(transposedLast(k), k_shape)}, {scale, 0.0});
  scores = r.cast(scores, compute);
  const double minus_infinity = -std::numeric_limits<double>::infinity();
  if (args.flag("is_causal")) {
    const std::vector<int64_t> square(shape.end() - 2, shape.end());
    const View ones = r.emit(Opcode::kFill, r.temporary(DType::kBool, square), {}, {1.0});
    const View keep = r.emit(Opcode::kTril, r.temporary(DType::kBool, square), {ones}, {0.0});
    scores = r.emit(where, r.temporary(compute, shape),
                    {expand(keep, shape), scores, r.operand(minus_infinity, compute, shape)});
  }
  if (const std::optional<View> mask = args.optionalTensor("attn_mask")) {
    scores = mask->dtype == DType::kBool
                 ? r.emit(where, r.temporary(compute, shape),
                          {expand(*mask, shape), scores, r.operand(minus_infinity, compute, shape)})
                 : r.emit(add, r.temporary(compute, shape), {scores, r.operand(*mask, compute, shape)}, {1.0});
  }
  // A query every key is masked from attends to nothing: its weights are 0, as the CPU's
  // kernel gives them (torch.softmax's would be NaN).
  const View weights = r.emit(Opcode::kSoftmax, r.temporary(compute, shape), {scores}, {1.0});
  // The product goes straight into the result's layout (heads inside rows: the transpose
  // back to (batch, sequence, heads * head_dim) that follows is then a view).
  r.emit(Opcode::kMatmul, args.result(0), {r.cast(weights, q.dtype), r.cast(v, q.dtype)}, {1.0, 0.0});
  // The rows' logsumexp (read by the backward only: dead code in inference) as max +
  // log(sum(exp(score - max))): a masked column's -inf takes no part (a score minus its
  // log-softmax would be -inf - -inf where a sliding window masks that column).
  std::vector<int64_t> kept = shape;
  kept.back() = 1;
  const std::vector<int64_t> last{static_cast<int64_t>(shape.size()) - 1};
  const View row_max = r.temporary(compute, kept);
  r.emit(Opcode::kAmax, spread(row_max, shape, last), {scores});
  const View shifted = r.emit(atenInstruction("sub").opcode, r.temporary(compute, shape),
                              {scores, expand(row_max, shape)}, {1.0});
  const View exponentials = r.emit(atenInstruction("exp").opcode, r.temporary(compute, shape), {shifted});
  const View total = r.temporary(compute, kept);
  r.emit(Opcode::kSum, spread(total, shape, last), {exponentials}, {1.0});
  const View log_total = r.emit(atenInstruction("log").opcode, r.temporary(compute, kept), {total});
  const View logsumexp = r.emit(add, r.temporary(compute, kept), {log_total, row_max}, {1.0});
  // A masked row's maximum is -inf and its logsumexp NaN; the CPU's kernel saves 0 there,
  // which the backward's exp(score - logsumexp) turns into the row's zero weights.
  const View masked = r.emit(atenInstruction("eq").opcode, r.temporary(DType::kBool, kept),
                             {row_max, r.operand(minus_infinity, compute, kept)});
  r.emit(where, unsqueeze(args.result(1), -1), {masked, r.operand(0.0, compute, kept), logsumexp});
}

bool sameView(const View& a, const View& b) {
  return a.buffer == b.buffer && a.shape == b.shape && a.strides == b.strides && a.offset == b.offset;
}

int64_t axisOf(const View& x, int64_t dim) { return reducedDims(x, std::vector<int64_t>{dim}).front(); }

}  // namespace

void addProductRecipes(Table& table) {
  const RecipeFunction product = [](Recipe& r, const Arguments& args) {
    matmul(r, args.result(), args.tensor("self"), args.tensor("mat2"), 1.0, 0.0);
  };
  table["aten::mm"] = product;
  table["aten::bmm"] = product;
  table["aten::addmm"] = [](Recipe& r, const Arguments& args) { addmm(r, args, "mat1", "mat2"); };
  table["aten::baddbmm"] = [](Recipe& r, const Arguments& args) { addmm(r, args, "batch1", "batch2"); };
  table["aten::_scaled_dot_product_flash_attention_for_cpu"] = attention;

  // Rows of the table: a tgather along dim 0 with the indices repeated over a row.
  table["aten::embedding"] = [](Recipe& r, const Arguments& args) {
    const View weight = args.tensor("weight"), indices = args.tensor("indices");
    const std::vector<int64_t> column{indices.numel(), 1}, table_rows{indices.numel(), weight.shape.back()};
    const View rows = r.reshape(indices, column);
    const std::optional<View> into = viewAs(args.result(), table_rows);
    const View out = into ? *into : r.temporary(weight.dtype, table_rows);
    r.emit(Opcode::kGather, out, {weight, expand(r.cast(rows, DType::kInt64), table_rows)}, {0.0, 0.0});
    if (!into) r.emit(Opcode::kMove, args.result(), {*viewAs(out, args.result().shape)});
  };
  // torch.gather is tgather (cross entropy's pick of each target's score).
  table["aten::gather"] = [](Recipe& r, const Arguments& args) {
    const View x = args.tensor("self");
    if (x.rank() == 0) throw NotApplicable("a gather from a scalar");
    r.emit(Opcode::kGather, args.result(), {x, r.cast(args.tensor("index"), DType::kInt64)},
           {static_cast<double>(axisOf(x, args.integer("dim"))), 0.0});
  };
  // x moved into the result, then the source's elements written (scatter) or added
  // (scatter_add: an embedding's backward) where the index points (cross entropy's
  // backward): the source has the index's shape. A result that is x itself (an
  // in-place scatter) needs no move.
  const auto scatter = [](Opcode opcode) -> RecipeFunction {
    return [opcode](Recipe& r, const Arguments& args) {
      const View x = args.tensor("self"), index = args.tensor("index");
      if (x.rank() == 0) throw NotApplicable("a scatter into a scalar");
      const View& out = args.result();
      if (!sameView(out, x)) r.emit(Opcode::kMove, out, {x});
      Operand source = args.has("src") ? args.operand("src") : args.operand("value");
      if (View* view = std::get_if<View>(&source)) {
        view->shape = index.shape;
        view->strides.resize(index.shape.size());
      }
      r.emit(opcode, out, {r.operand(source, out.dtype, index.shape), r.cast(index, DType::kInt64)},
             {static_cast<double>(axisOf(x, args.integer("dim"))), 0.0});
    };
  };
  table["aten::scatter.value"] = scatter(Opcode::kScatter);
  table["aten::scatter.src"] = scatter(Opcode::kScatter);
  table["aten::scatter_add"] = scatter(Opcode::kScatterAdd);
}

}  // namespace pto::recipes
