#include "recipe_launch.h"

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
  const auto caller_buffers = static_cast<int32_t>(buffers_.size());
  std::optional<recipes::Recipe> recipe;
  try {
    recipe.emplace(recipes::build(op_, recipes::Arguments(named_, results_), caller_buffers));
  } catch (const recipes::NotApplicable&) {
    return false;
  }
  const at::TensorOptions options = buffers_.front().options();
  std::vector<at::Tensor> buffers = buffers_;
  for (const recipes::Temporary& temporary : recipe->temporaries()) {
    int64_t numel = 1;
    for (int64_t n : temporary.shape) numel *= n;
    buffers.push_back(at::empty({numel}, options.dtype(torchDType(temporary.dtype))));
  }
  std::vector<at::Tensor> operands;
  for (const recipes::Step& step : recipe->steps()) {
    if (writtenElements(step.operands.front()) == 0) continue;
    operands.clear();
    for (const recipes::View& view : step.operands) {
      operands.push_back(buffers[static_cast<size_t>(view.buffer)].as_strided(view.shape, view.strides, view.offset));
    }
    launchInstruction(step.opcode, operands, step.immediates);
  }
  return true;
}

}  // namespace pto::torch_glue
