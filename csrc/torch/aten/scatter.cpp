#include "scatter.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/Operators.h>

#include <optional>

#include "../dtype_map.h"
#include "composite.h"
#include "fallback.h"
#include "instruction_launch.h"

namespace pto::torch_glue {
namespace {

// A 0-dim tensor scatters as one element along dimension 0 (torch's rule).
at::Tensor atLeast1d(const at::Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }

// out = self, then one tscatter / tscatteradd of src (its block of index's shape) into
// out along dim, when torch's rules hold; false sends the op to the CPU, which raises
// PyTorch's message for what does not.
bool scatterInto(isa::Opcode opcode, const at::Tensor& out, const at::Tensor& self, int64_t dim,
                 const at::Tensor& index, const at::Tensor& src) {
  const int64_t rank = std::max<int64_t>(self.dim(), 1);
  const bool fits = (index.scalar_type() == at::kLong || index.scalar_type() == at::kInt) &&
                    src.scalar_type() == self.scalar_type() &&
                    out.scalar_type() == self.scalar_type() && accepts(opcode, self.scalar_type()) &&
                    index.device() == self.device() && src.device() == self.device() &&
                    out.device() == self.device() && dim >= -rank && dim < rank &&
                    at::has_internal_overlap(out) != at::MemOverlap::Yes && !overlaps(out, index) &&
                    !overlaps(out, src);
  if (!fits) return false;
  const int64_t axis = dim < 0 ? dim + rank : dim;
  const at::Tensor positions = atLeast1d(index).to(at::kLong), values = atLeast1d(src), target = atLeast1d(self);
  if (index.numel() > 0) {
    if (positions.dim() != rank || values.dim() != rank) return false;
    for (int64_t d = 0; d < rank; ++d) {
      if ((d != axis && positions.size(d) > target.size(d)) || positions.size(d) > values.size(d)) return false;
    }
  }
  if (!out.is_same(self)) {
    at::native::resize_output(out, self.sizes());
    out.copy_(self);
  }
  if (index.numel() == 0) return true;
  launchInstruction(opcode, atLeast1d(out), {values.as_strided(positions.sizes(), values.strides()), positions},
                    {static_cast<double>(axis), 0.0});
  return true;
}

// scatter's reduce= form: "add" or "multiply".
std::optional<isa::Opcode> scatterReduction(c10::string_view reduce) {
  if (reduce == "add") return isa::Opcode::kScatterAdd;
  if (reduce == "multiply") return isa::Opcode::kScatterMul;
  return std::nullopt;
}

}  // namespace

at::Tensor& scatterSrcOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                          at::Tensor& out) {
  if (!scatterInto(isa::Opcode::kScatter, out, self, dim, index, src)) {
    Fallback<ATEN_OP2(scatter, src_out)>::call(self, dim, index, src, out);
  }
  return out;
}

at::Tensor& scatterValueOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value,
                            at::Tensor& out) {
  const at::Tensor values = at::scalar_tensor(value, self.options()).expand(index.sizes());
  if (!scatterInto(isa::Opcode::kScatter, out, self, dim, index, values)) {
    Fallback<ATEN_OP2(scatter, value_out)>::call(self, dim, index, value, out);
  }
  return out;
}

at::Tensor& scatterAddOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                          at::Tensor& out) {
  if (!scatterInto(isa::Opcode::kScatterAdd, out, self, dim, index, src)) {
    Fallback<ATEN_OP2(scatter_add, out)>::call(self, dim, index, src, out);
  }
  return out;
}

at::Tensor& scatterReduceOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                             c10::string_view reduce, at::Tensor& out) {
  const std::optional<isa::Opcode> opcode = scatterReduction(reduce);
  if (!opcode || !scatterInto(*opcode, out, self, dim, index, src)) {
    Fallback<ATEN_OP2(scatter, reduce_out)>::call(self, dim, index, src, reduce, out);
  }
  return out;
}

at::Tensor& scatterValueReduceOut(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                  const at::Scalar& value, c10::string_view reduce, at::Tensor& out) {
  const std::optional<isa::Opcode> opcode = scatterReduction(reduce);
  const at::Tensor values = at::scalar_tensor(value, self.options()).expand(index.sizes());
  if (!opcode || !scatterInto(*opcode, out, self, dim, index, values)) {
    Fallback<ATEN_OP2(scatter, value_reduce_out)>::call(self, dim, index, value, reduce, out);
  }
  return out;
}

// scatter_reduce: one tscatteradd / tscattermul / tscattermax / tscattermin. Without
// self, the positions scattered to first take 0 (sum, mean), 1 (prod) or one of
// their values (amax, amin, which may see it twice). A mean divides the sum by the
// count of values, self counting as one, as torch does; integer means, which torch
// rounds down, stay on the CPU.
at::Tensor& scatterReduceTwoOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                c10::string_view reduce, bool include_self, at::Tensor& out) {
  const bool mean = reduce == "mean", extreme = reduce == "amax" || reduce == "amin";
  const std::optional<isa::Opcode> opcode =
      reduce == "sum" || mean ? std::optional(isa::Opcode::kScatterAdd)
      : reduce == "prod"      ? std::optional(isa::Opcode::kScatterMul)
      : reduce == "amax"      ? std::optional(isa::Opcode::kScatterMax)
      : reduce == "amin"      ? std::optional(isa::Opcode::kScatterMin)
                              : std::nullopt;
  const bool native =
      opcode && (!mean || at::isFloatingType(self.scalar_type())) &&
      (include_self ? scatterInto(*opcode, out, self, dim, index, src)
       : extreme    ? scatterInto(isa::Opcode::kScatter, out, self, dim, index, src)
                    : scatterInto(isa::Opcode::kScatter, out, self, dim, index,
                                  at::scalar_tensor(reduce == "prod" ? 1 : 0, self.options()).expand(index.sizes())));
  if (!native) {
    return Fallback<ATEN_OP2(scatter_reduce, two_out)>::call(self, dim, index, src, reduce, include_self, out);
  }
  if (!include_self) scatterInto(*opcode, out, out, dim, index, src);
  if (mean) {
    at::Tensor counts = at::full(self.sizes(), include_self ? 1 : 0, self.options());
    scatterInto(isa::Opcode::kScatterAdd, counts, counts, dim, index, at::ones({}, src.options()).expand(index.sizes()));
    out.div_(counts.clamp_min(1));
  }
  return out;
}

}  // namespace pto::torch_glue
