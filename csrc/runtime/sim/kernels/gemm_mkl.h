// tmatmul's GEMMs through Intel's MKL (all but bfloat16's where oneDNN has a brgemm
// kernel for them: matmul.cpp), which picks its kernels for the CPU it runs on
// (AVX2, AVX-512, AMX; MKL_ENABLE_INSTRUCTIONS caps them). The sequential library,
// linked in with its symbols kept apart from PyTorch's own MKL (cmake/mkl.cmake): every
// call runs on the calling thread only.
#pragma once

#include <cstdint>

#include "gemm_matrix.h"
#include "half.h"

namespace pto::rt::sim::kernels {

// c[m, n] = alpha * a[m, k] @ b[k, n] + beta * c, c row-major with leading dimension
// ldc (beta 0: c's old values are not read). m, n, k > 0.
void mklGemm(GemmMatrix<float> a, GemmMatrix<float> b, int64_t m, int64_t n, int64_t k, float alpha, float beta,
             float* c, int64_t ldc);
void mklGemm(GemmMatrix<double> a, GemmMatrix<double> b, int64_t m, int64_t n, int64_t k, double alpha,
             double beta, double* c, int64_t ldc);
// bfloat16 operands, products summed into a float32 c.
void mklGemm(GemmMatrix<BFloat16> a, GemmMatrix<BFloat16> b, int64_t m, int64_t n, int64_t k, float alpha,
             float beta, float* c, int64_t ldc);

}  // namespace pto::rt::sim::kernels
