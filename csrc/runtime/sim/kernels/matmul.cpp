// tmatmul on the sim device: OpenBLAS's GEMM per batch. Operands whose strides
// describe a row-major or a transposed matrix go to BLAS as they are; anything
// else (broadcast rows, odd strides) and float16/bfloat16 (accumulated in
// float32) are packed first.
#include <cblas.h>

#include <algorithm>
#include <cstring>

#include <vector>

#include "element_types.h"
#include "execute.h"
#include "gemm_bf16.h"
#include "runtime/sim/sim_parallel.h"

namespace pto::rt::sim::kernels {
namespace {

// A matrix as BLAS takes it: a base pointer, a leading dimension and whether
// it is stored transposed (row-major throughout).
// Rows of C below which a band is not worth a core of its own.
constexpr int64_t kMinBandRows = 32;

// BLAS runs on the calling thread only: the device's cores split the GEMMs among
// themselves (parallelFor), and BLAS threads spinning after a call would take those
// cores from the kernels that follow.
void singleThreadedBlas() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

template <typename F>
struct BlasMatrix {
  const F* data = nullptr;
  int64_t ld = 1;
  bool transposed = false;
};

// Element strides of the last two dimensions describe a matrix BLAS can read.
bool blasLayout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride, int64_t* ld,
                bool* transposed) {
  if (col_stride == 1 && (rows <= 1 || row_stride >= std::max<int64_t>(1, cols))) {
    *ld = std::max<int64_t>({1, cols, rows <= 1 ? cols : row_stride});
    *transposed = false;
    return true;
  }
  if (row_stride == 1 && (cols <= 1 || col_stride >= std::max<int64_t>(1, rows))) {
    *ld = std::max<int64_t>({1, rows, cols <= 1 ? rows : col_stride});
    *transposed = true;
    return true;
  }
  return false;
}

template <typename F, typename T>
void pack(const char* base, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride,
          std::vector<F>& into) {
  into.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      into[i * cols + j] = static_cast<F>(load<T>(base + (i * row_stride + j * col_stride) * static_cast<int64_t>(sizeof(T))));
    }
  }
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k,
              alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k,
              alpha, a, lda, b, ldb, beta, c, ldc);
}

#if defined(PTO_BF16_GEMM)
// A bfloat16 operand as gemmBf16 reads it: as it is when BLAS could, else packed.
const uint16_t* bf16Operand(const char* base, int64_t rows, int64_t cols, const int64_t strides[2],
                            std::vector<uint16_t>& packed, int64_t* ld, bool* transposed) {
  if (blasLayout(rows, cols, strides[0], strides[1], ld, transposed)) return reinterpret_cast<const uint16_t*>(base);
  packed.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) std::memcpy(&packed[i * cols + j], base + (i * strides[0] + j * strides[1]) * 2, 2);
  }
  *ld = std::max<int64_t>(1, cols);
  *transposed = false;
  return packed.data();
}

// bfloat16 with the CPU's dot product: the products summed in float32, then
// C = alpha * (A @ B) + beta * C rounded once to bfloat16, tile by tile.
void matmulBf16(const char* a, const int64_t a_strides[2], const char* b, const int64_t b_strides[2], char* c,
                const int64_t c_strides[2], int64_t m, int64_t n, int64_t k, double alpha, double beta) {
  std::vector<uint16_t> a_packed, b_packed;
  int64_t lda = 1, ldb = 1;
  bool ta = false, tb = false;
  const uint16_t* a_bits = bf16Operand(a, m, k, a_strides, a_packed, &lda, &ta);
  const uint16_t* b_bits = bf16Operand(b, k, n, b_strides, b_packed, &ldb, &tb);
  gemmBf16(ta, tb, m, n, k, a_bits, lda, b_bits, ldb, static_cast<float>(alpha), static_cast<float>(beta), c,
           c_strides);
}
#endif

// One batch entry: C[m, n] = alpha * A[m, k] @ B[k, n] + beta * C.
template <typename T>
void matmulOne(const char* a, const int64_t a_strides[2], const char* b, const int64_t b_strides[2],
               char* c, const int64_t c_strides[2], int64_t m, int64_t n, int64_t k, double alpha, double beta) {
#if defined(PTO_BF16_GEMM)
  if constexpr (std::is_same_v<T, BFloat16>) {
    if (hasBf16DotProduct()) return matmulBf16(a, a_strides, b, b_strides, c, c_strides, m, n, k, alpha, beta);
  }
#endif
  using F = std::conditional_t<std::is_same_v<T, double>, double, float>;
  constexpr bool native = std::is_same_v<T, F>;
  std::vector<F> a_packed, b_packed, c_packed;
  BlasMatrix<F> A, B;
  if (native && blasLayout(m, k, a_strides[0], a_strides[1], &A.ld, &A.transposed)) {
    A.data = reinterpret_cast<const F*>(a);
  } else {
    pack<F, T>(a, m, k, a_strides[0], a_strides[1], a_packed);
    A = {a_packed.data(), std::max<int64_t>(1, k), false};
  }
  if (native && blasLayout(k, n, b_strides[0], b_strides[1], &B.ld, &B.transposed)) {
    B.data = reinterpret_cast<const F*>(b);
  } else {
    pack<F, T>(b, k, n, b_strides[0], b_strides[1], b_packed);
    B = {b_packed.data(), std::max<int64_t>(1, n), false};
  }
  int64_t ldc = 1;
  bool c_transposed = false;
  const bool c_direct = native && blasLayout(m, n, c_strides[0], c_strides[1], &ldc, &c_transposed);
  if (c_direct && !c_transposed) {
    gemm(A.transposed, B.transposed, m, n, k, static_cast<F>(alpha), A.data, A.ld, B.data, B.ld,
         static_cast<F>(beta), reinterpret_cast<F*>(c), ldc);
    return;
  }
  if (c_direct) {  // C stored transposed: C^T = B^T @ A^T
    gemm(!B.transposed, !A.transposed, n, m, k, static_cast<F>(alpha), B.data, B.ld, A.data, A.ld,
         static_cast<F>(beta), reinterpret_cast<F*>(c), ldc);
    return;
  }
  if (beta != 0) pack<F, T>(c, m, n, c_strides[0], c_strides[1], c_packed);
  else c_packed.assign(static_cast<size_t>(m * n), F(0));
  gemm(A.transposed, B.transposed, m, n, k, static_cast<F>(alpha), A.data, A.ld, B.data, B.ld,
       static_cast<F>(beta), c_packed.data(), std::max<int64_t>(1, n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      store<T>(c + (i * c_strides[0] + j * c_strides[1]) * static_cast<int64_t>(sizeof(T)), c_packed[i * n + j]);
    }
  }
}

}  // namespace

void executeMatmul(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const isa::Operand& out = instruction.operands[0];
  const isa::Operand& a = instruction.operands[1];
  const isa::Operand& b = instruction.operands[2];
  const int r = out.rank;
  const int64_t m = out.shape[r - 2], n = out.shape[r - 1], k = a.shape[r - 1];
  int64_t batches = 1;
  for (int d = 0; d < r - 2; ++d) batches *= out.shape[d];
  if (m == 0 || n == 0 || batches == 0) return;
  singleThreadedBlas();
  // The device's cores take bands of output rows of every batch entry: one BLAS call
  // each, on one thread (small batched GEMMs, as attention's, then run side by side).
  const auto cores = static_cast<int64_t>(rt::sim::parallelism());
  const int64_t bands = batches >= cores ? 1 : std::clamp<int64_t>(m / kMinBandRows, 1, (cores + batches - 1) / batches);
  const int64_t band_rows = (m + bands - 1) / bands;
  dispatchDType(out.dtype, [&]<typename T>() {
    if constexpr (isa::kFloatTypes.contains(dtypeOf<T>())) {
      const auto size = static_cast<int64_t>(sizeof(T));
      rt::sim::parallelFor(static_cast<size_t>(batches * bands), 1, [&](size_t begin, size_t end) {
        for (auto item = static_cast<int64_t>(begin); item < static_cast<int64_t>(end); ++item) {
          const int64_t batch = item / bands, row = (item % bands) * band_rows;
          const int64_t rows = std::min(band_rows, m - row);
          int64_t offsets[3] = {out.offset + row * out.strides[r - 2], a.offset + row * a.strides[r - 2], b.offset};
          for (int64_t rest = batch, d = r - 3; d >= 0; --d) {
            const int64_t index = rest % out.shape[d];
            rest /= out.shape[d];
            offsets[0] += index * out.strides[d];
            offsets[1] += index * a.strides[d];
            offsets[2] += index * b.strides[d];
          }
          const int64_t out_strides[2] = {out.strides[r - 2], out.strides[r - 1]};
          const int64_t a_strides[2] = {a.strides[r - 2], a.strides[r - 1]};
          const int64_t b_strides[2] = {b.strides[r - 2], b.strides[r - 1]};
          matmulOne<T>(static_cast<const char*>(buffers[a.buffer]) + offsets[1] * size, a_strides,
                       static_cast<const char*>(buffers[b.buffer]) + offsets[2] * size, b_strides,
                       static_cast<char*>(buffers[out.buffer]) + offsets[0] * size, out_strides, rows, n, k,
                       instruction.immediates[0], instruction.immediates[1]);
        }
      });
    }
  });
}

}  // namespace pto::rt::sim::kernels
