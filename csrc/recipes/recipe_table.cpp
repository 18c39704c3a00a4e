// The table of every recipe, by aten op name: the families fill it once.
#include "families.h"

namespace pto::recipes {
namespace {

const Table& table() {
  static const Table recipes = [] {
    Table t;
    addElementwiseRecipes(t);
    addCopyRecipes(t);
    addReductionRecipes(t);
    addRowRecipes(t);
    addProductRecipes(t);
    addConvolutionRecipes(t);
    addTransformerRecipes(t);
    return t;
  }();
  return recipes;
}

}  // namespace

const RecipeFunction* find(std::string_view name) {
  const auto found = table().find(name);
  return found == table().end() ? nullptr : &found->second;
}

std::vector<std::string> names() {
  std::vector<std::string> all;
  for (const auto& [name, recipe] : table()) all.push_back(name);
  return all;
}

}  // namespace pto::recipes
