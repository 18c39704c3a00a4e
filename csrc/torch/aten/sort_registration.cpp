// Sorting and scans on pto: sort (stable or not; argsort and msort come through
// it) is one targsort for the indices and one tgather of the values with them;
// topk is one ttopk and one tgather; cumsum and cumprod are one tcumsum / tcumprod,
// after a tcvt when the result's dtype is not the input's (integers and bools sum
// in int64, as in PyTorch). Only the out= forms are registered: PyTorch's
// structured composites (sort.stable, topk, cumsum, cumsum_ ...) check their
// arguments, allocate the results and call them.
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/Operators.h>
#include <torch/library.h>

#include "fallback.h"
#include "instruction_launch.h"

namespace pto::backend {
namespace {

// Whether writing `out` may change `in` before an instruction has read all of it.
bool overlaps(const at::Tensor& out, const at::Tensor& in) {
  return out.numel() > 0 && in.numel() > 0 && out.storage().is_alias_of(in.storage());
}

// PyTorch's own checks on the outputs (else the CPU raises them), and a dtype the instruction takes.
bool selectsNatively(isa::Opcode opcode, const at::Tensor& self, const at::Tensor& values, const at::Tensor& indices) {
  return accepts(opcode, self.scalar_type()) && values.scalar_type() == self.scalar_type() &&
         indices.scalar_type() == at::kLong && values.device() == self.device() && indices.device() == self.device();
}

// The positions `opcode` picks along `axis` into indices, then the values at them into
// values; through temporaries where an output shares memory with self.
void selectInto(isa::Opcode opcode, const at::Tensor& self, int64_t axis, bool flag, at::Tensor& values,
                at::Tensor& indices) {
  if (indices.numel() == 0) return;
  const at::Tensor positions = overlaps(indices, self) ? at::empty(indices.sizes(), indices.options()) : indices;
  launchInstruction(opcode, positions, {self}, {static_cast<double>(axis), flag ? 1.0 : 0.0});
  const at::Tensor picked = overlaps(values, self) || overlaps(values, positions)
                                ? at::empty(values.sizes(), values.options()) : values;
  launchInstruction(isa::Opcode::kGather, picked, {self, positions}, {static_cast<double>(axis), 0.0});
  if (!positions.is_same(indices)) indices.copy_(positions);
  if (!picked.is_same(values)) values.copy_(picked);
}

// Always stable: an unstable sort may order equal values any way, and this is one.
std::tuple<at::Tensor&, at::Tensor&> sortOut(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                              bool descending, at::Tensor& values, at::Tensor& indices) {
  if (!selectsNatively(isa::Opcode::kArgsort, self, values, indices)) {
    return Fallback<ATEN_OP2(sort, values_stable)>::call(self, stable, dim, descending, values, indices);
  }
  const int64_t axis = at::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(values, self.sizes());
  at::native::resize_output(indices, self.sizes());
  selectInto(isa::Opcode::kArgsort, self, axis, descending, values, indices);
  return {values, indices};
}

// Always sorted: with sorted=False PyTorch promises no order, so this one will do.
std::tuple<at::Tensor&, at::Tensor&> topkOut(const at::Tensor& self, c10::SymInt k, int64_t dim, bool largest,
                                              bool sorted, at::Tensor& values, at::Tensor& indices) {
  const int64_t axis = at::maybe_wrap_dim(dim, self.dim());
  const int64_t count = k.expect_int();
  if (!selectsNatively(isa::Opcode::kTopk, self, values, indices) || count < 0 ||
      count > (self.dim() > 0 ? self.size(axis) : 1)) {
    return at::native::call_fallback_fn_symint<&cpuFallback, ATEN_OP2(topk, values)>::call(
        self, k, dim, largest, sorted, values, indices);
  }
  std::vector<int64_t> shape = self.sizes().vec();
  if (!shape.empty()) shape[axis] = count;
  at::native::resize_output(values, shape);
  at::native::resize_output(indices, shape);
  selectInto(isa::Opcode::kTopk, self, axis, largest, values, indices);
  return {values, indices};
}

// The scan of self, converted to out's dtype, into out; out may be self (in place).
template <isa::Opcode opcode, class Out>
at::Tensor& scanOut(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  if ((dtype && *dtype != out.scalar_type()) || out.device() != self.device() || !ptoDType(self.scalar_type()) ||
      !accepts(opcode, out.scalar_type())) {
    return Fallback<Out>::call(self, dim, dtype, out);
  }
  const int64_t axis = at::maybe_wrap_dim(dim, self.dim());
  if (!out.is_same(self)) at::native::resize_output(out, self.sizes());
  if (out.numel() == 0) return out;
  const at::Tensor input = self.to(out.scalar_type());
  const bool in_place = at::get_overlap_status(out, input) == at::MemOverlapStatus::Full;
  const at::Tensor result = !in_place && overlaps(out, input) ? at::empty(out.sizes(), out.options()) : out;
  launchInstruction(opcode, result, {input}, {static_cast<double>(axis), 0.0});
  if (!result.is_same(out)) out.copy_(result);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sort.values_stable", TORCH_FN(sortOut));
  m.impl("topk.values", TORCH_FN(topkOut));
  m.impl("cumsum.out", TORCH_FN((scanOut<isa::Opcode::kCumsum, ATEN_OP2(cumsum, out)>)));
  m.impl("cumprod.out", TORCH_FN((scanOut<isa::Opcode::kCumprod, ATEN_OP2(cumprod, out)>)));
}

}  // namespace pto::backend
