// tmatmul on the sim device, one GEMM per batch entry and band of output rows, each
// on one of the device's cores (float32/float64 batches of at least one entry per core:
// each core's entries in one call to MKL's batch API; a dot product's slices of k, one
// per core). The library per element type, chosen by measurement
// (Intel(R) Xeon(R) Processor with AMX, 2026-12-03): float32 and float64 in Intel's MKL
// (gemm_mkl.h), float16 widened to float32; float32 there reached 1.01-1.02x torch's
// GFLOP/s on squares of 256-2048 with no other load (benchmarks/bench_ops.py, section 3).
// bfloat16 in oneDNN's brgemm kernels (gemm_onednn.h: AVX-512, AVX512-BF16, AMX) where
// it has them, else in MKL's bfloat16 GEMM, products summed in float32 and rounded once.
// GFLOP/s of one band on one thread (thread CPU time, two runs), measured with oneDNN
// 2.6, the library before 3.2 (cmake/onednn.cmake), which is faster still (whole
// 2048^2 GEMMs on both cores: 2124 -> 2289 GFLOP/s):
//
//   bfloat16 band m x k x n   oneDNN 2.6   MKL
//   128 x 256 x 256            680-720     350
//   512 x 256 x 1024           850-880     310-330
//   512 x 1024 x 1024          600-610     480-490
//   1024 x 768 x 3072          610         420-430
//   1024 x 2048 x 2048         400-440     480-500
//   2048 x 4096 x 4096         390-420     430-460
//
// oneDNN wins or ties on all but the largest squares (MKL by up to 25% there), so it
// takes every bfloat16 GEMM it has a kernel for. Where it has none (below AVX-512), MKL's bfloat16 GEMM is as fast as
// widening to float32 for its sgemm, or faster: capped to AVX2, 64 against 47-48 GFLOP/s
// at 32 x 64 x 64, 86-91 against 78-81 at 128 x 256 x 256, within 3% from
// 512 x 1024 x 1024. Operands whose strides describe a row-major or a transposed matrix
// go to the library as they are; anything else (broadcast rows, odd strides) is packed
// first.
#include <algorithm>
#include <array>
#include <optional>
#include <type_traits>
#include <vector>

#include "element_types.h"
#include "execute.h"
#include "gemm_mkl.h"
#include "gemm_onednn.h"
#include "opcode_dispatch.h"
#include "runtime/sim/sim_parallel.h"

namespace pto::rt::sim::kernels {
namespace {

// Rows of C below which a band is not worth a core of its own.
constexpr int64_t kMinBandRows = 32;

// Element strides of the last two dimensions describe a matrix the libraries can read.
bool libraryLayout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride, int64_t* ld,
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

// A strided matrix of T copied row-major into S (T's values converted to S).
template <typename S, typename T>
void pack(const char* base, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride,
          std::vector<S>& into) {
  into.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      into[i * cols + j] =
          castTo<S>(load<T>(base + (i * row_stride + j * col_stride) * static_cast<int64_t>(sizeof(T))));
    }
  }
}

// The GEMM libraries tmatmul runs in (chosen per dtype in matmulOne).
enum class Library { kMkl, kOneDnn };

// C = alpha * A @ B + beta * C, row-major C of Acc, in `library`; false, having written
// nothing, where the library declined the GEMM (oneDNN without a brgemm kernel for it).
template <Library library, typename S, typename Acc>
bool gemm(GemmMatrix<S> a, GemmMatrix<S> b, int64_t m, int64_t n, int64_t k, double alpha, double beta, Acc* c,
          int64_t ldc) {
  if constexpr (library == Library::kOneDnn) {
    static_assert(std::is_same_v<S, BFloat16> && std::is_same_v<Acc, BFloat16>, "oneDNN runs bfloat16 only");
    return onednnBf16Gemm(m, n, k, a, b, static_cast<float>(alpha), static_cast<float>(beta), c, ldc);
  } else {
    mklGemm(a, b, m, n, k, static_cast<Acc>(alpha), static_cast<Acc>(beta), c, ldc);
    return true;
  }
}

// One batch entry, C[m, n] = alpha * A[m, k] @ B[k, n] + beta * C, in `library`, with
// T's values held as S for it (T itself where S is T: no copies of library layouts) and
// summed into Acc, its output type (float32 for MKL's bfloat16 GEMM; oneDNN's rounds
// its float32 sums to bfloat16 itself), which is then rounded to T once. False, having
// written nothing, where the library declined.
template <Library library, typename S, typename T>
bool matmulAs(const char* a, const int64_t a_strides[2], const char* b, const int64_t b_strides[2], char* c,
              const int64_t c_strides[2], int64_t m, int64_t n, int64_t k, double alpha, double beta) {
  using Acc = std::conditional_t<library == Library::kMkl && std::is_same_v<S, BFloat16>, float, S>;
  constexpr bool native = std::is_same_v<S, T>;
  std::vector<S> a_packed, b_packed;
  GemmMatrix<S> A, B;
  if (native && libraryLayout(m, k, a_strides[0], a_strides[1], &A.ld, &A.transposed)) {
    A.data = reinterpret_cast<const S*>(a);
  } else {
    pack<S, T>(a, m, k, a_strides[0], a_strides[1], a_packed);
    A = {a_packed.data(), std::max<int64_t>(1, k), false};
  }
  if (native && libraryLayout(k, n, b_strides[0], b_strides[1], &B.ld, &B.transposed)) {
    B.data = reinterpret_cast<const S*>(b);
  } else {
    pack<S, T>(b, k, n, b_strides[0], b_strides[1], b_packed);
    B = {b_packed.data(), std::max<int64_t>(1, n), false};
  }
  if constexpr (std::is_same_v<Acc, T>) {
    int64_t ldc = 1;
    bool c_transposed = false;
    if (libraryLayout(m, n, c_strides[0], c_strides[1], &ldc, &c_transposed)) {
      T* c_direct = reinterpret_cast<T*>(c);
      if (!c_transposed) return gemm<library>(A, B, m, n, k, alpha, beta, c_direct, ldc);
      // C stored transposed: C^T = B^T @ A^T
      const GemmMatrix<S> a_transposed{A.data, A.ld, !A.transposed}, b_transposed{B.data, B.ld, !B.transposed};
      return gemm<library>(b_transposed, a_transposed, n, m, k, alpha, beta, c_direct, ldc);
    }
  }
  // The sums in a buffer of this thread's, kept between calls: MKL's bfloat16 GEMMs
  // pass through it every time, and fresh pages cost as much as a small GEMM.
  thread_local std::vector<Acc> c_packed;
  if (beta != 0) pack<Acc, T>(c, m, n, c_strides[0], c_strides[1], c_packed);
  else if (c_packed.size() < static_cast<size_t>(m * n)) c_packed.resize(static_cast<size_t>(m * n));
  if (!gemm<library>(A, B, m, n, k, alpha, beta, c_packed.data(), std::max<int64_t>(1, n))) return false;
  const auto size = static_cast<int64_t>(sizeof(T));
  for (int64_t i = 0; i < m; ++i) {
    const Acc* sums = c_packed.data() + i * n;
    if (c_strides[1] == 1) {  // a row of C in one run: a loop the compiler vectorises
      T* row = reinterpret_cast<T*>(c + i * c_strides[0] * size);
      for (int64_t j = 0; j < n; ++j) row[j] = castTo<T>(widen(sums[j]));
    } else {
      for (int64_t j = 0; j < n; ++j) store<T>(c + (i * c_strides[0] + j * c_strides[1]) * size, widen(sums[j]));
    }
  }
  return true;
}

// An empty sum (k = 0): C = beta * C, and zeros where beta is 0 (C's old values unread).
template <typename T>
void scaleOutput(char* c, const int64_t c_strides[2], int64_t m, int64_t n, double beta) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      char* element = c + (i * c_strides[0] + j * c_strides[1]) * static_cast<int64_t>(sizeof(T));
      store<T>(element, beta == 0 ? ComputeType<T>(0) : static_cast<ComputeType<T>>(beta * load<T>(element)));
    }
  }
}

// One batch entry in the library chosen for T on this CPU: bfloat16 in oneDNN where it
// has a brgemm kernel, else in MKL's bfloat16 GEMM; the rest in MKL, float16 widened.
template <typename T>
void matmulOne(const char* a, const int64_t a_strides[2], const char* b, const int64_t b_strides[2], char* c,
               const int64_t c_strides[2], int64_t m, int64_t n, int64_t k, double alpha, double beta) {
  if (k == 0) return scaleOutput<T>(c, c_strides, m, n, beta);
  if constexpr (std::is_same_v<T, BFloat16>) {
    if (onednnBf16GemmIsFast() &&
        matmulAs<Library::kOneDnn, T, T>(a, a_strides, b, b_strides, c, c_strides, m, n, k, alpha, beta)) {
      return;
    }
  }
  using S = std::conditional_t<std::is_same_v<T, Half>, float, T>;
  matmulAs<Library::kMkl, S, T>(a, a_strides, b, b_strides, c, c_strides, m, n, k, alpha, beta);
}

// How MKL's batch API reads a batch's matrices, the same for every entry.
template <typename T>
struct BatchLayout {
  GemmMatrix<T> a, b;  // their data unused
  int64_t ldc = 1;
};

// The layout of tmatmul's batch entries where the library reads them as they are (C
// row-major); none where one needs packing.
template <typename T>
std::optional<BatchLayout<T>> mklBatchLayout(const isa::Instruction& instruction, int64_t m, int64_t n, int64_t k) {
  const isa::Operand& out = instruction.operands[0];
  const isa::Operand& a = instruction.operands[1];
  const isa::Operand& b = instruction.operands[2];
  const int r = out.rank;
  BatchLayout<T> layout;
  bool c_transposed = false;
  if (!libraryLayout(m, k, a.strides[r - 2], a.strides[r - 1], &layout.a.ld, &layout.a.transposed) ||
      !libraryLayout(k, n, b.strides[r - 2], b.strides[r - 1], &layout.b.ld, &layout.b.transposed) ||
      !libraryLayout(m, n, out.strides[r - 2], out.strides[r - 1], &layout.ldc, &c_transposed) || c_transposed) {
    return std::nullopt;
  }
  return layout;
}

// Batch entries [begin, end) of float32/float64 in one call to MKL's batch API;
// `offsets(batch)` gives an entry's element offsets of out, a and b.
template <typename T, typename Offsets>
void matmulBatchInMkl(const BatchLayout<T>& layout, const isa::Instruction& instruction,
                      std::span<void* const> buffers, int64_t begin, int64_t end, int64_t m, int64_t n, int64_t k,
                      Offsets offsets) {
  const auto count = static_cast<size_t>(end - begin);
  std::vector<const T*> a_entries(count), b_entries(count);
  std::vector<T*> c_entries(count);
  for (size_t i = 0; i < count; ++i) {
    const std::array<int64_t, 3> at = offsets(begin + static_cast<int64_t>(i));
    c_entries[i] = static_cast<T*>(buffers[instruction.operands[0].buffer]) + at[0];
    a_entries[i] = static_cast<const T*>(buffers[instruction.operands[1].buffer]) + at[1];
    b_entries[i] = static_cast<const T*>(buffers[instruction.operands[2].buffer]) + at[2];
  }
  mklGemmBatch(layout.a, a_entries.data(), layout.b, b_entries.data(), m, n, k,
               static_cast<T>(instruction.immediates[0]), static_cast<T>(instruction.immediates[1]), c_entries.data(),
               layout.ldc, static_cast<int64_t>(count));
}

// A product of one element (a dot product, or its batch of one) whose depth is at least
// this many products per core is summed in slices of k, one per core.
constexpr int64_t kMinSliceDepth = 1 << 16;

// c = alpha * a[1, k] @ b[k, 1] + beta * c for float32/float64, each of `slices` cores
// summing a slice of k in MKL, the partial sums added after: one core took twice the
// CPU's time (its dot runs on all threads) for 1M float32.
template <typename T>
void dotInSlices(const isa::Instruction& instruction, std::span<void* const> buffers, int64_t k, int64_t slices) {
  const isa::Operand& out = instruction.operands[0];
  const isa::Operand& a = instruction.operands[1];
  const isa::Operand& b = instruction.operands[2];
  const int r = out.rank;
  const int64_t a_strides[2] = {a.strides[r - 2], a.strides[r - 1]};
  const int64_t b_strides[2] = {b.strides[r - 2], b.strides[r - 1]};
  const int64_t one[2] = {1, 1};
  const int64_t depth = (k + slices - 1) / slices;
  const auto size = static_cast<int64_t>(sizeof(T));
  const auto* a_data = static_cast<const char*>(buffers[a.buffer]);
  const auto* b_data = static_cast<const char*>(buffers[b.buffer]);
  std::vector<T> partial(static_cast<size_t>(slices), T(0));
  rt::sim::parallelFor(static_cast<size_t>(slices), 1, [&](size_t begin, size_t end) {
    for (auto slice = static_cast<int64_t>(begin); slice < static_cast<int64_t>(end); ++slice) {
      const int64_t first = slice * depth, count = std::min(depth, k - first);
      if (count <= 0) continue;
      matmulAs<Library::kMkl, T, T>(a_data + (a.offset + first * a_strides[1]) * size, a_strides,
                                    b_data + (b.offset + first * b_strides[0]) * size, b_strides,
                                    reinterpret_cast<char*>(&partial[static_cast<size_t>(slice)]), one, 1, 1, count,
                                    1.0, 0.0);
    }
  });
  T sum = 0;
  for (const T value : partial) sum += value;
  T* c = static_cast<T*>(buffers[out.buffer]) + out.offset;
  const double alpha = instruction.immediates[0], beta = instruction.immediates[1];
  *c = static_cast<T>(alpha * sum + (beta == 0 ? 0.0 : beta * *c));
}

}  // namespace

static_assert(coversGroup<isa::Group::Matmul, isa::Opcode::kMatmul>(), "executeMatmul runs tmatmul only");

void executeMatmul(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const isa::Operand& out = instruction.operands[0];
  const isa::Operand& a = instruction.operands[1];
  const isa::Operand& b = instruction.operands[2];
  const int r = out.rank;
  const int64_t m = out.shape[r - 2], n = out.shape[r - 1], k = a.shape[r - 1];
  int64_t batches = 1;
  for (int d = 0; d < r - 2; ++d) batches *= out.shape[d];
  if (m == 0 || n == 0 || batches == 0) return;
  // The device's cores take bands of output rows of every batch entry: one library call
  // each, on one thread (small batched GEMMs, as attention's, then run side by side).
  const auto cores = static_cast<int64_t>(rt::sim::parallelism());
  const int64_t bands = batches >= cores ? 1 : std::clamp<int64_t>(m / kMinBandRows, 1, (cores + batches - 1) / batches);
  const int64_t band_rows = (m + bands - 1) / bands;
  // Element offsets of out, a and b at batch entry `batch` (its first row).
  auto offsetsOf = [&](int64_t batch) {
    std::array<int64_t, 3> offsets = {out.offset, a.offset, b.offset};
    for (int64_t rest = batch, d = r - 3; d >= 0; --d) {
      const int64_t index = rest % out.shape[d];
      rest /= out.shape[d];
      offsets[0] += index * out.strides[d];
      offsets[1] += index * a.strides[d];
      offsets[2] += index * b.strides[d];
    }
    return offsets;
  };
  dispatchDType(out.dtype, [&]<typename T>() {
    if constexpr (isa::kFloatTypes.contains(dtypeOf<T>())) {
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        if (batches == 1 && m == 1 && n == 1 && cores > 1 && k >= cores * kMinSliceDepth) {
          return dotInSlices<T>(instruction, buffers, k, cores);
        }
        // Each core's entries of a batch in one library call, pto/CPU time of bmm: 1024
        // GEMMs of 16^3 1.34 -> 0.97-0.99, attention's 64 of 128 x 32 x 128 1.06 -> 0.99-1.03.
        const std::optional<BatchLayout<T>> layout =
            bands == 1 && batches > 1 && k > 0 ? mklBatchLayout<T>(instruction, m, n, k) : std::nullopt;
        if (layout) {
          rt::sim::parallelFor(static_cast<size_t>(batches), 1, [&](size_t begin, size_t end) {
            matmulBatchInMkl(*layout, instruction, buffers, static_cast<int64_t>(begin), static_cast<int64_t>(end), m,
                             n, k, offsetsOf);
          });
          return;
        }
      }
      const auto size = static_cast<int64_t>(sizeof(T));
      rt::sim::parallelFor(static_cast<size_t>(batches * bands), 1, [&](size_t begin, size_t end) {
        for (auto item = static_cast<int64_t>(begin); item < static_cast<int64_t>(end); ++item) {
          const int64_t batch = item / bands, row = (item % bands) * band_rows;
          const int64_t rows = std::min(band_rows, m - row);
          std::array<int64_t, 3> offsets = offsetsOf(batch);
          offsets[0] += row * out.strides[r - 2];
          offsets[1] += row * a.strides[r - 2];
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
