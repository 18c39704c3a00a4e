#include "recipe_launch.h"

#include <memory>
#include <unordered_map>
#include <variant>

#include "../dtype_map.h"
#include "instruction_launch.h"

namespace pto::torch_glue {
namespace {

// The elements a step's output view writes: its extents along the dimensions it does not
// repeat. A reduction's output is viewed at its input's shape with stride 0 along the
// reduced dimensions, so an empty input still writes the reduction of nothing (a sum's
// 0, a variance's NaN); only an output with no element of its own is skipped.
int64_t writtenElements(const recipes::View& out) {
  int64_t count = 1;
  for (size_t d = 0; d < out.shape.size(); ++d) {
    if (out.strides[d] != 0) count *= out.shape[d];
  }
  return count;
}

// The bytes a recipe is built from: op, caller buffer count, arguments and results.
// Views are the tensors' layouts, so the same op on tensors of the same layouts (the
// next step of a loop) finds the recipe built for the last.
class KeyWriter {
 public:
  explicit KeyWriter(const std::string& op, int32_t caller_buffers) : key_(op) { number(caller_buffers); }

  void view(const recipes::View& view) {
    number(view.buffer);
    number(static_cast<int64_t>(view.dtype));
    number(view.offset);
    numbers(view.shape);
    numbers(view.strides);
  }

  void value(const recipes::Value& value) {
    number(static_cast<int64_t>(value.index()));
    std::visit([this](const auto& held) { write(held); }, value);
  }

  void text(const std::string& text) {
    number(static_cast<int64_t>(text.size()));
    key_.append(text);
  }

  std::string take() { return std::move(key_); }

 private:
  void write(std::monostate) {}
  void write(const recipes::View& held) { view(held); }
  void write(const std::vector<recipes::View>& held) {
    number(static_cast<int64_t>(held.size()));
    for (const recipes::View& each : held) view(each);
  }
  void write(bool held) { number(held); }
  void write(int64_t held) { number(held); }
  void write(double held) { key_.append(reinterpret_cast<const char*>(&held), sizeof held); }  // by its bits
  void write(const std::string& held) { text(held); }
  void write(const std::vector<int64_t>& held) { numbers(held); }

  void number(int64_t value) { key_.append(reinterpret_cast<const char*>(&value), sizeof value); }
  void numbers(const std::vector<int64_t>& values) {
    number(static_cast<int64_t>(values.size()));
    key_.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t));
  }

  std::string key_;
};

// Recipes built on this thread, by KeyWriter's key; null where the recipe does not apply.
// A recipe depends on its arguments alone (csrc/recipes depends on isa only), and
// building one costs an eager call more than its launches (7.6k instructions of sum's
// 16k on a 16x16 tensor). Emptied when full: a loop's recipes are soon built again.
using BuiltRecipe = std::shared_ptr<const recipes::Recipe>;
constexpr size_t kBuiltRecipes = 4096;

BuiltRecipe builtRecipe(const std::string& op, const std::vector<std::pair<std::string, recipes::Value>>& named,
                        const std::vector<recipes::View>& results, int32_t caller_buffers) {
  KeyWriter writer(op, caller_buffers);
  for (const auto& [name, value] : named) {
    writer.text(name);
    writer.value(value);
  }
  for (const recipes::View& result : results) writer.view(result);
  std::string key = writer.take();
  thread_local std::unordered_map<std::string, BuiltRecipe> built;
  if (auto hit = built.find(key); hit != built.end()) return hit->second;
  BuiltRecipe recipe;
  try {
    recipe = std::make_shared<const recipes::Recipe>(recipes::build(op, recipes::Arguments(named, results), caller_buffers));
  } catch (const recipes::NotApplicable&) {
    recipe = nullptr;
  }
  if (built.size() >= kBuiltRecipes) built.clear();
  built.emplace(std::move(key), recipe);
  return recipe;
}

}  // namespace

recipes::View RecipeCall::bind(const at::Tensor& tensor) {
  const std::optional<isa::DType> dtype = ptoDType(tensor.scalar_type());
  TORCH_CHECK(dtype, op_, ": dtype ", tensor.scalar_type(), " has no PTO equivalent");
  recipes::View view;
  view.buffer = static_cast<int32_t>(buffers_.size());
  view.dtype = *dtype;
  view.shape = tensor.sizes().vec();
  view.strides = tensor.strides().vec();
  view.offset = tensor.storage_offset();
  buffers_.push_back(tensor);
  return view;
}

RecipeCall& RecipeCall::tensor(std::string name, const at::Tensor& tensor) {
  named_.emplace_back(std::move(name), tensor.defined() ? recipes::Value{bind(tensor)} : recipes::Value{});
  return *this;
}

RecipeCall& RecipeCall::tensor(std::string name, const std::optional<at::Tensor>& tensor) {
  return this->tensor(std::move(name), tensor.value_or(at::Tensor()));
}

RecipeCall& RecipeCall::value(std::string name, recipes::Value value) {
  named_.emplace_back(std::move(name), std::move(value));
  return *this;
}

RecipeCall& RecipeCall::result(const at::Tensor& tensor) {
  results_.push_back(bind(tensor));
  return *this;
}

bool RecipeCall::launch() {
  const BuiltRecipe recipe = builtRecipe(op_, named_, results_, static_cast<int32_t>(buffers_.size()));
  if (recipe == nullptr) return false;
  // The call's tensors move into the launch, not copied: a copy of a tensor Python
  // alone holds takes the GIL (instruction_launch.h).
  std::vector<at::Tensor> buffers = std::move(buffers_);
  const at::TensorOptions options = buffers.front().options();
  for (const recipes::Temporary& temporary : recipe->temporaries()) {
    int64_t numel = 1;
    for (int64_t n : temporary.shape) numel *= n;
    buffers.push_back(at::empty({numel}, options.dtype(torchDType(temporary.dtype))));
  }
  for (const recipes::Step& step : recipe->steps()) {
    if (writtenElements(step.operands.front()) == 0) continue;
    launchViews(step.opcode, buffers, step.operands, step.immediates);
  }
  return true;
}

}  // namespace pto::torch_glue
