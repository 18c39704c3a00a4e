// How the GEMM libraries and tmatmul's own kernels take an operand.
#pragma once

#include <cstdint>

namespace pto::rt::sim::kernels {

// A row-major matrix with leading dimension ld, or the transpose of one.
template <typename T>
struct GemmMatrix {
  const T* data = nullptr;
  int64_t ld = 1;
  bool transposed = false;
};

}  // namespace pto::rt::sim::kernels
