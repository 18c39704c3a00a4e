// Thin wrappers over MKL's CBLAS: the only names of this object that cmake/mkl.cmake
// leaves global, so the only way into this process's second MKL.
#include "gemm_mkl.h"

#include <mkl.h>

namespace pto::rt::sim::kernels {
namespace {

CBLAS_TRANSPOSE op(bool transposed) { return transposed ? CblasTrans : CblasNoTrans; }

// One group of `count` GEMMs through cblas_sgemm_batch or cblas_dgemm_batch (`batch`).
template <typename T, typename Batch>
void gemmGroup(Batch batch, GemmMatrix<T> a_layout, const T* const* a, GemmMatrix<T> b_layout, const T* const* b,
               int64_t m, int64_t n, int64_t k, T alpha, T beta, T* const* c, int64_t ldc, int64_t count) {
  const CBLAS_TRANSPOSE transa = op(a_layout.transposed), transb = op(b_layout.transposed);
  const auto mi = static_cast<MKL_INT>(m), ni = static_cast<MKL_INT>(n), ki = static_cast<MKL_INT>(k);
  const auto lda = static_cast<MKL_INT>(a_layout.ld), ldb = static_cast<MKL_INT>(b_layout.ld);
  const auto ldci = static_cast<MKL_INT>(ldc), size = static_cast<MKL_INT>(count);
  batch(CblasRowMajor, &transa, &transb, &mi, &ni, &ki, &alpha, const_cast<const T**>(a), &lda,
        const_cast<const T**>(b), &ldb, &beta, const_cast<T**>(c), &ldci, 1, &size);
}

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

void mklGemmBatch(GemmMatrix<float> a_layout, const float* const* a, GemmMatrix<float> b_layout,
                  const float* const* b, int64_t m, int64_t n, int64_t k, float alpha, float beta, float* const* c,
                  int64_t ldc, int64_t count) {
  gemmGroup(cblas_sgemm_batch, a_layout, a, b_layout, b, m, n, k, alpha, beta, c, ldc, count);
}

void mklGemmBatch(GemmMatrix<double> a_layout, const double* const* a, GemmMatrix<double> b_layout,
                  const double* const* b, int64_t m, int64_t n, int64_t k, double alpha, double beta,
                  double* const* c, int64_t ldc, int64_t count) {
  gemmGroup(cblas_dgemm_batch, a_layout, a, b_layout, b, m, n, k, alpha, beta, c, ldc, count);
}

void mklGemm(GemmMatrix<BFloat16> a, GemmMatrix<BFloat16> b, int64_t m, int64_t n, int64_t k, float alpha,
             float beta, float* c, int64_t ldc) {
  static_assert(sizeof(BFloat16) == sizeof(MKL_BF16));
  cblas_gemm_bf16bf16f32(CblasRowMajor, op(a.transposed), op(b.transposed), m, n, k, alpha,
                         reinterpret_cast<const MKL_BF16*>(a.data), a.ld, reinterpret_cast<const MKL_BF16*>(b.data),
                         b.ld, beta, c, ldc);
}

}  // namespace pto::rt::sim::kernels
