// erf and erfc of contiguous float32/float64 rows through MKL's vector math (VML),
// the library PyTorch's CPU kernels call for them (at::vml, VML_HA): on one AVX2 core
// of an EPYC (Zen 3), float32 erf 1.7 ns an element against 4.2 for Sleef's vector
// erf, erfc 2.5 against 6.0 (Sleef's vector erfc) and 92 (its scalar one). The other
// transcendental rows stay on Sleef and the inline forms of vector_math-inl.h, as fast
// or faster there. MKL is linked in with its symbols kept apart from PyTorch's own
// (cmake/mkl.cmake); it picks its kernels for the CPU (MKL_ENABLE_INSTRUCTIONS caps them).
#pragma once

#include <cstdint>
#include <type_traits>

#include "isa/instructions.h"

namespace pto::rt::sim::kernels {

void mklErf(const float* in, float* out, int64_t n);
void mklErf(const double* in, double* out, int64_t n);
void mklErfc(const float* in, float* out, int64_t n);
void mklErfc(const double* in, double* out, int64_t n);

// Whether a contiguous row of op on T goes to MKL.
template <isa::Opcode op, typename T>
constexpr bool kMklMath = (op == isa::Opcode::kErf || op == isa::Opcode::kErfc) &&
                          (std::is_same_v<T, float> || std::is_same_v<T, double>);

template <isa::Opcode op, typename T>
void mklMathRow(T* out, const T* in, int64_t n) {
  static_assert(kMklMath<op, T>);
  if constexpr (op == isa::Opcode::kErf) mklErf(in, out, n);
  else mklErfc(in, out, n);
}

}  // namespace pto::rt::sim::kernels
