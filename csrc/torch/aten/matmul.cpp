#include "matmul.h"

#include <ATen/native/Resize.h>

#include "../dtype_map.h"
#include "elementwise.h"
#include "instruction_launch.h"

namespace pto::backend {

at::Tensor matmulOp(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, const at::Scalar& beta,
                    const at::Scalar& alpha, const at::Tensor& out, bool batched) {
  const int64_t rank = batched ? 3 : 2;
  const bool same_dtype = b.scalar_type() == a.scalar_type() &&
                          (!bias.defined() || bias.scalar_type() == a.scalar_type()) &&
                          (!out.defined() || out.scalar_type() == a.scalar_type());
  const bool on_one_device = b.device() == a.device() && (!bias.defined() || bias.device() == a.device()) &&
                             (!out.defined() || out.device() == a.device());
  if (a.dim() != rank || b.dim() != rank || !same_dtype || !on_one_device || beta.isComplex() ||
      alpha.isComplex() || !accepts(isa::Opcode::kMatmul, a.scalar_type())) {
    return {};  // the CPU path raises PyTorch's own error for these
  }
  const char* const first = batched ? "batch1" : "mat1";
  const char* const second = batched ? "batch2" : "mat2";
  TORCH_CHECK(a.size(-1) == b.size(-2), first, " and ", second, " shapes cannot be multiplied (",
              a.size(-2), "x", a.size(-1), " and ", b.size(-2), "x", b.size(-1), ")");
  std::vector<int64_t> shape{a.size(-2), b.size(-1)};
  if (batched) {
    TORCH_CHECK(a.size(0) == b.size(0), "batch1 and batch2 must have same number of batches, got ",
                a.size(0), " and ", b.size(0));
    shape.insert(shape.begin(), a.size(0));
  }
  at::Tensor output = out.defined() ? out : at::empty(shape, a.options());
  if (out.defined()) at::native::resize_output(output, shape);
  if (output.numel() == 0) return output;
  double accumulate = 0.0;
  if (bias.defined() && beta.toDouble() != 0.0) {
    if (!bias.is_same(output)) copyOnDevice(output, bias.expand(shape));
    accumulate = beta.toDouble();
  }
  launchInstruction(isa::Opcode::kMatmul, output, {a, b}, {alpha.toDouble(), accumulate});
  return output;
}

}  // namespace pto::backend
