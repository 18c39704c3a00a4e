// The recipe families, each filling its part of the table (recipe_table.cpp).
// Internal to csrc/recipes: callers use recipe.h.
#pragma once

#include <map>
#include <string>

#include "recipe.h"

namespace pto::recipes {

using Table = std::map<std::string, RecipeFunction, std::less<>>;

void addElementwiseRecipes(Table& table);  // elementwise.cpp: the aten_instructions.def rows and their kin
void addCopyRecipes(Table& table);         // copies.cpp: moves, casts, fills, concatenation, padding
void addReductionRecipes(Table& table);    // reductions.cpp: sums, means, extremes, variances
void addRowRecipes(Table& table);          // rows.cpp: softmax and the normalisations
void addConvolutionRecipes(Table& table);  // convolutions.cpp: convolutions and their gradients
void addProductRecipes(Table& table);      // products.cpp: matrix products, attention, gathers, scatters
void addTransformerRecipes(Table& table);  // transformers.cpp: the attention and encoder layer fast paths

}  // namespace pto::recipes
