// torch.ops.pto: the operators of the project's origin (pypto.add, reduce_sum,
// softmax, normalize ...) as a PyTorch library.
//
// Each op is written once, in aten ops, and registered for CPU, PrivateUse1 and
// Meta: on pto every aten op it uses is a PTO instruction, on the CPU the same
// function gives the same semantics, and on Meta it gives shapes for
// torch.compile. The same function is the Autograd kernel: gradients follow from
// the aten ops it records.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace pto::torch_glue {
namespace {

at::Tensor add(const at::Tensor& x, const at::Tensor& y) { return at::add(x, y); }
at::Tensor sub(const at::Tensor& x, const at::Tensor& y) { return at::sub(x, y); }
at::Tensor mul(const at::Tensor& x, const at::Tensor& y) { return at::mul(x, y); }
at::Tensor div(const at::Tensor& x, const at::Tensor& y) { return at::div(x, y); }
at::Tensor exp(const at::Tensor& x) { return at::exp(x); }
at::Tensor log(const at::Tensor& x) { return at::log(x); }
at::Tensor relu(const at::Tensor& x) { return at::relu(x); }
at::Tensor gelu(const at::Tensor& x, c10::string_view approximate) { return at::gelu(x, approximate); }
at::Tensor matmul(const at::Tensor& a, const at::Tensor& b) { return at::matmul(a, b); }

at::Tensor reduceSum(const at::Tensor& x, int64_t axis, bool keepdims) { return at::sum(x, {axis}, keepdims); }
at::Tensor reduceMean(const at::Tensor& x, int64_t axis, bool keepdims) { return at::mean(x, {axis}, keepdims); }
at::Tensor reduceMax(const at::Tensor& x, int64_t axis, bool keepdims) { return at::amax(x, {axis}, keepdims); }
at::Tensor reduceMin(const at::Tensor& x, int64_t axis, bool keepdims) { return at::amin(x, {axis}, keepdims); }

at::Tensor softmax(const at::Tensor& x, int64_t axis) { return at::_softmax(x, axis, false); }

// A new tensor, not a view: custom ops return fresh memory (TTRANS writes it).
at::Tensor transpose(const at::Tensor& x, int64_t dim0, int64_t dim1) {
  return x.transpose(dim0, dim1).contiguous();
}

// L2 normalisation along `axis`: x / max(||x||_2, eps).
at::Tensor normalize(const at::Tensor& x, int64_t axis, double eps) {
  const at::Tensor norm = at::mul(x, x).sum({axis}, /*keepdim=*/true).sqrt();
  return at::div(x, at::maximum(norm, at::full({}, eps, norm.options())));
}

at::Tensor layerNorm(const at::Tensor& x, at::IntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,
                     const std::optional<at::Tensor>& bias, double eps) {
  return at::layer_norm(x, normalized_shape, weight, bias, eps);
}

// x / sqrt(mean(x^2) + eps) * weight over the trailing normalized_shape dims.
at::Tensor rmsNorm(const at::Tensor& x, at::IntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,
                   double eps) {
  std::vector<int64_t> dims;
  for (int64_t d = x.dim() - static_cast<int64_t>(normalized_shape.size()); d < x.dim(); ++d) dims.push_back(d);
  const at::Tensor scaled = at::mul(x, at::add(at::mul(x, x).mean(dims, /*keepdim=*/true), eps).rsqrt());
  return weight && weight->defined() ? at::mul(scaled, *weight) : scaled;
}

}  // namespace

TORCH_LIBRARY(pto, m) {
  m.def("add(Tensor x, Tensor y) -> Tensor");
  m.def("sub(Tensor x, Tensor y) -> Tensor");
  m.def("mul(Tensor x, Tensor y) -> Tensor");
  m.def("div(Tensor x, Tensor y) -> Tensor");
  m.def("exp(Tensor x) -> Tensor");
  m.def("log(Tensor x) -> Tensor");
  m.def("relu(Tensor x) -> Tensor");
  m.def("gelu(Tensor x, str approximate='none') -> Tensor");
  m.def("matmul(Tensor a, Tensor b) -> Tensor");
  m.def("reduce_sum(Tensor x, int axis, bool keepdims=False) -> Tensor");
  m.def("reduce_mean(Tensor x, int axis, bool keepdims=False) -> Tensor");
  m.def("reduce_max(Tensor x, int axis, bool keepdims=False) -> Tensor");
  m.def("reduce_min(Tensor x, int axis, bool keepdims=False) -> Tensor");
  m.def("softmax(Tensor x, int axis=-1) -> Tensor");
  m.def("transpose(Tensor x, int dim0, int dim1) -> Tensor");
  m.def("normalize(Tensor x, int axis=-1, float eps=1e-12) -> Tensor");
  m.def("layer_norm(Tensor x, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) -> Tensor");
  m.def("rms_norm(Tensor x, int[] normalized_shape, Tensor? weight=None, float eps=1e-06) -> Tensor");
}

// One registration per op for every key it serves (see the comment at the top).
#define PTO_OP_KERNELS(key)                              \
  TORCH_LIBRARY_IMPL(pto, key, m) {                      \
    m.impl("add", TORCH_FN(add));                        \
    m.impl("sub", TORCH_FN(sub));                        \
    m.impl("mul", TORCH_FN(mul));                        \
    m.impl("div", TORCH_FN(div));                        \
    m.impl("exp", TORCH_FN(exp));                        \
    m.impl("log", TORCH_FN(log));                        \
    m.impl("relu", TORCH_FN(relu));                      \
    m.impl("gelu", TORCH_FN(gelu));                      \
    m.impl("matmul", TORCH_FN(matmul));                  \
    m.impl("reduce_sum", TORCH_FN(reduceSum));           \
    m.impl("reduce_mean", TORCH_FN(reduceMean));         \
    m.impl("reduce_max", TORCH_FN(reduceMax));           \
    m.impl("reduce_min", TORCH_FN(reduceMin));           \
    m.impl("softmax", TORCH_FN(softmax));                \
    m.impl("transpose", TORCH_FN(transpose));            \
    m.impl("normalize", TORCH_FN(normalize));            \
    m.impl("layer_norm", TORCH_FN(layerNorm));           \
    m.impl("rms_norm", TORCH_FN(rmsNorm));               \
  }

PTO_OP_KERNELS(CPU)
PTO_OP_KERNELS(PrivateUse1)
PTO_OP_KERNELS(Meta)
PTO_OP_KERNELS(Autograd)

}  // namespace pto::torch_glue
