// Thin wrappers over MKL's VML, as gemm_mkl.cpp's over its CBLAS: names that
// cmake/mkl.cmake leaves global. The mode is PyTorch's (aten/src/ATen/cpu/vml.h): high
// accuracy, subnormals kept, no error handling (a NaN or infinity is just returned).
#include "vector_math_mkl.h"

#include <mkl.h>

namespace pto::rt::sim::kernels {
namespace {

constexpr MKL_INT64 kMode = VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE;

}  // namespace

bool mklUnary(isa::Opcode op, const float* in, float* out, int64_t n) {
  switch (op) {
#define PTO_MKL_CASE(opcode, name) \
  case isa::Opcode::opcode:        \
    vms##name(n, in, out, kMode);  \
    return true;
    PTO_MKL_UNARY(PTO_MKL_CASE)
#undef PTO_MKL_CASE
    default:
      return false;
  }
}

bool mklUnary(isa::Opcode op, const double* in, double* out, int64_t n) {
  switch (op) {
#define PTO_MKL_CASE(opcode, name) \
  case isa::Opcode::opcode:        \
    vmd##name(n, in, out, kMode);  \
    return true;
    PTO_MKL_UNARY(PTO_MKL_CASE)
#undef PTO_MKL_CASE
    default:
      return false;
  }
}

}  // namespace pto::rt::sim::kernels
