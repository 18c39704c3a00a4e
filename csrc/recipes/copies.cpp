// Copy recipes: moves and casts into the result, fills, ranges, concatenation, the
// scatter of a slice and constant padding.
#include <string>
#include <vector>

#include "families.h"

namespace pto::recipes {
namespace {

using isa::Opcode;

void fill(Recipe& r, const Arguments& args, double value) { r.emit(Opcode::kFill, args.result(), {}, {value}); }

}  // namespace

void addCopyRecipes(Table& table) {
  const RecipeFunction move = [](Recipe& r, const Arguments& args) {
    r.emit(Opcode::kMove, args.result(), {args.tensor("self")});
  };
  table["aten::clone"] = move;
  table["aten::lift_fresh_copy"] = move;
  table["aten::_to_copy"] = [](Recipe& r, const Arguments& args) { r.copy(args.result(), args.tensor("self")); };
  // copy(self, src) and copy_(self, src): src broadcast to self, converted to its dtype
  // (copy_'s result is self itself).
  const RecipeFunction copy = [](Recipe& r, const Arguments& args) {
    const View& out = args.result();
    const View src = args.tensor("src");
    r.copy(out, r.operand(src, src.dtype, out.shape));
  };
  table["aten::copy"] = copy;
  table["aten::copy_"] = copy;

  for (const char* name : {"aten::zeros", "aten::new_zeros", "aten::zeros_like"}) {
    table[name] = [](Recipe& r, const Arguments& args) { fill(r, args, 0); };
  }
  for (const char* name : {"aten::ones", "aten::new_ones", "aten::ones_like"}) {
    table[name] = [](Recipe& r, const Arguments& args) { fill(r, args, 1); };
  }
  for (const char* name : {"aten::full", "aten::new_full", "aten::full_like"}) {
    table[name] = [](Recipe& r, const Arguments& args) { fill(r, args, args.number("fill_value")); };
  }
  table["aten::scalar_tensor"] = [](Recipe& r, const Arguments& args) { fill(r, args, args.number("s")); };
  // empty: any contents will do; zeros make a compiled program's buffers deterministic.
  for (const char* name : {"aten::empty.memory_format", "aten::empty_like", "aten::new_empty", "aten::empty_strided"}) {
    table[name] = [](Recipe& r, const Arguments& args) { fill(r, args, 0); };
  }
  for (const char* name : {"aten::arange.start_step", "aten::arange", "aten::arange.start"}) {
    table[name] = [](Recipe& r, const Arguments& args) {
      r.emit(Opcode::kIota, args.result(), {}, {args.number("start", 0.0), args.number("step", 1.0)});
    };
  }

  table["aten::cat"] = [](Recipe& r, const Arguments& args) {
    const View& out = args.result();
    const int64_t dim = reducedDims(out, std::vector<int64_t>{args.integer("dim", 0)}).front();
    int64_t at = 0;
    for (const View& part : args.tensors("tensors")) {
      if (part.numel() == 0 && part.rank() == 1) continue;  // torch.cat skips a legacy empty tensor
      r.copy(sliced(out, dim, at, at + part.shape[dim]), part);
      at += part.shape[dim];
    }
  };
  // x moved into the result, then the source into its slice (the backward of a slice:
  // rotary embeddings' halves).
  table["aten::slice_scatter"] = [](Recipe& r, const Arguments& args) {
    const View& out = args.result();
    r.emit(Opcode::kMove, out, {args.tensor("self")});
    const int64_t dim = args.integer("dim", 0);
    const int64_t extent = out.shape[reducedDims(out, std::vector<int64_t>{dim}).front()];
    r.copy(sliced(out, dim, args.integer("start", 0), args.integer("end", extent), args.integer("step", 1)),
           args.tensor("src"));
  };
  // The fill, then x into the middle (the causal-LM loss pads its shifted labels).
  table["aten::constant_pad_nd"] = [](Recipe& r, const Arguments& args) {
    const View& out = args.result();
    const View x = args.tensor("self");
    const std::vector<int64_t> pad = *args.dims("pad");
    for (int64_t n : pad) {
      if (n < 0) throw NotApplicable("a pad that crops");
    }
    r.emit(Opcode::kFill, out, {}, {args.number("value", 0.0)});
    View middle = out;
    for (size_t i = 0; 2 * i < pad.size(); ++i) {
      const int64_t dim = out.rank() - 1 - static_cast<int64_t>(i);
      middle = sliced(middle, dim, pad[2 * i], pad[2 * i] + x.shape[dim]);
    }
    r.copy(middle, x);
  };
}

}  // namespace pto::recipes
