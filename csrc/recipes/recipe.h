// Recipes: what an aten op becomes in PTO — the instructions, temporaries and
// immediates — given its operands' views. One op, one recipe: the eager kernels
// (csrc/torch/aten) bind tensors to it and launch its steps; the compiler's lowering
// (pypto_torch/compile/lowering.py) reads the same steps through the bindings
// (_C._recipe) and emits them into its program. Depends on isa only.
//
// A recipe works on Views: strided windows (in elements) of numbered buffers.
// Buffers 0..n-1 are the caller's (the op's tensor arguments and its results, which
// the caller allocates with the layout torch gives them); the recipe adds
// temporaries (contiguous, one per new value) after them.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "isa/instructions.h"

namespace pto::recipes {

struct View {
  int32_t buffer = 0;
  isa::DType dtype = isa::DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements; 0 repeats (broadcast)
  int64_t offset = 0;            // in elements, from the buffer's start

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const;
  bool contiguous() const;  // row-major over its shape (dims of extent 1 may have any stride)
};

// Row-major strides of `shape`.
std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& shape);

// The recipe does not apply to these operands (a dtype its instructions do not take,
// a layout they cannot express): the caller runs the op another way (the eager
// kernel its composite or the CPU, the compiler an eager call between programs).
struct NotApplicable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An argument of the aten op, as its schema names it. Numbers arrive as double or
// int64 (aten's Scalar, int, SymInt), dtypes as PTO dtype names.
using Value = std::variant<std::monostate, View, std::vector<View>, bool, int64_t, double, std::string,
                           std::vector<int64_t>>;

// A tensor operand or a Python number standing for one (add.Scalar's other).
using Operand = std::variant<View, double>;

class Arguments {
 public:
  Arguments() = default;
  Arguments(std::vector<std::pair<std::string, Value>> named, std::vector<View> results)
      : named_(std::move(named)), results_(std::move(results)) {}

  bool has(std::string_view name) const;  // present and not None
  const Value& operator[](std::string_view name) const;  // None where absent
  View tensor(std::string_view name) const;
  std::optional<View> optionalTensor(std::string_view name) const;
  std::vector<View> tensors(std::string_view name) const;
  Operand operand(std::string_view name) const;  // a tensor or a number
  double number(std::string_view name, std::optional<double> absent = std::nullopt) const;
  int64_t integer(std::string_view name, std::optional<int64_t> absent = std::nullopt) const;
  bool flag(std::string_view name, bool absent = false) const;
  std::optional<std::vector<int64_t>> dims(std::string_view name) const;  // an int or a list; None
  std::optional<std::string> text(std::string_view name) const;
  // The tensor and number arguments in schema order: an elementwise op's operands.
  std::vector<Operand> operands() const;

  const View& result(size_t index = 0) const;
  size_t resultCount() const { return results_.size(); }

 private:
  std::vector<std::pair<std::string, Value>> named_;
  std::vector<View> results_;
};

// One instruction of a recipe. A constant step fills a one-element temporary with
// its value once; a compiled program hoists it to its start and shares it.
struct Step {
  isa::Opcode opcode = isa::Opcode::kMove;
  std::vector<View> operands;  // the output first, then the inputs
  std::array<double, isa::kMaxImmediates> immediates{};
  bool constant = false;
};

struct Temporary {
  isa::DType dtype;
  std::vector<int64_t> shape;
};

// The steps of one recipe, built in order, and the temporaries they use.
class Recipe {
 public:
  explicit Recipe(int32_t caller_buffers) : caller_buffers_(caller_buffers) {}

  // A new contiguous buffer of `dtype` and `shape`.
  View temporary(isa::DType dtype, std::vector<int64_t> shape);
  // Appends `opcode` writing `out` from `inputs`; throws NotApplicable when the
  // instruction does not take the inputs' dtype (a fill's: the output's). Returns out.
  View emit(isa::Opcode opcode, const View& out, const std::vector<View>& inputs,
            std::array<double, isa::kMaxImmediates> immediates = {});
  // A one-element buffer holding `value` of `dtype` (a constant step).
  View scalar(double value, isa::DType dtype);
  // `view` converted to `dtype` (tcvt into a temporary), or itself.
  View cast(const View& view, isa::DType dtype);
  // `view` row-major (tmov into a temporary), or itself.
  View contiguous(const View& view);
  // `view` at `shape`, as aten's reshape: a view where the strides allow it, else a
  // row-major copy viewed so.
  View reshape(const View& view, const std::vector<int64_t>& shape);
  // A tensor or number as an input of `dtype` broadcast to `shape`.
  View operand(const Operand& operand, isa::DType dtype, const std::vector<int64_t>& shape);
  // dst <- src: tmov, or tcvt where the dtypes differ.
  View copy(const View& dst, const View& src);
  // Where a value of `dtype` meant for `result` is computed: the result itself, or a
  // temporary of its shape that settle() then converts into it.
  View resultIn(const View& result, isa::DType dtype);
  void settle(const View& result, const View& computed);

  const std::vector<Step>& steps() const { return steps_; }
  const std::vector<Temporary>& temporaries() const { return temporaries_; }
  int32_t callerBuffers() const { return caller_buffers_; }

 private:
  int32_t caller_buffers_;
  std::vector<Temporary> temporaries_;
  std::vector<Step> steps_;
};

// float16 and bfloat16 compositions compute in float32 and round once at the end, as
// PyTorch's CPU kernels do; other dtypes compute as they are.
isa::DType widened(isa::DType dtype);

// -- views: strides only, no instruction ---------------------------------------------
View expand(const View& view, const std::vector<int64_t>& shape);         // broadcast, as aten's
View permute(const View& view, const std::vector<int64_t>& dims);
View moveLast(const View& view, int64_t dim);                              // a row op's row last
View unsqueeze(const View& view, int64_t dim);
View sliced(const View& view, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
// `view` at `shape` without moving data (aten's view rule), or nothing.
std::optional<View> viewAs(const View& view, const std::vector<int64_t>& shape);
// `dims` (None or empty: all) wrapped and sorted, without repeats.
std::vector<int64_t> reducedDims(const View& view, const std::optional<std::vector<int64_t>>& dims);
// A reduction's output seen at the input's shape: `kept` (the result, with or without
// the reduced dims) with stride 0 along them (the ISA's rule).
View spread(const View& kept, const std::vector<int64_t>& input_shape, const std::vector<int64_t>& dims);

// -- the table ---------------------------------------------------------------------------
using RecipeFunction = std::function<void(Recipe&, const Arguments&)>;

// The recipe of aten op `name` ("aten::native_layer_norm", "aten::add.Tensor": the
// overload as torch's OpOverload names it, ".default" left out), or nullptr.
const RecipeFunction* find(std::string_view name);
// Every op with a recipe, for the compiler's table and its decompositions.
std::vector<std::string> names();

// Runs the recipe of `name` over caller buffers numbered by `arguments` (and its
// results); throws NotApplicable, or std::invalid_argument for an op with none.
Recipe build(std::string_view name, const Arguments& arguments, int32_t caller_buffers);

}  // namespace pto::recipes
