// A bfloat16 GEMM for CPUs with AVX512-BF16 (see gemm_bf16.cpp).
#pragma once

#include <cstdint>

namespace pto::rt::sim::kernels {

// Whether this CPU has the bfloat16 dot product gemmBf16 needs.
bool hasBf16DotProduct();

// c[m, n] = alpha * a[m, k] @ b[k, n] + beta * c (beta 0: c's old values ignored), all
// bfloat16, products summed in float32 and rounded once. a and b are row-major with
// leading dimensions lda/ldb, or transposed; c is any strided matrix (element strides).
void gemmBf16(bool a_transposed, bool b_transposed, int64_t m, int64_t n, int64_t k, const uint16_t* a,
              int64_t lda, const uint16_t* b, int64_t ldb, float alpha, float beta, char* c,
              const int64_t c_strides[2]);

}  // namespace pto::rt::sim::kernels
