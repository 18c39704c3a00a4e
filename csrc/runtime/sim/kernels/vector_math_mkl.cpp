// Thin wrappers over MKL's VML, as gemm_mkl.cpp's over its CBLAS: names that
// cmake/mkl.cmake leaves global. The mode is PyTorch's (aten/src/ATen/cpu/vml.h): high
// accuracy, subnormals kept, no error handling (a NaN or infinity is just returned).
#include "vector_math_mkl.h"

#include <mkl.h>

namespace pto::rt::sim::kernels {
namespace {

constexpr MKL_INT64 kMode = VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE;

}  // namespace

#define PTO_MKL_DEFINE(opcode, name)                                                         \
  void mkl##name(const float* in, float* out, int64_t n) { vms##name(n, in, out, kMode); }   \
  void mkl##name(const double* in, double* out, int64_t n) { vmd##name(n, in, out, kMode); }
PTO_MKL_UNARY(PTO_MKL_DEFINE)
#undef PTO_MKL_DEFINE

}  // namespace pto::rt::sim::kernels
