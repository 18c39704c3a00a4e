// tmatmul's bfloat16 GEMM through oneDNN (libdnnl-dev), which picks its kernels for
// the CPU it runs on at run time (AVX-512, AVX512-BF16, AMX; ONEDNN_MAX_CPU_ISA caps
// them).
#pragma once

#include <cstdint>

#include "gemm_matrix.h"
#include "half.h"

namespace pto::rt::sim::kernels {

// Whether oneDNN has a brgemm kernel for bfloat16 on this CPU (they need AVX-512: on
// AVX2 hosts MKL's bfloat16 GEMM takes them, matmul.cpp).
bool onednnBf16GemmIsFast();

// c[m, n] = alpha * a[m, k] @ b[k, n] + beta * c on the calling thread (beta 0: c's old
// values are not read), all bfloat16, c row-major with leading dimension ldc; products
// are summed in float32 and rounded once. m, n, k > 0. Returns false, having
// written nothing, when oneDNN has no brgemm kernel for this shape and layout.
bool onednnBf16Gemm(int64_t m, int64_t n, int64_t k, GemmMatrix<BFloat16> a, GemmMatrix<BFloat16> b, float alpha,
                    float beta, BFloat16* c, int64_t ldc);

}  // namespace pto::rt::sim::kernels
