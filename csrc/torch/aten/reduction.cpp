#include "reduction.h"

#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/Resize.h>

#include "../dtype_map.h"
#include "elementwise.h"
#include "instruction_launch.h"

namespace pto::backend {
namespace {

std::bitset<at::dim_bitset_size> reducedDims(const at::Tensor& self, at::OptionalIntArrayRef dims) {
  std::bitset<at::dim_bitset_size> mask;
  if (!dims || dims->empty()) {
    for (int64_t d = 0; d < self.dim(); ++d) mask.set(d);
    return mask;
  }
  return at::dim_list_to_bitset(*dims, self.dim());
}

}  // namespace

int64_t reducedCount(const at::Tensor& self, at::OptionalIntArrayRef dims) {
  const auto mask = reducedDims(self, dims);
  int64_t count = 1;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (mask[d]) count *= self.size(d);
  }
  return count;
}

at::Tensor reduce(isa::Opcode opcode, const at::Tensor& self, at::OptionalIntArrayRef dims,
                  bool keepdim, at::ScalarType compute, at::ScalarType result, const at::Tensor& out,
                  double scale) {
  if (!accepts(opcode, compute) || !ptoDType(result)) return {};
  const auto mask = reducedDims(self, dims);
  std::vector<int64_t> kept_shape;      // the result's shape with keepdim
  std::vector<int64_t> result_shape;
  for (int64_t d = 0; d < self.dim(); ++d) {
    kept_shape.push_back(mask[d] ? 1 : self.size(d));
    if (!mask[d] || keepdim) result_shape.push_back(kept_shape.back());
  }
  const at::ScalarType stored = isa::info(opcode).output == isa::OutputDType::Index ? at::kLong : compute;
  at::Tensor output;
  if (out.defined()) {
    TORCH_CHECK(out.device() == self.device(), "Expected out tensor to be on ", self.device(),
                " but got ", out.device());
    at::native::resize_output(out, result_shape);
    output = out;
  } else {
    output = at::empty(result_shape, self.options().dtype(result));
  }
  if (output.numel() == 0) return output;
  at::Tensor target = output.scalar_type() == stored ? output : at::empty(result_shape, output.options().dtype(stored));
  const at::Tensor input = self.scalar_type() == compute ? self : self.to(compute);
  // The output seen at the input's shape: stride 0 along every reduced dimension.
  std::vector<int64_t> strides(self.dim());
  for (int64_t d = 0, j = 0; d < self.dim(); ++d) {
    if (mask[d]) {
      strides[d] = 0;
      j += keepdim ? 1 : 0;
    } else {
      strides[d] = target.stride(j++);
    }
  }
  const at::Tensor spread = target.as_strided(self.sizes(), strides, target.storage_offset());
  launchInstruction(opcode, spread, {input}, {scale, 0.0});
  if (!target.is_same(output)) copyOnDevice(output, target);
  return output;
}

}  // namespace pto::backend
