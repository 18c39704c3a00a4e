// Thin wrappers over MKL's CBLAS: the only names of this object that cmake/mkl.cmake
// leaves global, so the only way into this process's second MKL.
#include "gemm_mkl.h"

#include <mkl.h>

namespace pto::rt::sim::kernels {
namespace {

CBLAS_TRANSPOSE op(bool transposed) { return transposed ? CblasTrans : CblasNoTrans; }

}  // namespace

void mklGemm(GemmMatrix<float> a, GemmMatrix<float> b, int64_t m, int64_t n, int64_t k, float alpha, float beta,
             float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, op(a.transposed), op(b.transposed), m, n, k, alpha, a.data, a.ld, b.data, b.ld, beta, c,
              ldc);
}

void mklGemm(GemmMatrix<double> a, GemmMatrix<double> b, int64_t m, int64_t n, int64_t k, double alpha,
             double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, op(a.transposed), op(b.transposed), m, n, k, alpha, a.data, a.ld, b.data, b.ld, beta, c,
              ldc);
}

void mklGemm(GemmMatrix<BFloat16> a, GemmMatrix<BFloat16> b, int64_t m, int64_t n, int64_t k, float alpha,
             float beta, float* c, int64_t ldc) {
  static_assert(sizeof(BFloat16) == sizeof(MKL_BF16));
  cblas_gemm_bf16bf16f32(CblasRowMajor, op(a.transposed), op(b.transposed), m, n, k, alpha,
                         reinterpret_cast<const MKL_BF16*>(a.data), a.ld, reinterpret_cast<const MKL_BF16*>(b.data),
                         b.ld, beta, c, ldc);
}

}  // namespace pto::rt::sim::kernels
