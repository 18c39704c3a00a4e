// The aten -> PTO table (aten_instructions.def) as C++ data: the one-instruction
// recipes. The eager registrations (csrc/torch/aten) expand the .def itself, the
// recipe table (recipe_table.cpp) gives each row's lowered overloads a recipe, and
// hand-written code looks a row up by name, at compile time.
#pragma once

#include <string_view>

#include "isa/instructions.h"

namespace pto::recipes {

// How an op's result dtype follows from its inputs'.
enum class Promotion {
  kCommon,        // torch's result_type of the inputs
  kIntToFloat,    // ... with integers and bool promoted to the default float dtype
  kCompare,       // computed in the common dtype, a bool result
  kSame,          // the inputs' one dtype: torch refuses two (the CPU fallback raises its error)
};

// "common", "int_to_float", "compare".
constexpr std::string_view promotionName(Promotion promotion) {
  switch (promotion) {
    case Promotion::kCommon: return "common";
    case Promotion::kIntToFloat: return "int_to_float";
    case Promotion::kCompare: return "compare";
    case Promotion::kSame: return "same";
  }
  return "common";
}

struct AtenInstruction {
  std::string_view op;        // the aten op, without overload
  std::string_view form;      // as the .def spells it: "Unary", "Binary" ...; "Custom" for a variant
  std::string_view argument;  // a variant row's selecting argument ("approximate"); "" otherwise
  std::string_view value;     // ... and its value ("tanh")
  isa::Opcode opcode;
  Promotion promotion;
};

inline constexpr AtenInstruction kAtenInstructions[] = {
#define PTO_ATEN(op, form, instruction, promotion) \
  {#op, #form, "", "", isa::Opcode::instruction, Promotion::promotion},
#define PTO_ATEN_VARIANT(op, argument, value, instruction, promotion) \
  {#op, "Custom", #argument, #value, isa::Opcode::instruction, Promotion::promotion},
#include "aten_instructions.def"
#undef PTO_ATEN_VARIANT
#undef PTO_ATEN
};

// The row of `op`, or of its variant whose argument has `value`. An op missing from
// the table does not compile.
consteval const AtenInstruction& atenInstruction(std::string_view op, std::string_view value = "") {
  for (const AtenInstruction& row : kAtenInstructions) {
    if (row.op == op && row.value == value) return row;
  }
  throw "no such row in aten_instructions.def";
}

// hardshrink's lambd, and the shrinks' gradients', as the CPU's kernels take it for
// `dtype`: rounded to bfloat16 for bfloat16 (the kernels convert it to the element
// type), else as given (float16's kernels compare in float32).
double hardshrinkLambd(isa::DType dtype, double lambd);

}  // namespace pto::recipes
