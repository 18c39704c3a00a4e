// Vectorised float32/float64 transcendental functions and the elementwise rows that
// use them, per Highway target: Sleef's vector function for the target (AVX-512,
// AVX2, SSE4, NEON), its scalar one lane by lane on the baseline target. Included
// by a file in the HWY_TARGET_INCLUDE pattern (vector_target.h), once per target,
// hence the toggle guard instead of #pragma once.
#if defined(PTO_SIM_KERNELS_VECTOR_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PTO_SIM_KERNELS_VECTOR_MATH_INL_H_
#undef PTO_SIM_KERNELS_VECTOR_MATH_INL_H_
#else
#define PTO_SIM_KERNELS_VECTOR_MATH_INL_H_
#endif

#include <hwy/cache_control.h>
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "element_types.h"
#include "elementwise_ops.h"
#include "isa/instructions.h"
#include "sleef_functions.h"
#include "vector_widen-inl.h"

// Sleef's name for `function` on a whole vector of this target, if it has one.
#undef PTO_SLEEF_F32
#undef PTO_SLEEF_F64
// `ulp` is Sleef's accuracy class: u10 (1.0 ulp) or u35 (3.5 ulp).
#if HWY_TARGET == HWY_AVX3
#define PTO_SLEEF_F32(function, ulp) Sleef_##function##f16_##ulp##avx512f
#define PTO_SLEEF_F64(function, ulp) Sleef_##function##d8_##ulp##avx512f
#elif HWY_TARGET == HWY_AVX2
#define PTO_SLEEF_F32(function, ulp) Sleef_##function##f8_##ulp##avx2
#define PTO_SLEEF_F64(function, ulp) Sleef_##function##d4_##ulp##avx2
#elif HWY_TARGET == HWY_SSE4
#define PTO_SLEEF_F32(function, ulp) Sleef_##function##f4_##ulp##sse4
#define PTO_SLEEF_F64(function, ulp) Sleef_##function##d2_##ulp##sse4
#elif HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
#define PTO_SLEEF_F32(function, ulp) Sleef_##function##f4_##ulp##advsimd
#define PTO_SLEEF_F64(function, ulp) Sleef_##function##d2_##ulp##advsimd
#endif

// Applies Sleef's `function` to vector x (and y): one call on a target with a
// vector variant, else its scalar variant lane by lane.
#undef PTO_SLEEF_CALL
#undef PTO_SLEEF_RAW
#ifdef PTO_SLEEF_F32
#define PTO_SLEEF_CALL(function, ulp, d, ...)                     \
  [&] {                                                           \
    using Result = hn::Vec<decltype(d)>;                          \
    if constexpr (sizeof(hn::TFromD<decltype(d)>) == 4) {         \
      return Result{PTO_SLEEF_F32(function, ulp)(__VA_ARGS__)};   \
    } else {                                                      \
      return Result{PTO_SLEEF_F64(function, ulp)(__VA_ARGS__)};   \
    }                                                             \
  }()
#define PTO_SLEEF_RAW(v) (v).raw
#else
#define PTO_SLEEF_CALL(function, ulp, d, ...) \
  laneByLane(d, Sleef_##function##f_##ulp, Sleef_##function##_##ulp, __VA_ARGS__)
#define PTO_SLEEF_RAW(v) (v)
#endif

HWY_BEFORE_NAMESPACE();
namespace pto::rt::sim::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// f on each lane of `args` (one or two vectors), lane by lane.
template <class D, typename F, typename... V>
hn::Vec<D> lanewise(D d, F f, V... args) {
  using T = hn::TFromD<D>;
  constexpr size_t kLanes = hn::MaxLanes(D());
  HWY_ALIGN T lanes[sizeof...(V)][kLanes];
  size_t k = 0;
  ((hn::Store(args, d, lanes[k++])), ...);
  HWY_ALIGN T result[kLanes];
  for (size_t i = 0; i < hn::Lanes(d); ++i) {
    if constexpr (sizeof...(V) == 1) result[i] = f(lanes[0][i]);
    else result[i] = f(lanes[0][i], lanes[1][i]);
  }
  return hn::Load(d, result);
}

#ifndef PTO_SLEEF_F32
// The scalar Sleef function of the lanes' type (f32 or f64) on each lane of `args`.
template <class D, typename F32, typename F64, typename... V>
hn::Vec<D> laneByLane(D d, F32 f32, F64 f64, V... args) {
  if constexpr (sizeof(hn::TFromD<D>) == 4) return lanewise(d, f32, args...);
  else return lanewise(d, f64, args...);
}
#endif

using isa::Opcode;

// Whether the op has a vectorised form here (the others stay plain loops).
template <Opcode op, typename T>
constexpr bool hasVectorMath() {
  using C = ComputeType<T>;
  if constexpr (!std::is_floating_point_v<C>) return false;
  else return op == Opcode::kExp || op == Opcode::kExp2 || op == Opcode::kExpm1 || op == Opcode::kLog ||
              op == Opcode::kLog2 || op == Opcode::kLog1p || op == Opcode::kSin || op == Opcode::kCos ||
              op == Opcode::kTan || op == Opcode::kTanh || op == Opcode::kLog10 || op == Opcode::kAsin ||
              op == Opcode::kAcos || op == Opcode::kAtan || op == Opcode::kSinh || op == Opcode::kCosh ||
              op == Opcode::kAsinh || op == Opcode::kAcosh || op == Opcode::kAtanh || op == Opcode::kLgamma ||
              op == Opcode::kSigmoid ||
              op == Opcode::kSilu || op == Opcode::kGelu || op == Opcode::kGeluTanh || op == Opcode::kPow ||
              op == Opcode::kGeluGrad || op == Opcode::kGeluTanhGrad || op == Opcode::kSiluGrad ||
              op == Opcode::kHypot || op == Opcode::kElu || op == Opcode::kSoftplus || op == Opcode::kLogSigmoid ||
              op == Opcode::kLogAddExp || op == Opcode::kLogAddExp2 || op == Opcode::kLogSigmoidGrad ||
              op == Opcode::kEluGrad || op == Opcode::kSoftplusGrad || op == Opcode::kMish || op == Opcode::kMishGrad ||
              op == Opcode::kFmod ||
              // float16/bfloat16 round each step of these to their own type (divisionOp)
              ((op == Opcode::kRemainder || op == Opcode::kFloorDiv) && std::is_same_v<C, T>);
}

// f (libm's) on every lane of `args`, taken where `lanes` holds, `result` elsewhere.
template <class D, class M, typename F, class... V>
hn::Vec<D> libmLanes(D d, M lanes, hn::Vec<D> result, F f, V... args) {
  return hn::IfThenElse(lanes, lanewise(d, f, args...), result);
}

// float32 exp inline, Sleef's algorithm (and its 1-ulp bound): x = q ln 2 + r with
// |r| <= ln 2 / 2 (ln 2 in two parts, so q ln 2 is exact), e^r by its degree-7 fit,
// times 2^q. Inline rather than a call into Debian's Sleef, and with one scaling
// where every lane has |x| <= 87 (2^q a normal float): 1.08 against 1.70 ns per
// element on one AVX2 core (an EPYC), where torch's own takes 1.48. Lanes beyond take
// the general path: x clamped to [-104, 100] (below, the result rounds to 0; above,
// 2^q overflows to infinity), 2^q in two factors, subnormal results from their bits
// (below), NaN kept.
// Adding 1.5 * 2^23 rounds x / ln 2 to the integer q, which lands in the sum's low bits.
// K vectors in place, each step taken for all K before the next and one range check
// for the group: one exp is a chain of ~15 dependent instructions, which the core
// overlaps only across vectors whose steps lie side by side (1M float32 on a 2-core
// AVX-512 Xeon, against one exp and one range check at a time: gelu 249 -> 232 us,
// gelu_tanh 170 -> 150, sigmoid 135 -> 126).
template <size_t K, class D, class V = hn::Vec<D>>
HWY_INLINE void inlineExpsF32(D d, V* x) {
  const hn::RebindToSigned<D> di;
  const V magic = hn::Set(d, 12582912.0f);
  auto within = hn::Le(hn::Abs(x[0]), hn::Set(d, 87.0f));
  for (size_t j = 1; j < K; ++j) within = hn::And(within, hn::Le(hn::Abs(x[j]), hn::Set(d, 87.0f)));
  const bool in_range = hn::AllTrue(d, within);
  if (!in_range) {  // a masked row's run of -inf (or -1e4): every exp rounds to 0
    auto vanishing = hn::Lt(x[0], hn::Set(d, -104.0f));
    for (size_t j = 1; j < K; ++j) vanishing = hn::And(vanishing, hn::Lt(x[j], hn::Set(d, -104.0f)));
    if (hn::AllTrue(d, vanishing)) {
      for (size_t j = 0; j < K; ++j) x[j] = hn::Zero(d);
      return;
    }
  }
  V clamped[K], shifted[K], r[K], p[K];
  for (size_t j = 0; j < K; ++j) {
    clamped[j] = in_range ? x[j] : hn::Max(hn::Set(d, -104.0f), hn::Min(hn::Set(d, 100.0f), x[j]));
  }
  for (size_t j = 0; j < K; ++j) shifted[j] = hn::MulAdd(clamped[j], hn::Set(d, 1.44269504088896341f), magic);
  for (size_t j = 0; j < K; ++j) {
    const V q = hn::Sub(shifted[j], magic);
    r[j] = hn::MulAdd(q, hn::Set(d, -1.428606765330187045e-6f), hn::MulAdd(q, hn::Set(d, -0.693145751953125f), clamped[j]));
  }
  static constexpr float kFit[] = {0.00139304355252534151077271f, 0.00833336077630519866943359f,
                                   0.0416664853692054748535156f, 0.166666671633720397949219f, 0.5f};
  for (size_t j = 0; j < K; ++j) p[j] = hn::Set(d, 0.000198527617612853646278381f);
  for (const float c : kFit) {
    for (size_t j = 0; j < K; ++j) p[j] = hn::MulAdd(p[j], r[j], hn::Set(d, c));
  }
  for (size_t j = 0; j < K; ++j) p[j] = hn::Add(hn::MulAdd(p[j], hn::Mul(r[j], r[j]), r[j]), hn::Set(d, 1.0f));
  if (in_range) {
    for (size_t j = 0; j < K; ++j) {
      const auto biased = hn::Sub(hn::BitCast(di, shifted[j]), hn::Set(di, 0x4B400000 - 127));  // q + 127
      x[j] = hn::Mul(p[j], hn::BitCast(d, hn::ShiftLeft<23>(biased)));
    }
    return;
  }
  // Where the result may be subnormal or 0 (q <= -126; p is within [1/sqrt 2, sqrt 2]),
  // p 2^(q + 149) rounded to an integer is its bits (2^-149 units, the spacing up to
  // 2^-125): the one rounding that the product into the subnormals makes, without a
  // multiply whose underflow costs a microcode assist per element on Intel cores (1M
  // exps of -inf took 1.3 ms against 0.14 ms; masked softmax rows 3x the CPU's time).
  // The two factors take the other lanes' q no lower than -125 (a product of theirs
  // that underflowed would cost the same assist), the bits the subnormal lanes' q no
  // higher than -126.
  const auto bias = hn::Set(di, 127);
  for (size_t j = 0; j < K; ++j) {
    const auto e = hn::Sub(hn::BitCast(di, shifted[j]), hn::BitCast(di, magic));
    const auto normal_e = hn::Max(e, hn::Set(di, -125));
    const auto half = hn::ShiftRight<1>(normal_e);
    const V scale1 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(half, bias)));
    const V scale2 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::Sub(normal_e, half), bias)));
    const V normal = hn::Mul(hn::Mul(p[j], scale1), scale2);
    const auto subnormal_e = hn::Min(e, hn::Set(di, -126));
    const V to_units = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(subnormal_e, hn::Set(di, 149 + 127))));
    const V subnormal = hn::BitCast(d, hn::NearestInt(hn::Mul(p[j], to_units)));
    const V result = hn::IfThenElse(hn::RebindMask(d, hn::Lt(e, hn::Set(di, -125))), subnormal, normal);
    x[j] = hn::IfThenElse(hn::IsNaN(x[j]), x[j], result);
  }
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE V inlineExpF32(D d, V x) {
  inlineExpsF32<1>(d, &x);
  return x;
}

// float64: Sleef's. Debian's Sleef exp and pow (double) return infinity from
// 709.78271114955742909 on, short of log(DBL_MAX) = 709.782712893384 below which the
// result is finite (Sleef issue 523): libm recomputes those lanes.
template <class D, class V = hn::Vec<D>>
V vectorExp(D d, V x) {
  if constexpr (sizeof(hn::TFromD<D>) == 4) return inlineExpF32(d, x);
  const V result = PTO_SLEEF_CALL(exp, u10, d, PTO_SLEEF_RAW(x));
  if constexpr (sizeof(hn::TFromD<D>) == 8) {
    const auto short_of_max = hn::And(hn::IsInf(result), hn::Le(x, hn::Set(d, 709.782712893384)));
    if (!hn::AllFalse(d, short_of_max)) return libmLanes(d, short_of_max, result, [](double a) { return std::exp(a); }, x);
  }
  return result;
}

// vectorExp of K vectors in place, float32's grouped (inlineExpsF32).
template <size_t K, class D, class V = hn::Vec<D>>
HWY_INLINE void vectorExps(D d, V* x) {
  if constexpr (sizeof(hn::TFromD<D>) == 4) {
    inlineExpsF32<K>(d, x);
  } else {
    for (size_t j = 0; j < K; ++j) x[j] = vectorExp(d, x[j]);
  }
}

// Sleef's 3.5-ulp tanh: 15 ms against 57 ms for the 1-ulp one on 16M float32 (one
// AVX-512 core), well inside PyTorch's float32 tolerance.
template <class D, class V = hn::Vec<D>>
V vectorTanh(D d, V x) { return PTO_SLEEF_CALL(tanh, u35, d, PTO_SLEEF_RAW(x)); }

// The lanes where |x| < 2^-24 (float; 2^-53 double): there log1p(x) and expm1(x),
// x (1 -+ x/2 + ...), round to x itself (x/2 is under half an ulp of x).
template <class D, class V = hn::Vec<D>>
auto tinyLanes(D d, V x) {
  using T = hn::TFromD<D>;
  return hn::Lt(hn::Abs(x), hn::Set(d, static_cast<T>(sizeof(T) == 4 ? 0x1p-24 : 0x1p-53)));
}

// Sleef's log1p returns infinity above 1e38 (float) and 1e307 (double): Sleef issue
// 473, fixed after the Debian release linked here. log(x) is log1p(x) there to the
// last bit (1 / x lies far below half an ulp of it).
template <class D, class V = hn::Vec<D>>
V vectorLog1p(D d, V x) {
  using T = hn::TFromD<D>;
  // Sleef's log1p forms subnormal intermediates from tiny inputs, a microcode assist per
  // element on Intel cores (1M float32 of 1e-13 or 1e-20: 3.0-5.4 ms against 0.33; the
  // CPU's, Sleef's too, the same; softplus, log_sigmoid and mish of x below -30 through
  // it). Where log1p(x) rounds to x itself (tinyLanes), those lanes take x, Sleef
  // given 0 in their place.
  const auto tiny = tinyLanes(d, x);
  const bool any_tiny = !hn::AllFalse(d, tiny);
  const V sleef_input = any_tiny ? hn::IfThenZeroElse(tiny, x) : x;
  V result = PTO_SLEEF_CALL(log1p, u10, d, PTO_SLEEF_RAW(sleef_input));
  if (any_tiny) result = hn::IfThenElse(tiny, x, result);
  const auto huge = hn::Gt(x, hn::Set(d, static_cast<T>(sizeof(T) == 4 ? 1e38 : 1e307)));
  if (hn::AllFalse(d, huge)) return result;
  return hn::IfThenElse(huge, PTO_SLEEF_CALL(log, u10, d, PTO_SLEEF_RAW(x)), result);
}

// expm1 as Sleef's, but where Sleef's steps go subnormal: far below 0 (x < -18 for
// float, -38 for double) the result rounds to -1, and tiny |x| (tinyLanes) to x
// itself, which those lanes take, Sleef given 0 in their place (1M float32 expm1 of
// -95: 1.9 ms against 0.5; elu far below 0 through it).
template <class D, class V = hn::Vec<D>>
V vectorExpm1(D d, V x) {
  using T = hn::TFromD<D>;
  const auto tiny = tinyLanes(d, x);
  const auto saturated = hn::Lt(x, hn::Set(d, static_cast<T>(sizeof(T) == 4 ? -18 : -38)));
  const auto shortcut = hn::Or(tiny, saturated);
  if (hn::AllFalse(d, shortcut)) return PTO_SLEEF_CALL(expm1, u10, d, PTO_SLEEF_RAW(x));
  const V result = PTO_SLEEF_CALL(expm1, u10, d, PTO_SLEEF_RAW(hn::IfThenZeroElse(shortcut, x)));
  return hn::IfThenElse(tiny, x, hn::IfThenElse(saturated, hn::Set(d, T(-1)), result));
}

// Sleef's asinh and acosh return infinity once x^2 overflows (|x| from 1.8e19 for
// float, 1.3e154 for double) and its sinh and cosh from |x| = 88.7 (float) and 709.8
// (double) on, short of where the results overflow (89.4, 710.5): op's scalar form
// (libm's) recomputes the lanes of |x| past the limit for T, inside those bounds
// (infinities too; NaN stays Sleef's).
template <Opcode op, class D, class V = hn::Vec<D>>
V libmPast(D d, V x, V sleef, double float_limit, double double_limit) {
  using T = hn::TFromD<D>;
  const auto past = hn::Gt(hn::Abs(x), hn::Set(d, static_cast<T>(sizeof(T) == 4 ? float_limit : double_limit)));
  if (hn::AllFalse(d, past)) return sleef;
  return libmLanes(d, past, sleef, [](T a) { return unaryOp<op, T>(a); }, x);
}

// sinh and cosh: Sleef's, libm's past Sleef's limit (libmPast), and the overflow itself
// beyond ln(2 max) (89.416 float, 710.476 double), where Sleef's steps take e^-|x| into
// the subnormals, a microcode assist per element on Intel cores, and libm's scalar calls
// are no faster (1M float32 sinh of -95 / -200: 3.5 / 4.9 ms against 0.6).
template <Opcode op, class D, class V = hn::Vec<D>>
V vectorSinhCosh(D d, V x) {
  using T = hn::TFromD<D>;
  const auto beyond = hn::Gt(hn::Abs(x), hn::Set(d, static_cast<T>(sizeof(T) == 4 ? 89.5 : 710.5)));
  const bool any_beyond = !hn::AllFalse(d, beyond);
  const V input = any_beyond ? hn::IfThenZeroElse(beyond, x) : x;
  const V sleef = op == Opcode::kSinh ? PTO_SLEEF_CALL(sinh, u10, d, PTO_SLEEF_RAW(input))
                                      : PTO_SLEEF_CALL(cosh, u10, d, PTO_SLEEF_RAW(input));
  const V result = libmPast<op>(d, input, sleef, 88, 709);
  if (!any_beyond) return result;
  const V infinity = hn::Inf(d);
  return hn::IfThenElse(beyond, op == Opcode::kSinh ? hn::CopySign(infinity, x) : infinity, result);
}

// The standard normal CDF, 0.5 * (1 + erf(x / sqrt 2)), of K vectors at once, for gelu
// and its gradient: erfc(|x| / sqrt 2) / 2 below 0 and 1 minus it above, so both tails
// keep their relative accuracy. erfc(a) = t exp(-a^2 + P(t)), t = 1 / (1 + a/2),
// Numerical Recipes' Chebyshev fit, relative error below 1.2e-7; P by Estrin's scheme
// (within the fit's bound in float either way) and exp inline (inlineExpF32, 1 ulp).
// Hand-written because it is faster than Sleef's erf; each step is taken for all K
// vectors before the next because one vector's steps form a chain of ~40 dependent
// instructions, which out-of-order cores overlap across vectors only when they lie
// side by side: 1M float32 gelu on one AVX2 core (an EPYC), 6.3 ms one vector at a time
// with Horner's P and Sleef's exp, 3.3 ms four at a time with Estrin's and Highway's,
// 2.5 ms with inlineExpF32. On a 2-core AVX-512 Xeon (1M float32), Horner's P four at a
// time took 248 us against Estrin's 232, and eight vectors at a time no less than four.
// float64 needs more than the fit's 1.2e-7: Sleef's erfc (1.5 ulp) of -x / sqrt 2, halved.
template <size_t K, class D, class V = hn::Vec<D>>
void normalCdfs(D d, const V* x, V* cdf) {
  if constexpr (sizeof(hn::TFromD<D>) == 8) {
    for (size_t j = 0; j < K; ++j) {
      const V scaled = hn::Mul(x[j], hn::Set(d, -0.70710678118654752440));
      cdf[j] = hn::Mul(hn::Set(d, 0.5), PTO_SLEEF_CALL(erfc, u15, d, PTO_SLEEF_RAW(scaled)));
    }
  } else {
    // P(t) = sum of kFit[k] t^k, less ln 2 in the constant term: the halving folded into
    // the exp (the sum rounds to float within 1e-10).
    static constexpr float kFit[] = {-1.26551223f - 0.69314718f, 1.00002368f, 0.37409196f, 0.09678418f, -0.18628806f,
                                     0.27886807f,  -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};
    const auto c = [d](size_t k) { return hn::Set(d, kFit[k]); };
    V a[K], t[K], exponent[K];
    for (size_t j = 0; j < K; ++j) a[j] = hn::Abs(hn::Mul(x[j], hn::Set(d, 0.70710678118654752440f)));
    for (size_t j = 0; j < K; ++j) t[j] = hn::Div(hn::Set(d, 1), hn::MulAdd(hn::Set(d, 0.5f), a[j], hn::Set(d, 1)));
    for (size_t j = 0; j < K; ++j) {
      const V t2 = hn::Mul(t[j], t[j]), t4 = hn::Mul(t2, t2), t8 = hn::Mul(t4, t4);
      const V low = hn::MulAdd(hn::MulAdd(c(3), t[j], c(2)), t2, hn::MulAdd(c(1), t[j], c(0)));
      const V high = hn::MulAdd(hn::MulAdd(c(7), t[j], c(6)), t2, hn::MulAdd(c(5), t[j], c(4)));
      const V p = hn::MulAdd(hn::MulAdd(c(9), t[j], c(8)), t8, hn::MulAdd(high, t4, low));
      exponent[j] = hn::NegMulAdd(a[j], a[j], p);
    }
    inlineExpsF32<K>(d, exponent);
    for (size_t j = 0; j < K; ++j) {
      const V tail = hn::Mul(t[j], exponent[j]);
      cdf[j] = hn::IfThenElse(hn::Lt(x[j], hn::Zero(d)), tail, hn::Sub(hn::Set(d, 1), tail));
    }
  }
}

// gelu, x Phi(x), of K vectors. float32's Phi is 1/2 + x P(x^2) / Q(x^2) for |x| below
// 4 sqrt 2, a rational fit of erf(x / sqrt 2) / 2 (degrees 5 and 5, Q(0) = 1, within
// 1.1e-8 in float64: scripts/fit_gelu_erf.py), and Phi's step (0 or 1, within 7.7e-9)
// beyond: |error| <= 4u |x| (u = 2^-24), the accuracy class of torch's own formula
// (6.3u |x| measured), ~20 instructions a vector where normalCdfs' tail-exact form takes
// ~40. That form's relative accuracy in the left tail (gelu(-5) within 3 ulp) is what
// goes; gelu's gradient keeps it.
template <size_t K, class D, class V = hn::Vec<D>>
void gelus(D d, const V* x, V* out) {
  if constexpr (sizeof(hn::TFromD<D>) == 8) {
    normalCdfs<K>(d, x, out);
    for (size_t j = 0; j < K; ++j) out[j] = hn::Mul(x[j], out[j]);
    return;
  }
  static constexpr float kNumerator[] = {0.398942202f, 0.0346922465f, 0.00472590234f,
                                         0.000176937887f, 6.36488176e-06f, 2.18190177e-08f};
  static constexpr float kDenominator[] = {1.0f, 0.253626138f, 0.0291191079f,
                                           0.00193055288f, 7.60225448e-05f, 1.17127809e-06f};
  V square[K], numerator[K], denominator[K];
  for (size_t j = 0; j < K; ++j) {
    square[j] = hn::Mul(x[j], x[j]);
    numerator[j] = hn::Set(d, kNumerator[5]);
    denominator[j] = hn::Set(d, kDenominator[5]);
  }
  for (size_t k = 5; k-- > 0;) {
    for (size_t j = 0; j < K; ++j) {
      numerator[j] = hn::MulAdd(numerator[j], square[j], hn::Set(d, kNumerator[k]));
      denominator[j] = hn::MulAdd(denominator[j], square[j], hn::Set(d, kDenominator[k]));
    }
  }
  for (size_t j = 0; j < K; ++j) {
    const V cdf = hn::MulAdd(x[j], hn::Div(numerator[j], denominator[j]), hn::Set(d, 0.5f));
    const V step = hn::IfNegativeThenElse(x[j], hn::Zero(d), hn::Set(d, 1.0f));
    const auto fitted = hn::Lt(hn::Abs(x[j]), hn::Set(d, 5.65685424949238f));
    out[j] = hn::Mul(x[j], hn::IfThenElse(fitted, cdf, step));
  }
}

// k * (x + c x^3), the argument of gelu_tanh's tanh.
template <class D, class V = hn::Vec<D>>
V geluTanhInner(D d, V x) {
  const V cube = hn::Mul(hn::Mul(hn::Mul(hn::Set(d, 0.044715), x), x), x);
  return hn::Mul(hn::Set(d, 0.79788456080286535588), hn::Add(x, cube));
}

// mish's tanh(log1p(exp(x))) with vectorTanh's 3.5-ulp tanh: with the CPU's 1-ulp one
// (the only step apart from its vector loop) tmish took the CPU's own time (4M float32
// on the 2-core AVX2 EPYC: 15.3 ms, against 10.6-11.0 with this one); the result stays
// within 12u (the GoogleTest reference's bound), inside PyTorch's float32 tolerance.
template <class D, class V = hn::Vec<D>>
V tanhSoftplus(D d, V x) {
  return vectorTanh(d, vectorLog1p(d, vectorExp(d, x)));
}

// The activations built on one exp, of K vectors: exp itself, sigmoid 1 / (1 + e^-x),
// silu x / (1 + e^-x) and gelu_tanh. gelu_tanh's x (1 + tanh(v)) / 2 is taken as
// x / (1 + exp(-2 v)): the same function, without 1 + tanh's cancellation as tanh(v)
// nears -1, and with the inline exp rather than a call into Sleef's tanh: 16M float32
// on the 2-core AVX2 EPYC 29.4 -> 18.9 ms (torch's: 61.6).
template <Opcode op>
constexpr bool kIsExpActivation =
    op == Opcode::kExp || op == Opcode::kSigmoid || op == Opcode::kSilu || op == Opcode::kGeluTanh;

template <Opcode op, size_t K, class D, class V = hn::Vec<D>>
HWY_INLINE void expActivations(D d, const V* x, V* out) {
  for (size_t j = 0; j < K; ++j) {
    if constexpr (op == Opcode::kExp) out[j] = x[j];
    else if constexpr (op == Opcode::kGeluTanh) out[j] = hn::Mul(hn::Set(d, -2), geluTanhInner(d, x[j]));
    else out[j] = hn::Neg(x[j]);
  }
  vectorExps<K>(d, out);
  if constexpr (op == Opcode::kExp) return;
  const V one = hn::Set(d, 1);
  for (size_t j = 0; j < K; ++j) out[j] = hn::Div(op == Opcode::kSigmoid ? one : x[j], hn::Add(one, out[j]));
}

// The unary ops hasVectorMath names, with the formulas of elementwise_ops.h and the
// instruction's immediates.
template <Opcode op, class D, class V = hn::Vec<D>>
V unaryMath(D d, V x, const Immediates<hn::TFromD<D>>& immediates) {
  if constexpr (kIsExpActivation<op>) {
    V result;
    expActivations<op, 1>(d, &x, &result);
    return result;
  }
  else if constexpr (op == Opcode::kExp2) return PTO_SLEEF_CALL(exp2, u10, d, PTO_SLEEF_RAW(x));
  else if constexpr (op == Opcode::kExpm1) return vectorExpm1(d, x);
  else if constexpr (op == Opcode::kLog) return PTO_SLEEF_CALL(log, u10, d, PTO_SLEEF_RAW(x));
  else if constexpr (op == Opcode::kLog2) return PTO_SLEEF_CALL(log2, u10, d, PTO_SLEEF_RAW(x));
  else if constexpr (op == Opcode::kLog1p) return vectorLog1p(d, x);
  else if constexpr (op == Opcode::kSin) return PTO_SLEEF_CALL(sin, u10, d, PTO_SLEEF_RAW(x));
  else if constexpr (op == Opcode::kCos) return PTO_SLEEF_CALL(cos, u10, d, PTO_SLEEF_RAW(x));
  else if constexpr (op == Opcode::kTan) return PTO_SLEEF_CALL(tan, u10, d, PTO_SLEEF_RAW(x));
  else if constexpr (op == Opcode::kTanh) return vectorTanh(d, x);
  else if constexpr (op == Opcode::kLog10) return PTO_SLEEF_CALL(log10, u10, d, PTO_SLEEF_RAW(x));
  else if constexpr (op == Opcode::kAsin) return PTO_SLEEF_CALL(asin, u10, d, PTO_SLEEF_RAW(x));
  else if constexpr (op == Opcode::kAcos) return PTO_SLEEF_CALL(acos, u10, d, PTO_SLEEF_RAW(x));
  else if constexpr (op == Opcode::kAtan) return PTO_SLEEF_CALL(atan, u10, d, PTO_SLEEF_RAW(x));
  else if constexpr (op == Opcode::kSinh || op == Opcode::kCosh) return vectorSinhCosh<op>(d, x);
  else if constexpr (op == Opcode::kAsinh) {
    return libmPast<op>(d, x, PTO_SLEEF_CALL(asinh, u10, d, PTO_SLEEF_RAW(x)), 1e19, 1e154);
  }
  else if constexpr (op == Opcode::kAcosh) {
    return libmPast<op>(d, x, PTO_SLEEF_CALL(acosh, u10, d, PTO_SLEEF_RAW(x)), 1e19, 1e154);
  }
  else if constexpr (op == Opcode::kAtanh) return PTO_SLEEF_CALL(atanh, u10, d, PTO_SLEEF_RAW(x));
  else if constexpr (op == Opcode::kLgamma) return PTO_SLEEF_CALL(lgamma, u10, d, PTO_SLEEF_RAW(x));
  else if constexpr (op == Opcode::kGelu) {
    V result;
    gelus<1>(d, &x, &result);
    return result;
  }
  else if constexpr (op == Opcode::kElu) {
    // Zeros take scale x, keeping their sign whatever alpha's, as on the CPU.
    const V scaled = hn::Mul(x, hn::Set(d, immediates[1]));
    const auto negative = hn::Lt(x, hn::Zero(d));
    if (hn::AllFalse(d, negative)) return scaled;  // no expm1 to take, as the CPU kernel skips it
    const V below = vectorExpm1(d, hn::Mul(x, hn::Set(d, immediates[2])));
    return hn::IfThenElse(negative, hn::Mul(below, hn::Set(d, immediates[0] * immediates[1])), scaled);
  } else if constexpr (op == Opcode::kSoftplus) {
    const V beta = hn::Set(d, immediates[0]), scaled = hn::Mul(x, beta);
    const V smooth = hn::Div(vectorLog1p(d, vectorExp(d, scaled)), beta);
    return hn::IfThenElse(hn::Gt(scaled, hn::Set(d, immediates[1])), x, smooth);
  } else if constexpr (op == Opcode::kMish) {
    return hn::Mul(x, tanhSoftplus(d, x));
  } else if constexpr (op == Opcode::kLogSigmoid) {
    // min(x, 0) with a NaN x taken as 0: the log1p term is NaN then.
    return hn::Sub(hn::IfThenElse(hn::Lt(x, hn::Zero(d)), x, hn::Zero(d)),
                   vectorLog1p(d, vectorExp(d, hn::Neg(hn::Abs(x)))));
  } else static_assert(op == Opcode::kExp, "no vector form");
}

// How many vectors a row's loop hands unaryMaths or binaryMaths at once: the steps of
// gelu and its gradient interleave across vectors (normalCdfs), as do those of the
// inline exp behind exp, sigmoid, silu and gelu_tanh (expActivations); the others are
// a call into Sleef or short.
template <Opcode op>
constexpr size_t kMathGroup = op == Opcode::kGelu || op == Opcode::kGeluGrad || kIsExpActivation<op> ? 4 : 1;

// unaryMath of K vectors.
template <Opcode op, size_t K, class D, class V = hn::Vec<D>>
void unaryMaths(D d, const V* x, V* out, const Immediates<hn::TFromD<D>>& immediates) {
  if constexpr (op == Opcode::kGelu) gelus<K>(d, x, out);
  else if constexpr (kIsExpActivation<op>) expActivations<op, K>(d, x, out);
  else for (size_t j = 0; j < K; ++j) out[j] = unaryMath<op>(d, x[j], immediates);
}

// gelu's gradient g (Phi(x) + x phi(x)), phi(x) = exp(-x^2 / 2) / sqrt(2 pi), of K pairs
// (g, x): float32's exps grouped (vectorExps) so that they interleave with each
// other, float64's Sleef's.
template <size_t K, class D, class V = hn::Vec<D>>
void geluGrads(D d, const V* g, const V* x, V* out) {
  normalCdfs<K>(d, x, out);
  V density[K];
  for (size_t j = 0; j < K; ++j) density[j] = hn::Mul(hn::Mul(hn::Set(d, -0.5), x[j]), x[j]);
  vectorExps<K>(d, density);
  for (size_t j = 0; j < K; ++j) {
    out[j] = hn::Mul(g[j], hn::MulAdd(x[j], hn::Mul(density[j], hn::Set(d, 0.39894228040143267794)), out[j]));
  }
}

// fmod(a, b), exact as libm's: Sleef's where it answers a number, libm's in the lanes
// where it answers NaN. Sleef's numbers are libm's bit for bit (64M float and 32M double
// pairs of random bits and of wide exponents); its NaNs include the lanes whose quotient
// a / b overflows, where the exact answer is a number (fmod(1e38f, 1e-30f) is
// 0x1.19abp-100f: torch's own vector loop answers NaN there).
template <class D, class V = hn::Vec<D>>
V vectorFmod(D d, V a, V b) {
  using T = hn::TFromD<D>;
  const auto libm = [](T x, T y) { return std::fmod(x, y); };
#ifdef PTO_SLEEF_F32
  const V result = PTO_SLEEF_CALL(fmod, , d, PTO_SLEEF_RAW(a), PTO_SLEEF_RAW(b));
  const auto undecided = hn::IsNaN(result);
  return hn::AllFalse(d, undecided) ? result : libmLanes(d, undecided, result, libm, a, b);
#else
  return lanewise(d, libm, a, b);
#endif
}

// divisionOp's floating remainder and floor division (c10::div_floor_floating), lane by
// lane the same selections, for float and double (whose steps need no rounding between).
template <Opcode op, class D, class V = hn::Vec<D>>
V vectorDivision(D d, V a, V b) {
  const V zero = hn::Zero(d), one = hn::Set(d, 1);
  const V mod = vectorFmod(d, a, b);
  if constexpr (op == Opcode::kFmod) return mod;
  const auto signs_differ = hn::And(hn::Ne(mod, zero), hn::Xor(hn::Lt(mod, zero), hn::Lt(b, zero)));
  if constexpr (op == Opcode::kRemainder) return hn::IfThenElse(signs_differ, hn::Add(mod, b), mod);
  const V quotient = hn::Div(a, b);
  V div = hn::Div(hn::Sub(a, mod), b);
  div = hn::IfThenElse(signs_differ, hn::Sub(div, one), div);
  V floored = hn::Floor(div);
  floored = hn::IfThenElse(hn::Gt(hn::Sub(div, floored), hn::Set(d, 0.5)), hn::Add(floored, one), floored);
  floored = hn::IfThenElse(hn::Eq(div, zero), hn::CopySign(zero, quotient), floored);
  return hn::IfThenElse(hn::Eq(b, zero), quotient, floored);
}

// The binary ops hasVectorMath names: a is the incoming gradient (or the base, or hypot's
// first side), b the input; the instruction's immediates as in unaryMath.
template <Opcode op, class D, class V = hn::Vec<D>>
V binaryMath(D d, V a, V b, const Immediates<hn::TFromD<D>>& immediates) {
  const V one = hn::Set(d, 1), half = hn::Set(d, 0.5);
  if constexpr (op == Opcode::kPow) {
    const V result = PTO_SLEEF_CALL(pow, u10, d, PTO_SLEEF_RAW(a), PTO_SLEEF_RAW(b));
    if constexpr (sizeof(hn::TFromD<D>) == 8) {  // vectorExp's Sleef issue 523: an infinity from finite inputs
      const auto overflowed = hn::AndNot(hn::Or(hn::IsInf(a), hn::IsInf(b)), hn::IsInf(result));
      if (!hn::AllFalse(d, overflowed)) {
        return libmLanes(d, overflowed, result, [](double x, double y) { return std::pow(x, y); }, a, b);
      }
    }
    return result;
  } else if constexpr (op == Opcode::kHypot) {
    return PTO_SLEEF_CALL(hypot, u05, d, PTO_SLEEF_RAW(a), PTO_SLEEF_RAW(b));  // 0.5001 ulp, C99's inf and NaN
  } else if constexpr (op == Opcode::kFmod || op == Opcode::kRemainder || op == Opcode::kFloorDiv) {
    return vectorDivision<op>(d, a, b);
  } else if constexpr (op == Opcode::kGeluGrad) {
    V result;
    geluGrads<1>(d, &a, &b, &result);
    return result;
  } else if constexpr (op == Opcode::kGeluTanhGrad) {
    const V k = hn::Set(d, 0.79788456080286535588), c = hn::Set(d, 0.044715);
    const V t = vectorTanh(d, geluTanhInner(d, b));
    const V slope = hn::Add(one, hn::Mul(hn::Mul(hn::Mul(hn::Set(d, 3), c), b), b));
    const V left = hn::Mul(hn::Mul(hn::Mul(hn::Mul(half, b), hn::Sub(one, hn::Mul(t, t))), k), slope);
    return hn::Mul(a, hn::Add(hn::Mul(half, hn::Add(one, t)), left));
  } else if constexpr (op == Opcode::kSiluGrad) {
    const V s = hn::Div(one, hn::Add(one, vectorExp(d, hn::Neg(b))));
    return hn::Mul(hn::Mul(a, s), hn::Add(one, hn::Mul(b, hn::Sub(one, s))));
  } else if constexpr (op == Opcode::kLogSigmoidGrad) {
    const V e = vectorExp(d, hn::Neg(hn::Abs(b))), share = hn::Div(e, hn::Add(one, e));
    return hn::Mul(hn::IfThenElse(hn::Lt(b, hn::Zero(d)), hn::Sub(one, share), share), a);
  } else if constexpr (op == Opcode::kLogAddExp || op == Opcode::kLogAddExp2) {
    // a itself where both are one infinity (the gap is NaN there); a NaN makes the sum NaN.
    // logaddexp2's product and sum in one fused multiply-add, as torch's vector loop.
    const V gap = hn::Neg(hn::Abs(hn::Sub(a, b)));
    const V larger = hn::Max(a, b);
    const V sum = op == Opcode::kLogAddExp
                      ? hn::Add(larger, vectorLog1p(d, vectorExp(d, gap)))
                      : hn::MulAdd(vectorLog1p(d, PTO_SLEEF_CALL(exp2, u10, d, PTO_SLEEF_RAW(gap))),
                                   hn::Set(d, kLog2E), larger);
    const auto same_infinity = hn::And(hn::Eq(a, b), hn::IsInf(a));
    return hn::IfThenElse(same_infinity, a, sum);
  } else if constexpr (op == Opcode::kEluGrad) {
    // The CPU's vector loop: a blend on b > 0, its products in its order; no exp to take
    // where every lane is above 0.
    const V above_zero = hn::Mul(a, hn::Set(d, immediates[1]));
    const auto above = hn::Gt(b, hn::Zero(d));
    if (hn::AllTrue(d, above)) return above_zero;
    const V input_scale = hn::Set(d, immediates[2]), negative = hn::Set(d, immediates[0] * immediates[1]);
    const V scaled_grad = hn::Mul(a, input_scale);
    const V below = immediates[3] != 0 ? hn::Mul(scaled_grad, hn::Add(b, negative))
                                       : hn::Mul(hn::Mul(scaled_grad, negative), vectorExp(d, hn::Mul(b, input_scale)));
    return hn::IfThenElse(above, above_zero, below);
  } else if constexpr (op == Opcode::kMishGrad) {
    // The CPU's vector loop, t + x s (1 - t^2), its steps in its order and its products
    // and sums fused as the compiler contracts them there (-ffp-contract=fast, FMA hosts);
    // t's tanh is the faster one (tanhSoftplus).
    const V s = hn::Div(one, hn::Add(one, vectorExp(d, hn::Neg(b)))), t = tanhSoftplus(d, b);
    return hn::Mul(a, hn::MulAdd(hn::Mul(b, s), hn::NegMulAdd(t, t, one), t));
  } else if constexpr (op == Opcode::kSoftplusGrad) {
    const V scaled = hn::Mul(b, hn::Set(d, immediates[0])), z = vectorExp(d, scaled);
    return hn::IfThenElse(hn::Gt(scaled, hn::Set(d, immediates[1])), a, hn::Div(hn::Mul(a, z), hn::Add(z, one)));
  } else static_assert(op == Opcode::kPow, "no vector form");
}

// binaryMath of K pairs of vectors.
template <Opcode op, size_t K, class D, class V = hn::Vec<D>>
void binaryMaths(D d, const V* a, const V* b, V* out, const Immediates<hn::TFromD<D>>& immediates) {
  if constexpr (op == Opcode::kGeluGrad) geluGrads<K>(d, a, b, out);
  else for (size_t j = 0; j < K; ++j) out[j] = binaryMath<op>(d, a[j], b[j], immediates);
}

// How far ahead of its loads a math row prefetches its inputs: 4 KiB of float32. A
// Sleef call per vector is long enough that the hardware prefetchers alone leave the
// loads missing (16M float32 exp on this AVX-512 host, 2 cores: 5.0 -> 3.0 ms, gelu
// 12.1 -> 6.6 ms, tanh 7.5 -> 4.2 ms); a prefetch past the end of a row is harmless.
constexpr int64_t kPrefetchElements = 1024;

// Prefetches every cache line of the `count` elements kPrefetchElements ahead of p:
// a group of vectors spans several lines, and a line left to the hardware misses
// (4M float32 exp on an AVX2 EPYC, 2 cores, one prefetch per group of four vectors:
// 4.4 ms, slower than its sigmoid).
template <typename T>
void prefetchAhead(const T* p, int64_t count) {
  constexpr int64_t kLine = 64 / sizeof(T);
  for (int64_t k = 0; k < count; k += kLine) hwy::Prefetch(p + kPrefetchElements + k);
}

// out[i] = op(in[i]) for contiguous rows, a vector at a time; the last partial
// vector goes through a zero-padded copy. `immediates` are the instruction's, in T's
// compute type (float32 for float16/bfloat16).
template <Opcode op, typename T>
void unaryMathRow(T* out, const T* in, int64_t n, const Immediates<ComputeType<T>>& immediates) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    const hn::ScalableTag<T> d;
    const auto lanes = static_cast<int64_t>(hn::Lanes(d));
    constexpr size_t kGroup = kMathGroup<op>;
    int64_t i = 0;
    for (; i + static_cast<int64_t>(kGroup) * lanes <= n; i += static_cast<int64_t>(kGroup) * lanes) {
      prefetchAhead(in + i, static_cast<int64_t>(kGroup) * lanes);
      hn::Vec<decltype(d)> x[kGroup], y[kGroup];
      for (size_t j = 0; j < kGroup; ++j) x[j] = hn::LoadU(d, in + i + static_cast<int64_t>(j) * lanes);
      unaryMaths<op, kGroup>(d, x, y, immediates);
      for (size_t j = 0; j < kGroup; ++j) hn::StoreU(y[j], d, out + i + static_cast<int64_t>(j) * lanes);
    }
    for (; i + lanes <= n; i += lanes) hn::StoreU(unaryMath<op>(d, hn::LoadU(d, in + i), immediates), d, out + i);
    if (i < n) {
      HWY_ALIGN T rest[hn::MaxLanes(hn::ScalableTag<T>())] = {};
      std::copy(in + i, in + n, rest);
      hn::Store(unaryMath<op>(d, hn::Load(d, rest), immediates), d, rest);
      std::copy(rest, rest + (n - i), out + i);
    }
  } else {
    roundedByBlocks(out, n, [in, &immediates](float* block, int64_t start, int64_t count) {
      widenToFloat(block, in + start, count);
      unaryMathRow<op, float>(block, block, count, immediates);
    });
  }
}

// out[i] = op(a[i * a_step], b[i * b_step]) for a step of 1 (contiguous) or 0 (a
// broadcast scalar), with the instruction's immediates as in unaryMathRow.
template <Opcode op, typename T>
void binaryMathRow(T* out, const T* a, int64_t a_step, const T* b, int64_t b_step, int64_t n,
                   const Immediates<ComputeType<T>>& immediates) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    const hn::ScalableTag<T> d;
    const auto lanes = static_cast<int64_t>(hn::Lanes(d));
    auto operand = [&](const T* p, int64_t step, int64_t i) { return step == 0 ? hn::Set(d, *p) : hn::LoadU(d, p + i); };
    constexpr size_t kGroup = kMathGroup<op>;
    int64_t i = 0;
    for (; i + static_cast<int64_t>(kGroup) * lanes <= n; i += static_cast<int64_t>(kGroup) * lanes) {
      if (a_step != 0) prefetchAhead(a + i, static_cast<int64_t>(kGroup) * lanes);
      if (b_step != 0) prefetchAhead(b + i, static_cast<int64_t>(kGroup) * lanes);
      hn::Vec<decltype(d)> x[kGroup], y[kGroup], result[kGroup];
      for (size_t j = 0; j < kGroup; ++j) {
        x[j] = operand(a, a_step, i + static_cast<int64_t>(j) * lanes);
        y[j] = operand(b, b_step, i + static_cast<int64_t>(j) * lanes);
      }
      binaryMaths<op, kGroup>(d, x, y, result, immediates);
      for (size_t j = 0; j < kGroup; ++j) hn::StoreU(result[j], d, out + i + static_cast<int64_t>(j) * lanes);
    }
    for (; i + lanes <= n; i += lanes) {
      hn::StoreU(binaryMath<op>(d, operand(a, a_step, i), operand(b, b_step, i), immediates), d, out + i);
    }
    if (i < n) {
      HWY_ALIGN T rest_a[hn::MaxLanes(hn::ScalableTag<T>())] = {}, rest_b[hn::MaxLanes(hn::ScalableTag<T>())] = {};
      for (int64_t k = i; k < n; ++k) {
        rest_a[k - i] = a[k * a_step];
        rest_b[k - i] = b[k * b_step];
      }
      hn::Store(binaryMath<op>(d, hn::Load(d, rest_a), hn::Load(d, rest_b), immediates), d, rest_a);
      std::copy(rest_a, rest_a + (n - i), out + i);
    }
  } else {
    HWY_ALIGN float block_b[kBlockElements];
    roundedByBlocks(out, n, [&](float* block_a, int64_t start, int64_t count) {
      for (int64_t i = 0; i < count; ++i) {
        block_a[i] = widen(a[(start + i) * a_step]);
        block_b[i] = widen(b[(start + i) * b_step]);
      }
      binaryMathRow<op, float>(block_a, block_a, 1, block_b, 1, count, immediates);
    });
  }
}

}  // namespace pto::rt::sim::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // PTO_SIM_KERNELS_VECTOR_MATH_INL_H_
