// Thin wrappers over MKL's VML, as gemm_mkl.cpp's over its CBLAS: names that
// cmake/mkl.cmake leaves global. The mode is PyTorch's (aten/src/ATen/cpu/vml.h): high
// accuracy, subnormals kept, no error handling (a NaN or infinity is just returned).
#include "vector_math_mkl.h"

#include <mkl.h>

namespace pto::rt::sim::kernels {
namespace {

constexpr MKL_INT64 kMode = VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE;

}  // namespace

void mklErf(const float* in, float* out, int64_t n) { vmsErf(n, in, out, kMode); }
void mklErf(const double* in, double* out, int64_t n) { vmdErf(n, in, out, kMode); }
void mklErfc(const float* in, float* out, int64_t n) { vmsErfc(n, in, out, kMode); }
void mklErfc(const double* in, double* out, int64_t n) { vmdErfc(n, in, out, kMode); }

}  // namespace pto::rt::sim::kernels
