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
// count GEMMs of one shape and layout in one call (MKL's batch API, whose set-up per
// call, ~1 us, is then paid once): c[i] = alpha * a[i] @ b[i] + beta * c[i], the
// matrices' leading dimensions and transposes those of a_layout and b_layout (whose
// data is unused), each c[i] row-major with leading dimension ldc.
void mklGemmBatch(GemmMatrix<float> a_layout, const float* const* a, GemmMatrix<float> b_layout,
                  const float* const* b, int64_t m, int64_t n, int64_t k, float alpha, float beta, float* const* c,
                  int64_t ldc, int64_t count);
void mklGemmBatch(GemmMatrix<double> a_layout, const double* const* a, GemmMatrix<double> b_layout,
                  const double* const* b, int64_t m, int64_t n, int64_t k, double alpha, double beta,
                  double* const* c, int64_t ldc, int64_t count);
// bfloat16 operands, products summed into a float32 c.
void mklGemm(GemmMatrix<BFloat16> a, GemmMatrix<BFloat16> b, int64_t m, int64_t n, int64_t k, float alpha,
             float beta, float* c, int64_t ldc);

}  // namespace pto::rt::sim::kernels
