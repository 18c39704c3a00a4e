// Reduction recipes: an instruction whose output is viewed at the input's shape with
// stride 0 along the reduced dimensions (the ISA's rule), into the result torch laid
// out (with or without the reduced dims).
#include <cmath>
#include <limits>
#include <vector>

#include "aten_instructions.h"
#include "families.h"

namespace pto::recipes {
namespace {

using isa::DType;
using isa::Opcode;

int64_t countOf(const View& x, const std::vector<int64_t>& dims) {
  int64_t count = 1;
  for (int64_t d : dims) count *= x.shape[static_cast<size_t>(d)];
  return count;
}

// `opcode` over `dims` of x into `out` (the result: kept or squeezed dims).
void reduceInto(Recipe& r, Opcode opcode, const View& x, const std::vector<int64_t>& dims, const View& out,
                std::array<double, isa::kMaxImmediates> immediates = {}) {
  const bool indices = opcode == Opcode::kArgmax || opcode == Opcode::kArgmin;
  r.emit(opcode, spread(out, x.shape, dims), {indices ? x : r.cast(x, out.dtype)}, immediates);
}

void reduceResult(Recipe& r, const Arguments& args, Opcode opcode, std::array<double, isa::kMaxImmediates> immediates = {}) {
  const View x = args.tensor("self");
  reduceInto(r, opcode, x, reducedDims(x, args.dims("dim")), args.result(), immediates);
}

// The mean of the reduced dimensions: a sum scaled by 1 / count.
double meanScale(int64_t count) { return 1.0 / static_cast<double>(std::max<int64_t>(count, 1)); }

// var(x) = sum((x - mean)^2) / (count - correction), and the mean beside it; float16
// and bfloat16 in float32. Where count <= correction the sum is scaled by infinity, as
// aten divides by zero there (NaN for no spread, inf otherwise).
void varianceMean(Recipe& r, const Arguments& args, bool with_mean) {
  const View x = args.tensor("self");
  const DType compute = widened(x.dtype);
  const View xc = r.cast(x, compute);
  const std::vector<int64_t> dims = reducedDims(x, args.dims("dim"));
  const int64_t count = countOf(x, dims);
  const double correction = args.number("correction", 1.0);
  std::vector<int64_t> kept = x.shape;
  for (int64_t d : dims) kept[static_cast<size_t>(d)] = 1;
  const View mean = with_mean ? r.resultIn(args.result(1), compute) : r.temporary(compute, kept);
  const View spread_mean = spread(mean, x.shape, dims);
  r.emit(Opcode::kSum, spread_mean, {xc}, {meanScale(count)});
  const View centred = r.emit(atenInstruction("sub").opcode, r.temporary(compute, x.shape), {xc, spread_mean}, {1.0});
  const View square = r.emit(atenInstruction("mul").opcode, r.temporary(compute, x.shape), {centred, centred});
  const double divisor = static_cast<double>(count) - correction;
  const double scale = divisor > 0 ? 1.0 / divisor : std::numeric_limits<double>::infinity();
  const View variance = r.resultIn(args.result(0), compute);
  reduceInto(r, Opcode::kSum, square, dims, variance, {scale});
  r.settle(args.result(0), variance);
  if (with_mean) r.settle(args.result(1), mean);
}

}  // namespace

void addReductionRecipes(Table& table) {
  for (const char* name : {"aten::sum.dim_IntList", "aten::sum"}) {
    table[name] = [](Recipe& r, const Arguments& args) { reduceResult(r, args, Opcode::kSum, {1.0}); };
  }
  for (const char* name : {"aten::prod.dim_int", "aten::prod"}) {
    table[name] = [](Recipe& r, const Arguments& args) { reduceResult(r, args, Opcode::kProd, {1.0}); };
  }
  for (const char* name : {"aten::mean.dim", "aten::mean"}) {
    table[name] = [](Recipe& r, const Arguments& args) {
      const View x = args.tensor("self");
      reduceResult(r, args, Opcode::kSum, {meanScale(countOf(x, reducedDims(x, args.dims("dim"))))});
    };
  }
  table["aten::amax"] = [](Recipe& r, const Arguments& args) { reduceResult(r, args, Opcode::kAmax); };
  table["aten::amin"] = [](Recipe& r, const Arguments& args) { reduceResult(r, args, Opcode::kAmin); };
  for (const char* name : {"aten::any.dim", "aten::any.dims", "aten::any"}) {
    table[name] = [](Recipe& r, const Arguments& args) { reduceResult(r, args, Opcode::kAny); };
  }
  for (const char* name : {"aten::all.dim", "aten::all.dims", "aten::all"}) {
    table[name] = [](Recipe& r, const Arguments& args) { reduceResult(r, args, Opcode::kAll); };
  }
  table["aten::max.dim"] = [](Recipe& r, const Arguments& args) {
    const View x = args.tensor("self");
    const std::vector<int64_t> dims = reducedDims(x, args.dims("dim"));
    reduceInto(r, Opcode::kAmax, x, dims, args.result(0));
    reduceInto(r, Opcode::kArgmax, x, dims, args.result(1));
  };
  table["aten::min.dim"] = [](Recipe& r, const Arguments& args) {
    const View x = args.tensor("self");
    const std::vector<int64_t> dims = reducedDims(x, args.dims("dim"));
    reduceInto(r, Opcode::kAmin, x, dims, args.result(0));
    reduceInto(r, Opcode::kArgmin, x, dims, args.result(1));
  };
  // Without a dim, the index into the input read as one row.
  for (const auto& [name, opcode] : {std::pair{"aten::argmax", Opcode::kArgmax}, std::pair{"aten::argmin", Opcode::kArgmin}}) {
    table[name] = [opcode](Recipe& r, const Arguments& args) {
      View x = args.tensor("self");
      if (!args.has("dim")) {
        x = r.reshape(x, {x.numel()});
      }
      reduceInto(r, opcode, x, reducedDims(x, args.has("dim") ? args.dims("dim") : std::vector<int64_t>{0}),
                 args.result());
    };
  }
  table["aten::var_mean.correction"] = [](Recipe& r, const Arguments& args) { varianceMean(r, args, true); };
  table["aten::var.correction"] = [](Recipe& r, const Arguments& args) { varianceMean(r, args, false); };
}

}  // namespace pto::recipes
