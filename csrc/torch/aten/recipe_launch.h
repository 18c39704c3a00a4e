// Eager ops through their recipes (csrc/recipes): tensors bound to a recipe's
// buffers, its temporaries allocated on the device, its steps launched in order on
// the current stream, each a cached one-instruction program (instruction_launch.h).
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "recipes/recipe.h"

namespace pto::torch_glue {

// One call of an op's recipe: its arguments by schema name, then its results.
//   RecipeCall("aten::_softmax").tensor("self", x).integer("dim", 1).result(out).launch()
class RecipeCall {
 public:
  explicit RecipeCall(std::string op) : op_(std::move(op)) {}

  RecipeCall& tensor(std::string name, const at::Tensor& tensor);  // undefined: None
  RecipeCall& tensor(std::string name, const std::optional<at::Tensor>& tensor);
  RecipeCall& value(std::string name, recipes::Value value);
  RecipeCall& result(const at::Tensor& tensor);

  // Builds the recipe and launches its steps, once: the call's tensors go with the
  // launch. False, with nothing launched, where it does not apply (a dtype or layout
  // its instructions do not take).
  bool launch();

 private:
  recipes::View bind(const at::Tensor& tensor);

  std::string op_;
  std::vector<at::Tensor> buffers_;  // the caller's tensors, numbered as the recipe's buffers
  std::vector<std::pair<std::string, recipes::Value>> named_;
  std::vector<recipes::View> results_;
};

// The name recipes know aten operator Op by ("aten::_softmax", "aten::add.Tensor"),
// built once per operator rather than at every eager call.
template <class Op>
const std::string& atenName() {
  static const std::string name = [] {
    const std::string overload = Op::overload_name;
    return std::string(Op::name) + (overload.empty() ? "" : "." + overload);
  }();
  return name;
}

}  // namespace pto::torch_glue
