// bfloat16 GEMM with AVX512-BF16's dot product (vdpbf16ps: pairs of bfloat16
// along k multiplied and summed into float32 lanes), for CPUs that have it: there,
// widening to float32 for sgemm would halve the throughput. This file alone is
// built for AVX512-BF16; gemmBf16 runs only where the CPU reports the feature.
#include "gemm_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "element_types.h"
#include "runtime/sim/sim_parallel.h"

namespace pto::rt::sim::kernels {
namespace {

constexpr int64_t kRows = 6;     // rows of C per micro-kernel
constexpr int64_t kCols = 32;    // columns of C per micro-kernel: two vectors of 16 float32
constexpr int64_t kDepth = 512;  // pairs of k per pass: a panel of B stays in L2

// B's columns in panels of kCols, each k pair of a panel one 64-element row:
// panel[p][kk][j][2] = (b[2kk][j], b[2kk+1][j]), zero past n and past k.
std::vector<uint16_t> packB(const uint16_t* b, int64_t ldb, bool b_transposed, int64_t k, int64_t n) {
  const int64_t pairs = (k + 1) / 2, panels = (n + kCols - 1) / kCols;
  std::vector<uint16_t> packed(static_cast<size_t>(panels * pairs * kCols * 2), 0);
  rt::sim::parallelFor(static_cast<size_t>(panels), 1, [&](size_t begin, size_t end) {
    for (auto p = static_cast<int64_t>(begin); p < static_cast<int64_t>(end); ++p) {
      uint16_t* panel = packed.data() + p * pairs * kCols * 2;
      const int64_t width = std::min(kCols, n - p * kCols);
      for (int64_t kk = 0; kk < k; ++kk) {
        uint16_t* row = panel + (kk / 2) * kCols * 2 + (kk % 2);
        for (int64_t j = 0; j < width; ++j) {
          const int64_t col = p * kCols + j;
          row[2 * j] = b_transposed ? b[col * ldb + kk] : b[kk * ldb + col];
        }
      }
    }
  });
  return packed;
}

// A's rows as k pairs, one 32-bit word each: packed[i][kk] = (a[i][2kk], a[i][2kk+1]).
std::vector<uint32_t> packA(const uint16_t* a, int64_t lda, bool a_transposed, int64_t m, int64_t k) {
  const int64_t pairs = (k + 1) / 2;
  std::vector<uint32_t> packed(static_cast<size_t>(m * pairs), 0);
  rt::sim::parallelFor(static_cast<size_t>(m), 64, [&](size_t begin, size_t end) {
    for (auto i = static_cast<int64_t>(begin); i < static_cast<int64_t>(end); ++i) {
      for (int64_t kk = 0; kk < k; ++kk) {
        const uint32_t value = a_transposed ? a[kk * lda + i] : a[i * lda + kk];
        packed[i * pairs + kk / 2] |= value << (16 * (kk % 2));
      }
    }
  });
  return packed;
}

// C[rows, 32] += A[rows, pairs] . B panel[pairs, 32], rows <= kRows, in float32.
template <int64_t rows>
void microKernel(const uint32_t* a, int64_t a_pairs, const uint16_t* panel, int64_t first, int64_t count,
                 float* c, int64_t ldc) {
  __m512 acc[rows][2];
  for (int64_t r = 0; r < rows; ++r) {
    acc[r][0] = _mm512_loadu_ps(c + r * ldc);
    acc[r][1] = _mm512_loadu_ps(c + r * ldc + 16);
  }
  for (int64_t kk = first; kk < first + count; ++kk) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(panel + kk * kCols * 2);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(panel + kk * kCols * 2 + 32);
    for (int64_t r = 0; r < rows; ++r) {
      const __m512bh pair = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r * a_pairs + kk]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], pair, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], pair, b1);
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    _mm512_storeu_ps(c + r * ldc, acc[r][0]);
    _mm512_storeu_ps(c + r * ldc + 16, acc[r][1]);
  }
}

template <int64_t rows>
void rowsOfPanel(const uint32_t* a, int64_t a_pairs, const uint16_t* panel, int64_t first, int64_t count, float* c,
                 int64_t ldc, int64_t m_rows) {
  if constexpr (rows > 1) {
    if (m_rows < rows) return rowsOfPanel<rows - 1>(a, a_pairs, panel, first, count, c, ldc, m_rows);
  }
  microKernel<rows>(a, a_pairs, panel, first, count, c, ldc);
}

}  // namespace

bool hasBf16DotProduct() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
  return has;
}

void gemmBf16(bool a_transposed, bool b_transposed, int64_t m, int64_t n, int64_t k, const uint16_t* a,
              int64_t lda, const uint16_t* b, int64_t ldb, float alpha, float beta, char* c,
              const int64_t c_strides[2]) {
  const int64_t pairs = (k + 1) / 2, panels = (n + kCols - 1) / kCols;
  const std::vector<uint16_t> packed_b = packB(b, ldb, b_transposed, k, n);
  const std::vector<uint32_t> packed_a = packA(a, lda, a_transposed, m, k);
  const int64_t row_blocks = (m + kRows - 1) / kRows;
  // Work items: (panel, row block) tiles of C, panel-major so that a core's run of
  // tiles reuses one panel of B from its cache; each tile is computed over every k
  // into a 32-column scratch (C's last panel may be narrower).
  rt::sim::parallelFor(static_cast<size_t>(row_blocks * panels), 4, [&](size_t begin, size_t end) {
    alignas(64) float tile[kRows * kCols];
    for (auto item = static_cast<int64_t>(begin); item < static_cast<int64_t>(end); ++item) {
      const int64_t p = item / row_blocks, block = item % row_blocks;
      const int64_t row = block * kRows, rows = std::min(kRows, m - row);
      const int64_t col = p * kCols, cols = std::min(kCols, n - col);
      std::memset(tile, 0, sizeof tile);
      const uint16_t* panel = packed_b.data() + p * pairs * kCols * 2;
      for (int64_t first = 0; first < pairs; first += kDepth) {
        rowsOfPanel<kRows>(packed_a.data() + row * pairs, pairs, panel, first, std::min(kDepth, pairs - first), tile,
                           kCols, rows);
      }
      for (int64_t r = 0; r < rows; ++r) {  // C = alpha * tile + beta * C, rounded once
        for (int64_t j = 0; j < cols; ++j) {
          char* at = c + ((row + r) * c_strides[0] + (col + j) * c_strides[1]) * 2;
          const float product = alpha * tile[r * kCols + j];
          store<BFloat16>(at, beta != 0 ? product + beta * load<BFloat16>(at) : product);
        }
      }
    }
  });
}

}  // namespace pto::rt::sim::kernels
