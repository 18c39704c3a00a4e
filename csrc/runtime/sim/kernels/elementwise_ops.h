// The arithmetic of each elementwise instruction on one computed value, with
// PyTorch CPU's semantics (NaN propagation, integer wrap-around, -0.0).
#pragma once

#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include <sleef.h>

#include "element_types.h"
#include "isa/instructions.h"

namespace pto::rt::sim::kernels {

using isa::Opcode;

template <typename C>
inline bool isNaN(C x) {
  if constexpr (std::is_floating_point_v<C>) return std::isnan(x);
  else return false;
}

// Integer arithmetic wraps (two's complement), as it does in PyTorch.
template <typename C>
inline C wrap(auto value) {
  return static_cast<C>(static_cast<std::make_unsigned_t<C>>(value));
}

// The scalar forms of the transcendental functions, for strided rows (contiguous
// float32/float64 rows take vector_math-inl.h's vector forms): Sleef's scalar
// functions for float, of the accuracy the vector forms have, libm for double.
template <typename C>
inline C expOf(C x) {
  if constexpr (std::is_same_v<C, float>) return Sleef_expf_u10(x);
  else return std::exp(x);
}

template <typename C>
inline C erfcOf(C x) {
  if constexpr (std::is_same_v<C, float>) return Sleef_erfcf_u15(x);
  else return std::erfc(x);
}

template <typename C>
inline C tanhOf(C x) {
  if constexpr (std::is_same_v<C, float>) return Sleef_tanhf_u35(x);
  else return std::tanh(x);
}

// log |gamma(x)|: Sleef's, whose vector forms PyTorch's CPU kernels call, and 4-5x
// faster than glibc's (which also writes gamma's sign into the global signgam, a race
// between the device's cores). Its bound: 1 ulp for x > 0, max(1 ulp, 1e-8 (float) or
// 1e-15 (double) absolute) below; past 4e36 (float) or 2e305 (double) it may return
// infinity short of where the result overflows (4.08e36, 2.55e305), as on the CPU.
template <typename C>
inline C lgammaOf(C x) {
  if constexpr (std::is_same_v<C, float>) return Sleef_lgammaf_u10(x);
  else return Sleef_lgamma_u10(x);
}

// The standard normal CDF, 0.5 * erfc(-x / sqrt 2): erfc keeps the relative accuracy
// of the lower tail, where 1 + erf would cancel.
template <typename C>
inline C normalCdfOf(C x) {
  const C z = -x * C(0.70710678118654752440);
  return C(0.5) * erfcOf(z);
}

// The immediates of an elementwise instruction (tleakyrelu's slope, tnantonum's
// replacements, tadd's alpha), in its compute type: float16/bfloat16's in float32, as
// their CPU kernels take them.
template <typename C>
using Immediates = std::array<C, isa::kMaxImmediates>;

// An instruction's immediates in its compute type: all of a floating one's; an integer
// one's only where the verifier checked that they fit (TypedImmediates: tadd's alpha,
// tthreshold's numbers; uint8 takes negatives, wrapping), the rest left 0.
template <Opcode op, typename C>
inline Immediates<C> immediatesIn(const std::array<double, isa::kMaxImmediates>& given) {
  Immediates<C> immediates{};
  if (std::is_floating_point_v<C> || isa::info(op).has(isa::Property::TypedImmediates)) {
    for (size_t i = 0; i < given.size(); ++i) immediates[i] = castTo<C>(given[i]);
  }
  return immediates;
}

template <Opcode op, typename C>
inline C unaryOp(C x, const Immediates<C>& immediates = {}) {
  if constexpr (op == Opcode::kAbs) {
    if constexpr (std::is_floating_point_v<C>) return std::abs(x);
    else if constexpr (std::is_unsigned_v<C> || std::is_same_v<C, bool>) return x;
    else return x < 0 ? wrap<C>(0ull - static_cast<unsigned long long>(x)) : x;
  } else if constexpr (op == Opcode::kNeg) {
    if constexpr (std::is_floating_point_v<C>) return -x;
    else return wrap<C>(0ull - static_cast<unsigned long long>(x));
  } else if constexpr (op == Opcode::kSign) {
    if constexpr (std::is_floating_point_v<C>) return isNaN(x) ? C(0) : C((C(0) < x) - (x < C(0)));
    else return C((C(0) < x) - (x < C(0)));
  } else if constexpr (op == Opcode::kRelu) {
    return x < C(0) ? C(0) : x;  // NaN and -0.0 pass through, as in PyTorch's CPU kernels
  } else if constexpr (op == Opcode::kNot) {
    if constexpr (std::is_same_v<C, bool>) return !x;
    else return static_cast<C>(~x);
  } else if constexpr (op == Opcode::kExp) return expOf(x);
  else if constexpr (op == Opcode::kExp2) return std::exp2(x);
  else if constexpr (op == Opcode::kExpm1) return std::expm1(x);
  else if constexpr (op == Opcode::kLog) return std::log(x);
  else if constexpr (op == Opcode::kLog2) return std::log2(x);
  else if constexpr (op == Opcode::kLog1p) return std::log1p(x);
  else if constexpr (op == Opcode::kSqrt) return std::sqrt(x);
  else if constexpr (op == Opcode::kRsqrt) return C(1) / std::sqrt(x);
  else if constexpr (op == Opcode::kRecip) return C(1) / x;
  else if constexpr (op == Opcode::kSin) return std::sin(x);
  else if constexpr (op == Opcode::kCos) return std::cos(x);
  else if constexpr (op == Opcode::kTan) return std::tan(x);
  else if constexpr (op == Opcode::kTanh) return tanhOf(x);
  else if constexpr (op == Opcode::kSigmoid) return C(1) / (C(1) + expOf(-x));
  else if constexpr (op == Opcode::kSilu) return x / (C(1) + expOf(-x));
  else if constexpr (op == Opcode::kGelu) return x * normalCdfOf(x);
  else if constexpr (op == Opcode::kGeluTanh) {
    const C inner = C(0.79788456080286535588) * (x + C(0.044715) * x * x * x);
    return x / (C(1) + expOf(C(-2) * inner));  // x (1 + tanh(inner)) / 2, as vector_math-inl.h
  } else if constexpr (op == Opcode::kErf) return std::erf(x);
  else if constexpr (op == Opcode::kErfc) return erfcOf(x);
  else if constexpr (op == Opcode::kLog10) return std::log10(x);
  else if constexpr (op == Opcode::kAsin) return std::asin(x);
  else if constexpr (op == Opcode::kAcos) return std::acos(x);
  else if constexpr (op == Opcode::kAtan) return std::atan(x);
  else if constexpr (op == Opcode::kSinh) return std::sinh(x);
  else if constexpr (op == Opcode::kCosh) return std::cosh(x);
  else if constexpr (op == Opcode::kAsinh) return std::asinh(x);
  else if constexpr (op == Opcode::kAcosh) return std::acosh(x);
  else if constexpr (op == Opcode::kAtanh) return std::atanh(x);
  else if constexpr (op == Opcode::kLgamma) return lgammaOf(x);
  else if constexpr (op == Opcode::kFloor) return std::floor(x);
  else if constexpr (op == Opcode::kCeil) return std::ceil(x);
  else if constexpr (op == Opcode::kRound) return std::nearbyint(x);
  else if constexpr (op == Opcode::kTrunc) return std::trunc(x);
  else if constexpr (op == Opcode::kFrac) return x - std::trunc(x);  // exact; inf - inf: NaN, as on the CPU
  // The CPU kernels' expressions, step for step: a NaN stays NaN; -inf * 0 in hardswish
  // is NaN there too.
  else if constexpr (op == Opcode::kHardSigmoid || op == Opcode::kHardSwish) {
    const C raised = x + C(3) < C(0) ? C(0) : x + C(3);
    const C held = C(6) < raised ? C(6) : raised;
    return op == Opcode::kHardSigmoid ? held / C(6) : x * held / C(6);
  } else if constexpr (op == Opcode::kLeakyRelu) return x > C(0) ? x : x * immediates[0];
  // elu, softplus, log_sigmoid and the shrinks: the CPU kernels' expressions, their
  // coefficients rounded to C as the CPU rounds them (elu's alpha * scale one product).
  else if constexpr (op == Opcode::kElu) {
    return x < C(0) ? C(std::expm1(x * immediates[2])) * (immediates[0] * immediates[1]) : x * immediates[1];
  } else if constexpr (op == Opcode::kSoftplus) {
    return x * immediates[0] > immediates[1] ? x : C(std::log1p(expOf(x * immediates[0]))) / immediates[0];
  } else if constexpr (op == Opcode::kLogSigmoid) {
    return (x < C(0) ? x : C(0)) - C(std::log1p(expOf(-std::abs(x))));
  } else if constexpr (op == Opcode::kMish) {
    return x * tanhOf(C(std::log1p(expOf(x))));
  } else if constexpr (op == Opcode::kHardShrink) {
    return x >= -immediates[0] && x <= immediates[0] ? C(0) : x;
  } else if constexpr (op == Opcode::kSoftShrink) {
    // +0 between, as the CPU's vector loop (its scalar loop, for a row's last few
    // elements, keeps x's sign there). Both sides computed, then selected: with an early
    // return for NaN, GCC left the AVX2 loop scalar (1.2-1.36x the CPU's time).
    const C lambd = immediates[0];
    const C below = x < -lambd ? x + lambd : C(0);
    const C shrunk = x > lambd ? x - lambd : below;
    return isNaN(x) ? x : shrunk;
  }
  else if constexpr (op == Opcode::kThreshold) return x <= immediates[0] ? immediates[1] : x;  // NaN fails the test
  else if constexpr (op == Opcode::kNanToNum) {
    if (isNaN(x)) return immediates[0];
    if (x == std::numeric_limits<C>::infinity()) return immediates[1];
    return x == -std::numeric_limits<C>::infinity() ? immediates[2] : x;
  } else static_assert(op == Opcode::kAbs, "not a unary instruction");
}

// x rounded to the storage type and back: PyTorch's CPU kernels compute some float16 /
// bfloat16 ops step by step in those types' own arithmetic, rounding each step.
template <typename Storage, typename C>
inline C roundedToStorage(C x) {
  return static_cast<C>(widen(castTo<Storage>(x)));
}

// The integer divisions check for zero, as PyTorch's CPU kernels do, and take
// b == -1 apart: the lowest value divided by it would trap (it wraps, as negation does).
template <typename C>
inline void checkDivisor(C b) {
  if (b == C(0)) throw std::domain_error("ZeroDivisionError");
}

// Storage: the dtype's own type. PyTorch's CPU kernels round float16/bfloat16
// divisions to it after every step (Half arithmetic), so these do too.
template <Opcode op, typename C, typename Storage>
inline C divisionOp(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    auto round = roundedToStorage<Storage, C>;
    if constexpr (op == Opcode::kFmod) return std::fmod(a, b);
    if constexpr (op == Opcode::kTruncDiv) return std::trunc(round(a / b));
    const C mod = std::fmod(a, b);
    if constexpr (op == Opcode::kRemainder) return mod != C(0) && ((mod < C(0)) != (b < C(0))) ? mod + b : mod;
    // kFloorDiv, as c10::div_floor_floating: exact where floor(a / b) would round wrongly.
    if (b == C(0)) return a / b;
    C quotient = round(round(a - mod) / b);
    if (mod != C(0) && (b < C(0)) != (mod < C(0))) quotient = round(quotient - C(1));
    if (quotient == C(0)) return std::copysign(C(0), round(a / b));
    C floored = std::floor(quotient);
    if (round(quotient - floored) > C(0.5)) floored = round(floored + C(1));
    return floored;
  } else {
    checkDivisor(b);
    if (std::is_signed_v<C> && b == C(-1)) {
      if constexpr (op == Opcode::kFmod || op == Opcode::kRemainder) return C(0);
      else return wrap<C>(0ull - static_cast<unsigned long long>(a));
    }
    if constexpr (op == Opcode::kFmod) return static_cast<C>(a % b);
    if constexpr (op == Opcode::kTruncDiv) return static_cast<C>(a / b);
    const C mod = static_cast<C>(a % b);
    if constexpr (op == Opcode::kRemainder) return mod != 0 && ((mod < 0) != (b < 0)) ? static_cast<C>(mod + b) : mod;
    const C quotient = static_cast<C>(a / b);  // kFloorDiv: one less where the signs differ and b does not divide a
    return mod != 0 && ((a < 0) != (b < 0)) ? static_cast<C>(quotient - 1) : quotient;
  }
}

// start + weight (end - start) as PyTorch's vector kernel computes it (tlerp, tlerpw): from
// the nearer end, one fused multiply-add of the rounded difference (and of weight - 1
// from end's side); a NaN weight gives NaN.
template <typename C>
inline C lerpFromNearerEnd(C start, C end, C weight) {
  const C difference = end - start;
  return std::abs(weight) < C(0.5) ? std::fma(weight, difference, start) : std::fma(weight - C(1), difference, end);
}

// log2(e) = 1 / ln 2, logaddexp2's factor: torch's inv_log_2.
constexpr double kLog2E = 1.4426950408889634;

// immediates[0] is alpha for tadd/tsub (the weight, threshold, slope or lambd of the
// others).
template <Opcode op, typename C, typename Storage = C>
inline C binaryOp(C a, C b, const Immediates<C>& immediates) {
  const C alpha = immediates[0];
  if constexpr (op == Opcode::kAdd || op == Opcode::kSub) {
    if constexpr (std::is_floating_point_v<C>) {
      const C scaled = alpha * b;  // exact when alpha == 1 (NaN, inf and -0.0 included): no branch
      return op == Opcode::kAdd ? a + scaled : a - scaled;
    } else {
      using U = unsigned long long;
      const U scaled = static_cast<U>(alpha) * static_cast<U>(b);
      return wrap<C>(op == Opcode::kAdd ? static_cast<U>(a) + scaled : static_cast<U>(a) - scaled);
    }
  } else if constexpr (op == Opcode::kMul) {
    if constexpr (std::is_same_v<C, bool>) return a && b;
    else if constexpr (std::is_floating_point_v<C>) return a * b;
    else return wrap<C>(static_cast<unsigned long long>(a) * static_cast<unsigned long long>(b));
  } else if constexpr (op == Opcode::kDiv) return a / b;
  else if constexpr (op == Opcode::kMax) {
    if (isNaN(a) || isNaN(b)) return std::numeric_limits<C>::quiet_NaN();
    return a > b ? a : b;
  } else if constexpr (op == Opcode::kMin) {
    if (isNaN(a) || isNaN(b)) return std::numeric_limits<C>::quiet_NaN();
    return a < b ? a : b;
  } else if constexpr (op == Opcode::kPow) return std::pow(a, b);
  else if constexpr (op == Opcode::kFmod || op == Opcode::kRemainder || op == Opcode::kFloorDiv ||
                     op == Opcode::kTruncDiv) {
    return divisionOp<op, C, Storage>(a, b);
  } else if constexpr (op == Opcode::kAtan2) return std::atan2(a, b);
  else if constexpr (op == Opcode::kLerp) return lerpFromNearerEnd(a, b, alpha);  // alpha: the weight
  else if constexpr (op == Opcode::kCopySign) return std::copysign(a, b);
  else if constexpr (op == Opcode::kHypot) return std::hypot(a, b);
  else if constexpr (op == Opcode::kXlogy) {
    // float16/bfloat16: log(b) rounded to the storage type before the product, as PyTorch's
    // CPU kernel computes in their own arithmetic.
    if (isNaN(b)) return b;
    return a == C(0) ? C(0) : a * roundedToStorage<Storage>(std::log(b));
  }
  // fmax/fmin: std::fmax's NaN rule, a at a tie (0 and -0), as the CPU's kernels;
  // logaddexp/logaddexp2 their max + log1p(exp(-|a - b|)) (log1p(exp2(...)) / ln 2 in one
  // fused multiply-add, as torch's vector loop is compiled for FMA hosts), a itself where
  // both are one infinity.
  else if constexpr (op == Opcode::kFMax) return isNaN(a) ? b : isNaN(b) ? a : a < b ? b : a;
  else if constexpr (op == Opcode::kFMin) return isNaN(a) ? b : isNaN(b) ? a : b < a ? b : a;
  else if constexpr (op == Opcode::kLogAddExp || op == Opcode::kLogAddExp2) {
    if (std::isinf(a) && a == b) return a;
    const C larger = a > b ? a : b;  // a NaN makes the log1p term NaN
    if constexpr (op == Opcode::kLogAddExp) return larger + C(std::log1p(expOf(-std::abs(a - b))));
    else return std::fma(C(std::log1p(std::exp2(-std::abs(a - b)))), C(kLog2E), larger);
  }
  else if constexpr (op == Opcode::kHeaviside) return a == C(0) ? b : C(a > C(0));
  else if constexpr (op == Opcode::kReluGrad) return b <= alpha ? C(0) : a;  // alpha: the threshold; NaN passes a, as on the CPU
  // The CPU's vector loops (its scalar ones, for a row's last few elements, differ at a
  // NaN x and, for hardswish, at -3 and 3): alpha is the slope or lambd.
  else if constexpr (op == Opcode::kHardSigmoidGrad) return b > C(-3) && b < C(3) ? a * C(1.0f / 6.0f) : C(0);
  else if constexpr (op == Opcode::kHardSwishGrad) return b <= C(-3) ? C(0) : b >= C(3) ? a : a * (b / C(3) + C(0.5));
  else if constexpr (op == Opcode::kLeakyReluGrad) return a * (b > C(0) ? C(1) : alpha);
  else if constexpr (op == Opcode::kShrinkGrad) return b < -alpha || b > alpha ? a : C(0);
  else if constexpr (op == Opcode::kLogSigmoidGrad) {
    const C e = expOf(-std::abs(b)), share = e / (C(1) + e);
    return (b < C(0) ? C(1) - share : share) * a;
  }
  // elu's from x, or from y = elu(x) where is_result (immediates: alpha, scale,
  // input_scale, is_result); a NaN b takes the branch below 0, as the vector loop's blend.
  else if constexpr (op == Opcode::kEluGrad) {
    const C input_scale = immediates[2], negative = immediates[0] * immediates[1];
    if (b > C(0)) return a * immediates[1];
    return immediates[3] != C(0) ? a * input_scale * (b + negative) : a * input_scale * negative * expOf(b * input_scale);
  } else if constexpr (op == Opcode::kSoftplusGrad) {  // immediates: beta, threshold
    const C scaled = b * immediates[0];
    if (scaled > immediates[1]) return a;
    const C z = expOf(scaled);
    return a * z / (z + C(1));
  } else if constexpr (op == Opcode::kMishGrad) {
    const C s = C(1) / (C(1) + expOf(-b)), t = tanhOf(C(std::log1p(expOf(b))));
    return a * (t + b * s * (C(1) - t * t));
  } else if constexpr (op == Opcode::kHardtanhGrad) return b > immediates[0] && b < immediates[1] ? a : C(0);
  else if constexpr (op == Opcode::kGeluGrad) {
    const C cdf = normalCdfOf(b);
    const C pdf = expOf(C(-0.5) * b * b) * C(0.39894228040143267794);
    return a * (cdf + b * pdf);
  } else if constexpr (op == Opcode::kGeluTanhGrad) {
    const C k = C(0.79788456080286535588), c = C(0.044715);
    const C inner = k * (b + c * b * b * b);
    const C t = tanhOf(inner);
    const C left = C(0.5) * b * (C(1) - t * t) * k * (C(1) + C(3) * c * b * b);
    return a * (C(0.5) * (C(1) + t) + left);
  } else if constexpr (op == Opcode::kSiluGrad) {
    const C s = C(1) / (C(1) + std::exp(-b));
    return a * s * (C(1) + b * (C(1) - s));
  } else if constexpr (op == Opcode::kSigmoidGrad) return a * (C(1) - b) * b;
  else if constexpr (op == Opcode::kTanhGrad) return a * (C(1) - b * b);
  else if constexpr (op == Opcode::kAnd) return static_cast<C>(a & b);
  else if constexpr (op == Opcode::kOr) return static_cast<C>(a | b);
  else if constexpr (op == Opcode::kXor) return static_cast<C>(a ^ b);
  else if constexpr (op == Opcode::kShiftLeft || op == Opcode::kShiftRight) {
    constexpr int kBits = static_cast<int>(sizeof(C) * 8);
    const bool negative = static_cast<std::make_signed_t<C>>(b) < 0;
    if constexpr (op == Opcode::kShiftLeft) {
      if (negative || b >= C(kBits - 1) + 1) return C(0);
      return static_cast<C>(static_cast<std::make_unsigned_t<C>>(a) << b);
    } else {
      constexpr int kWidest = kBits - (std::is_signed_v<C> ? 1 : 0);
      if (negative || b >= static_cast<C>(kWidest)) return static_cast<C>(a >> kWidest);
      return static_cast<C>(a >> b);
    }
  }
  else static_assert(op == Opcode::kAdd, "not a binary instruction");
}

// in1 + value * in2 * in3 (kAddcmul) or in1 + value * in2 / in3 (kAddcdiv) in the
// compute type, as PyTorch's CPU kernels round them on FMA hosts: value * in2 first,
// then one fused multiply-add with in3 and in1 (addcmul), or a division then the
// sum (addcdiv). Integers wrap. kClamp: a held within [b, c] as the CPU's
// min(max(a, b), c), a at a tie; NaN where any of the three is (the CPU's clamp with
// tensor bounds, and its NaN fill for a NaN number bound). kLerpWeights: tlerp's
// formula with c for the weight.
template <Opcode op, typename C>
inline C ternaryOp(C a, C b, C c, C value) {
  static_assert(op == Opcode::kAddcmul || op == Opcode::kAddcdiv || op == Opcode::kClamp ||
                    op == Opcode::kLerpWeights,
                "not a ternary instruction");
  if constexpr (op == Opcode::kLerpWeights) {
    return lerpFromNearerEnd(a, b, c);
  } else if constexpr (op == Opcode::kClamp) {
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(b) || std::isnan(c)) return std::numeric_limits<C>::quiet_NaN();
    }
    const C raised = a < b ? b : a;  // a NaN a stays
    return c < raised ? c : raised;
  } else if constexpr (std::is_floating_point_v<C>) {
    const C scaled = value * b;
    return op == Opcode::kAddcmul ? std::fma(scaled, c, a) : a + scaled / c;
  } else {
    static_assert(op == Opcode::kAddcmul, "taddcdiv takes floating dtypes only");
    using U = unsigned long long;
    return wrap<C>(static_cast<U>(a) + static_cast<U>(value) * static_cast<U>(b) * static_cast<U>(c));
  }
}

template <Opcode op, typename C>
inline bool compareOp(C a, C b) {
  if constexpr (op == Opcode::kEq) return a == b;
  else if constexpr (op == Opcode::kNe) return a != b;
  else if constexpr (op == Opcode::kLt) return a < b;
  else if constexpr (op == Opcode::kLe) return a <= b;
  else if constexpr (op == Opcode::kGt) return a > b;
  else if constexpr (op == Opcode::kGe) return a >= b;
  else static_assert(op == Opcode::kEq, "not a comparison");
}

}  // namespace pto::rt::sim::kernels
