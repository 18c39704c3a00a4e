// Elementwise recipes: each row of aten_instructions.def as its one instruction over
// operands cast to the compute dtype and broadcast to the result's shape, and the
// ops that are one instruction with an immediate, a variant or a few more steps.
#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "aten_instructions.h"
#include "families.h"

namespace pto::recipes {
namespace {

using isa::DType;
using isa::Opcode;

// The overloads each form lowers as its row's one instruction (a .Scalar overload is its
// .Tensor one with a wrapped number, as aten computes it). The other forms
// (BinaryAlpha, Custom) have recipes of their own, below.
std::vector<std::string> loweredOverloads(std::string_view form) {
  if (form == "Unary" || form == "UnaryNoOut" || form == "BinaryDefault" || form == "BinaryDefaultInplace" ||
      form == "Gradient") {
    return {""};
  }
  if (form == "Binary" || form == "BinaryTensorOut" || form == "Compare") return {".Tensor", ".Scalar"};
  if (form == "BinaryOutTensor") return {".Tensor", ".Scalar_Other"};
  return {};
}

// A comparison computes in the inputs' common dtype (torch.result_type, which the
// caller passes as "common_dtype"); every other row in its result's.
DType computeDType(const Arguments& args, Promotion promotion) {
  if (promotion != Promotion::kCompare) return args.result().dtype;
  const std::optional<std::string> common = args.text("common_dtype");
  const std::optional<DType> dtype = common ? isa::parseDType(*common) : std::nullopt;
  if (!dtype) throw NotApplicable("a comparison whose operands' common dtype PTO lacks");
  return *dtype;
}

// `opcode` over the operands, each cast to `dtype` and broadcast to the result.
void elementwise(Recipe& r, const Arguments& args, Opcode opcode, DType dtype,
                 std::array<double, isa::kMaxImmediates> immediates = {}) {
  const View& out = args.result();
  std::vector<View> inputs;
  for (const Operand& operand : args.operands()) inputs.push_back(r.operand(operand, dtype, out.shape));
  r.emit(opcode, out, inputs, immediates);
}

void addSubtract(Recipe& r, const Arguments& args, Opcode opcode, bool reversed) {
  const View& out = args.result();
  if (out.dtype == DType::kBool) throw NotApplicable("boolean add");
  const View self = r.operand(args.operand("self"), out.dtype, out.shape);
  const View other = r.operand(args.operand("other"), out.dtype, out.shape);
  r.emit(opcode, out, reversed ? std::vector{other, self} : std::vector{self, other}, {args.number("alpha", 1.0)});
}

// `value` as a bfloat16 holds it: float32's bits rounded to their upper half, to
// nearest even, as c10::BFloat16 converts a number.
double roundedToBFloat16(double value) {
  const auto bits = std::bit_cast<uint32_t>(static_cast<float>(value));
  return std::bit_cast<float>((bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u);
}

// `opcode` of self, cast to the result's dtype and broadcast to its shape, the op's
// numbers its immediates (leaky_relu's slope, elu's alpha, scale and input_scale ...).
void unaryWithNumbers(Recipe& r, const Arguments& args, Opcode opcode, std::array<double, isa::kMaxImmediates> immediates) {
  const View& out = args.result();
  r.emit(opcode, out, {r.operand(args.operand("self"), out.dtype, out.shape)}, immediates);
}

// An activation's gradient instruction of (grad_output, self), with `immediates`;
// `grad` and `input` name the operands as the op's schema does (hardshrink's gradient
// is grad_out, elu's input self_or_result).
void gradient(Recipe& r, const Arguments& args, Opcode opcode, std::array<double, isa::kMaxImmediates> immediates = {},
              const char* grad = "grad_output", const char* input = "self") {
  const View& out = args.result();
  r.emit(opcode, out,
         {r.operand(args.operand(grad), out.dtype, out.shape), r.operand(args.operand(input), out.dtype, out.shape)},
         immediates);
}

}  // namespace

double hardshrinkLambd(DType dtype, double lambd) {
  return dtype == DType::kBFloat16 ? roundedToBFloat16(lambd) : lambd;
}

namespace {

// x ** exponent with the steps PyTorch's CPU kernel takes (pow_Tensor_Scalar_out and
// pow_tensor_scalar_kernel), which give its bits and cost a product, not a pow: 0 and 1
// a fill and a copy for every dtype; float32, float64 and bfloat16 take 0.5, -0.5 and -1
// as sqrt, rsqrt and reciprocal, and 2, 3 and -2 (bfloat16's exponent rounded to
// bfloat16 first, as the kernel converts it) as products, each step rounded to the
// dtype; integers 2 and 3 as products too, which wrap as its repeated squaring does.
// float16 takes the general pow for every other exponent, as there.
void powScalar(Recipe& r, const Arguments& args) {
  const View& out = args.result();
  const double exponent = args.number("exponent");
  if (exponent == 0) {
    r.emit(Opcode::kFill, out, {}, {1.0});
    return;
  }
  const View x = r.operand(args.operand("self"), out.dtype, out.shape);
  const Opcode multiply = atenInstruction("mul").opcode;
  const bool floating =
      out.dtype == DType::kFloat32 || out.dtype == DType::kFloat64 || out.dtype == DType::kBFloat16;
  const double power = out.dtype == DType::kBFloat16 ? roundedToBFloat16(exponent) : exponent;
  if (exponent == 1) {
    r.emit(Opcode::kMove, out, {x});
  } else if (floating && exponent == 0.5) {
    r.emit(atenInstruction("sqrt").opcode, out, {x});
  } else if (floating && exponent == -0.5) {
    r.emit(atenInstruction("rsqrt").opcode, out, {x});
  } else if (floating && exponent == -1) {
    r.emit(atenInstruction("reciprocal").opcode, out, {x});
  } else if ((floating || isa::isIntegral(out.dtype)) && power == 2) {
    r.emit(multiply, out, {x, x});
  } else if ((floating || isa::isIntegral(out.dtype)) && power == 3) {
    r.emit(multiply, out, {r.emit(multiply, r.temporary(out.dtype, out.shape), {x, x}), x});
  } else if (floating && power == -2) {
    r.emit(atenInstruction("reciprocal").opcode, out, {r.emit(multiply, r.temporary(out.dtype, out.shape), {x, x})});
  } else {
    r.emit(atenInstruction("pow").opcode, out, {x, r.operand(exponent, out.dtype, out.shape)});
  }
}

// clamp in one pass: tclamp between two bounds, maximum's or minimum's instruction
// against one (each propagates a NaN bound, as the CPU's clamp does).
void clamp(Recipe& r, const Arguments& args) {
  const View& out = args.result();
  const View value = r.operand(args.operand("self"), out.dtype, out.shape);
  const bool low = args.has("min"), high = args.has("max");
  auto bound = [&](std::string_view name) { return r.operand(args.operand(name), out.dtype, out.shape); };
  if (low && high) {
    r.emit(atenInstruction("clamp").opcode, out, {value, bound("min"), bound("max")});
  } else if (low) {
    r.emit(atenInstruction("maximum").opcode, out, {value, bound("min")});
  } else if (high) {
    r.emit(atenInstruction("minimum").opcode, out, {value, bound("max")});
  } else {
    r.emit(Opcode::kMove, out, {value});
  }
}

// The largest finite value of a floating dtype: nan_to_num's default for an infinity.
double largestFinite(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return 65504.0;
    case DType::kBFloat16: return 3.3895313892515355e38;
    case DType::kFloat32: return std::numeric_limits<float>::max();
    case DType::kFloat64: return std::numeric_limits<double>::max();
    default: throw NotApplicable("nan_to_num of a dtype without infinities (the CPU's copy)");
  }
}

void where(Recipe& r, const Arguments& args, std::string_view condition, std::string_view taken,
           std::string_view otherwise) {
  const View& out = args.result();
  r.emit(atenInstruction("where").opcode, out,
         {r.operand(args.operand(condition), DType::kBool, out.shape), r.operand(args.operand(taken), out.dtype, out.shape),
          r.operand(args.operand(otherwise), out.dtype, out.shape)});
}

bool tanhApproximation(const Arguments& args) { return args.text("approximate") == "tanh"; }

}  // namespace

void addElementwiseRecipes(Table& table) {
  for (const AtenInstruction& row : kAtenInstructions) {
    for (const std::string& overload : loweredOverloads(row.form)) {
      table["aten::" + std::string(row.op) + overload] = [row](Recipe& r, const Arguments& args) {
        elementwise(r, args, row.opcode, computeDType(args, row.promotion));
      };
    }
  }
  for (const char* overload : {".Tensor", ".Scalar"}) {
    table[std::string("aten::add") + overload] = [](Recipe& r, const Arguments& args) {
      addSubtract(r, args, atenInstruction("add").opcode, false);
    };
    table[std::string("aten::sub") + overload] = [](Recipe& r, const Arguments& args) {
      addSubtract(r, args, atenInstruction("sub").opcode, false);
    };
    table[std::string("aten::rsub") + overload] = [](Recipe& r, const Arguments& args) {
      addSubtract(r, args, atenInstruction("sub").opcode, true);
    };
  }
  table["aten::div.Tensor_mode"] = [](Recipe& r, const Arguments& args) {
    const std::optional<std::string> mode = args.text("rounding_mode");
    const Opcode opcode = mode == "trunc"   ? atenInstruction("div", "trunc").opcode
                          : mode == "floor" ? atenInstruction("div", "floor").opcode
                                            : atenInstruction("div").opcode;
    elementwise(r, args, opcode, args.result().dtype);
  };
  table["aten::pow.Tensor_Tensor"] = [](Recipe& r, const Arguments& args) {
    elementwise(r, args, atenInstruction("pow").opcode, args.result().dtype);
  };
  table["aten::pow.Tensor_Scalar"] = powScalar;
  // Their numbers are immediates, not operands.
  table["aten::lerp.Scalar"] = [](Recipe& r, const Arguments& args) {
    const View& out = args.result();
    r.emit(atenInstruction("lerp").opcode, out,
           {r.operand(args.operand("self"), out.dtype, out.shape), r.operand(args.operand("end"), out.dtype, out.shape)},
           {args.number("weight")});
  };
  // A weight per element: tlerpw, the eager kernel's instruction (kept whole, the graph's
  // lerp gives eager's bits rather than its decomposition's roundings).
  table["aten::lerp.Tensor"] = [](Recipe& r, const Arguments& args) {
    const View& out = args.result();
    r.emit(Opcode::kLerpWeights, out,
           {r.operand(args.operand("self"), out.dtype, out.shape), r.operand(args.operand("end"), out.dtype, out.shape),
            r.operand(args.operand("weight"), out.dtype, out.shape)});
  };
  table["aten::leaky_relu"] = [](Recipe& r, const Arguments& args) {
    unaryWithNumbers(r, args, atenInstruction("leaky_relu").opcode, {args.number("negative_slope", 0.01)});
  };
  table["aten::elu"] = [](Recipe& r, const Arguments& args) {
    unaryWithNumbers(r, args, atenInstruction("elu").opcode,
                     {args.number("alpha", 1.0), args.number("scale", 1.0), args.number("input_scale", 1.0)});
  };
  table["aten::softplus"] = [](Recipe& r, const Arguments& args) {
    unaryWithNumbers(r, args, atenInstruction("softplus").opcode,
                     {args.number("beta", 1.0), args.number("threshold", 20.0)});
  };
  table["aten::hardshrink"] = [](Recipe& r, const Arguments& args) {
    unaryWithNumbers(r, args, atenInstruction("hardshrink").opcode,
                     {hardshrinkLambd(args.result().dtype, args.number("lambd", 0.5))});
  };
  table["aten::softshrink"] = [](Recipe& r, const Arguments& args) {
    unaryWithNumbers(r, args, atenInstruction("softshrink").opcode, {args.number("lambd", 0.5)});
  };
  table["aten::threshold"] = [](Recipe& r, const Arguments& args) {
    unaryWithNumbers(r, args, atenInstruction("threshold").opcode, {args.number("threshold"), args.number("value")});
  };
  // The output, and where the graph holds one (the meta kernel's, as the CPU's) the
  // buffer exp(-|x|) that torch's decomposition of the backward then reads.
  table["aten::log_sigmoid_forward"] = [](Recipe& r, const Arguments& args) {
    const View& out = args.result(0);
    const View self = r.operand(args.operand("self"), out.dtype, out.shape);
    r.emit(atenInstruction("log_sigmoid_forward").opcode, out, {self});
    if (args.resultCount() < 2 || args.result(1).numel() == 0) return;
    const View& buffer = args.result(1);
    const View magnitude = r.emit(atenInstruction("abs").opcode, r.temporary(out.dtype, out.shape), {self});
    const View negated = r.emit(atenInstruction("neg").opcode, r.temporary(out.dtype, out.shape), {magnitude});
    r.emit(atenInstruction("exp").opcode, buffer, {negated});
  };
  table["aten::nan_to_num"] = [](Recipe& r, const Arguments& args) {
    const double largest = largestFinite(args.result().dtype);
    unaryWithNumbers(r, args, atenInstruction("nan_to_num").opcode,
                     {args.number("nan", 0.0), args.number("posinf", largest), args.number("neginf", -largest)});
  };
  // The logical ops are the bitwise ones on truth values: their bool result casts the
  // operands to bool first, as the eager composites compute them.
  table["aten::logical_and"] = [](Recipe& r, const Arguments& args) {
    elementwise(r, args, atenInstruction("bitwise_and").opcode, args.result().dtype);
  };
  table["aten::logical_or"] = [](Recipe& r, const Arguments& args) {
    elementwise(r, args, atenInstruction("bitwise_or").opcode, args.result().dtype);
  };
  table["aten::logical_not"] = [](Recipe& r, const Arguments& args) {
    const View x = args.tensor("self");
    r.emit(atenInstruction("eq").opcode, args.result(), {x, r.operand(0.0, x.dtype, x.shape)});
  };
  for (const char* name : {"aten::where.self", "aten::where.ScalarOther", "aten::where.ScalarSelf", "aten::where.Scalar"}) {
    table[name] = [](Recipe& r, const Arguments& args) { where(r, args, "condition", "self", "other"); };
  }
  table["aten::masked_fill.Scalar"] = [](Recipe& r, const Arguments& args) { where(r, args, "mask", "value", "self"); };
  table["aten::masked_fill.Tensor"] = table["aten::masked_fill.Scalar"];
  table["aten::clamp"] = clamp;
  table["aten::clamp.Tensor"] = clamp;
  table["aten::gelu"] = [](Recipe& r, const Arguments& args) {
    const Opcode opcode = tanhApproximation(args) ? atenInstruction("gelu", "tanh").opcode : atenInstruction("gelu").opcode;
    r.emit(opcode, args.result(), {args.tensor("self")});
  };
  table["aten::gelu_backward"] = [](Recipe& r, const Arguments& args) {
    const Opcode opcode = tanhApproximation(args) ? atenInstruction("gelu_backward", "tanh").opcode
                                                  : atenInstruction("gelu_backward").opcode;
    const View x = args.tensor("self");
    r.emit(opcode, args.result(), {expand(args.tensor("grad_output"), x.shape), x});
  };
  // self + value * tensor1 (* or /) tensor2 in one pass, in the result's dtype.
  for (const char* op : {"addcmul", "addcdiv"}) {
    const Opcode opcode = std::string_view(op) == "addcmul" ? atenInstruction("addcmul").opcode
                                                            : atenInstruction("addcdiv").opcode;
    table["aten::" + std::string(op)] = [opcode](Recipe& r, const Arguments& args) {
      const View& out = args.result();
      r.emit(opcode, out,
             {r.operand(args.operand("self"), out.dtype, out.shape), r.operand(args.operand("tensor1"), out.dtype, out.shape),
              r.operand(args.operand("tensor2"), out.dtype, out.shape)},
             {args.number("value", 1.0)});
    };
  }
  // grad where x > threshold, else 0: the threshold is the instruction's immediate.
  table["aten::threshold_backward"] = [](Recipe& r, const Arguments& args) {
    const View& out = args.result();
    r.emit(atenInstruction("threshold_backward").opcode, out,
           {expand(args.tensor("grad_output"), out.shape), expand(args.tensor("self"), out.shape)},
           {args.number("threshold")});
  };
  table["aten::hardswish_backward"] = [](Recipe& r, const Arguments& args) {
    gradient(r, args, atenInstruction("hardswish_backward").opcode);
  };
  table["aten::leaky_relu_backward"] = [](Recipe& r, const Arguments& args) {
    if (args.flag("self_is_result") && args.number("negative_slope") < 0) {
      throw NotApplicable("the in-place form's gradient with a negative slope (the CPU's error)");
    }
    gradient(r, args, atenInstruction("leaky_relu_backward").opcode, {args.number("negative_slope")});
  };
  // Both shrinks' gradients are one instruction; hardshrink's schema names its gradient grad_out.
  const auto shrink_gradient = [](const char* grad) {
    return [grad](Recipe& r, const Arguments& args) {
      gradient(r, args, atenInstruction("hardshrink_backward").opcode,
               {hardshrinkLambd(args.result().dtype, args.number("lambd"))}, grad);
    };
  };
  table["aten::hardshrink_backward"] = shrink_gradient("grad_out");
  table["aten::softshrink_backward"] = shrink_gradient("grad_output");
  table["aten::log_sigmoid_backward"] = [](Recipe& r, const Arguments& args) {
    gradient(r, args, atenInstruction("log_sigmoid_backward").opcode);
  };
  table["aten::elu_backward"] = [](Recipe& r, const Arguments& args) {
    const bool is_result = args.flag("is_result");
    if (is_result && args.number("alpha") < 0) {
      throw NotApplicable("the in-place form's gradient with a negative alpha (the CPU's error)");
    }
    gradient(r, args, atenInstruction("elu_backward").opcode,
             {args.number("alpha"), args.number("scale"), args.number("input_scale"), is_result ? 1.0 : 0.0},
             "grad_output", "self_or_result");
  };
  table["aten::mish_backward"] = [](Recipe& r, const Arguments& args) {
    gradient(r, args, atenInstruction("mish_backward").opcode);
  };
  table["aten::softplus_backward"] = [](Recipe& r, const Arguments& args) {
    gradient(r, args, atenInstruction("softplus_backward").opcode, {args.number("beta"), args.number("threshold")});
  };
  table["aten::hardtanh_backward"] = [](Recipe& r, const Arguments& args) {
    gradient(r, args, atenInstruction("hardtanh_backward").opcode, {args.number("min_val"), args.number("max_val")});
  };
}

}  // namespace pto::recipes
