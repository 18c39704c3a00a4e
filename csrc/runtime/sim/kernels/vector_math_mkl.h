// Unary rows through MKL's vector math (VML), the library PyTorch's CPU kernels call
// for them (at::vml, VML_HA), where it is faster than Sleef's vector forms: on one AVX2
// core of an EPYC (Zen 3), float32 erf 1.7 ns an element against 4.2, erfc 2.5 against
// 6.0 (Sleef's scalar erfc, which had run them: 92). Elsewhere Sleef is as fast or
// faster (asin 1.4 against MKL's 2.0, atan 2.0 / 3.3, sinh 2.3 / 8.4, asinh 4.5 / 32,
// log10 1.3 / 1.3), and vector_math-inl.h calls it. MKL is linked in with its symbols
// kept apart from PyTorch's own (cmake/mkl.cmake); it picks its kernels for the CPU
// (MKL_ENABLE_INSTRUCTIONS caps them).
#pragma once

#include <cstdint>
#include <type_traits>

#include "isa/instructions.h"

namespace pto::rt::sim::kernels {

// The instructions MKL computes, each with its VML name (vms<Name>, vmd<Name>).
#define PTO_MKL_UNARY(X) \
  X(kErf, Erf)           \
  X(kErfc, Erfc)

constexpr bool mklComputes(isa::Opcode op) {
#define PTO_MKL_CASE(opcode, name) \
  if (op == isa::Opcode::opcode) return true;
  PTO_MKL_UNARY(PTO_MKL_CASE)
#undef PTO_MKL_CASE
  return false;
}

// Whether a contiguous row of op on T (its computed type) goes to MKL.
template <isa::Opcode op, typename T>
constexpr bool kMklMath = mklComputes(op) && (std::is_same_v<T, float> || std::is_same_v<T, double>);

// The wrappers (vector_math_mkl.cpp), one pair per instruction: out[i] = op(in[i]),
// i in [0, n) (in may be out).
#define PTO_MKL_DECLARE(opcode, name)                          \
  void mkl##name(const float* in, float* out, int64_t n);      \
  void mkl##name(const double* in, double* out, int64_t n);
PTO_MKL_UNARY(PTO_MKL_DECLARE)
#undef PTO_MKL_DECLARE

// out[i] = op(in[i]), i in [0, n), for an op and type kMklMath names.
template <isa::Opcode op, typename T>
void mklUnary(const T* in, T* out, int64_t n) {
  static_assert(kMklMath<op, T>, "MKL computes no row of this instruction on this type");
#define PTO_MKL_CALL(opcode, name) \
  if constexpr (op == isa::Opcode::opcode) mkl##name(in, out, n);
  PTO_MKL_UNARY(PTO_MKL_CALL)
#undef PTO_MKL_CALL
}

}  // namespace pto::rt::sim::kernels
