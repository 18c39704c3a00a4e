// The arithmetic of the elementwise kernels against a reference written here, apart
// from the kernels: every opcode of the Unary, Binary, Ternary and Compare groups of
// instructions.def, for each dtype its row accepts, run through kernels::execute on
// contiguous, strided and broadcast operands (so the vector paths run as well as the
// scalar ones). Floating results are compared with textbook formulas evaluated in
// long double, within an error bound derived from what the kernel's arithmetic
// promises (Bound below); integer results with their exact value, wrapped to the
// width, from PyTorch's documented semantics. kernels_tests.cpp checks the layouts;
// this file checks the numbers.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "isa/instructions.h"
#include "isa/program.h"
#include "runtime/sim/kernels/execute.h"

namespace {

using namespace pto;
namespace kernels = rt::sim::kernels;
using isa::DType;
using isa::Group;
using isa::Opcode;
using Real = long double;
using Int = __int128;

constexpr Real kInf = std::numeric_limits<Real>::infinity();
constexpr Real kNaN = std::numeric_limits<Real>::quiet_NaN();

// ---------------------------------------------------------------------------
// Binary floating formats, as numeric_limits describes them: `digits` bits of
// precision, normal values in [2^(min_exponent-1), 2^max_exponent).
// ---------------------------------------------------------------------------

struct Format {
  int digits;
  int min_exponent;
  int max_exponent;

  Real unitRoundoff() const { return std::ldexp(Real(1), -digits); }
  Real largest() const { return std::ldexp(Real(1) - unitRoundoff(), max_exponent); }
  Real smallestNormal() const { return std::ldexp(Real(1), min_exponent - 1); }
  // The spacing of the format's values around v (subnormals: the smallest one).
  Real ulp(Real v) const {
    int exponent = 0;
    std::frexp(std::fabs(v), &exponent);
    return std::ldexp(Real(1), std::max(exponent, min_exponent) - digits);
  }
  // v rounded to the nearest value of the format, ties to even, overflowing to infinity.
  Real round(Real v) const {
    if (!std::isfinite(v) || v == 0) return v;
    int exponent = 0;
    std::frexp(v, &exponent);
    exponent = std::max(exponent, min_exponent);
    const Real rounded = std::ldexp(std::nearbyint(std::ldexp(v, digits - exponent)), exponent - digits);
    return std::fabs(rounded) > largest() ? std::copysign(kInf, v) : rounded;
  }
  // Results of at least this magnitude round to infinity.
  Real overflowThreshold() const { return largest() + ulp(largest()) / 2; }
};

constexpr Format kHalfFormat{11, -13, 16};
constexpr Format kBFloat16Format{8, -125, 128};
constexpr Format kFloatFormat{24, -125, 128};
constexpr Format kDoubleFormat{53, -1021, 1024};
constexpr Format kLongDoubleFormat{std::numeric_limits<Real>::digits, std::numeric_limits<Real>::min_exponent,
                                   std::numeric_limits<Real>::max_exponent};

// float16 and bfloat16 elements are their bits; decoded and encoded here from the
// formats' definitions (IEEE binary16; the upper half of a binary32).
Real decodeHalf(uint16_t bits) {
  const Real sign = bits & 0x8000u ? -1 : 1;
  const int exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  if (exponent == 0x1f) return mantissa ? kNaN : sign * kInf;
  if (exponent == 0) return sign * std::ldexp(Real(mantissa), -24);
  return sign * std::ldexp(Real(1024 + mantissa), exponent - 25);
}

// `v` is a value of the format (or NaN).
uint16_t encodeHalf(Real v) {
  if (std::isnan(v)) return 0x7e00;
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const Real magnitude = std::fabs(v);
  if (std::isinf(magnitude)) return sign | 0x7c00;
  if (magnitude < kHalfFormat.smallestNormal()) return sign | static_cast<uint16_t>(std::ldexp(magnitude, 24));
  int exponent = 0;
  const Real fraction = std::frexp(magnitude, &exponent);  // in [0.5, 1)
  return sign | static_cast<uint16_t>((exponent + 14) << 10) |
         static_cast<uint16_t>(std::ldexp(fraction, 11) - 1024);
}

Real decodeBFloat16(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }
uint16_t encodeBFloat16(Real v) { return static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(v)) >> 16); }

// ---------------------------------------------------------------------------
// What a reference says about one element.
// ---------------------------------------------------------------------------

// The compute type's format (float for float16/bfloat16) and the storage's.
struct Precision {
  Format compute;
  Format storage;
  Real u() const { return compute.unitRoundoff(); }
};

// A floating result and how far the kernel may be from it:
//   ulps * ulp(value) + relative * u * |value| + absolute
// in the compute type (u its unit roundoff); float16/bfloat16 add the final rounding
// to storage, half an ulp of it. `intermediate` is the largest magnitude the kernel's
// formula forms on the way (where it overflows, so may the result: PyTorch's CPU
// kernels evaluate the same formulas).
struct Bound {
  Real value;
  Real ulps = 0;
  Real relative = 0;
  Real absolute = 0;
  Real intermediate = 0;
};

struct RealArgs {
  Real in[3];
  Real immediate;
  Precision precision;
  Real later[3] = {};  // the immediates after the first (Reference::later_immediates)
};

struct IntArgs {
  Int in[3];
  Int immediate;
  int bits;  // 1 for bool
  bool is_signed;
  Int later[3] = {};  // the immediates after the first, truncated (Reference::later_immediates)
};

// The accuracy the kernels' functions promise, in ulps of their result. Sleef's
// documentation gives each variant's bound (u10: 1.0, u15: 1.5, u35: 3.5 ulp); glibc
// lists its largest known errors per function ("Known Maximum Errors in Math
// Functions", libm-test-ulps: at most 2 ulp for float and double exp, exp2, expm1,
// log, log2, log1p, sin, cos, tan, tanh, erf, pow, atan2, log10, asin, acos, atan,
// sinh, cosh, asinh, acosh and atanh; erfc 5); MKL's VML, the vector form of erf and
// erfc, 1 ulp in its high-accuracy mode. A row is the larger of its vector form (Sleef,
// MKL) and its strided form (Sleef for exp, tanh and float erfc; libm otherwise).
constexpr Real kExpUlps = 1.0;    // Sleef exp u10; libm exp (double) 1
constexpr Real kLibmUlps = 2.0;   // Sleef u10 and MKL vector forms, libm scalar forms up to 2
constexpr Real kTanhUlps = 3.5;   // Sleef tanh u35
constexpr Real kAtan2Ulps = 2.0;  // libm atan2f 2 (no vector form)
constexpr Real kErfcUlps = 5.0;   // MKL (vector), Sleef erfcf u15 (strided float); libm erfc (double) up to 5
// Sleef's lgamma: 1 ulp for x > 0; below, max(1 ulp, an absolute 1e-8 (float) or 1e-15
// (double)); past 4e36 (float) or 2e305 (double) it may return infinity.
Real lgammaAbsolute(Real x, const Precision& p) { return x < 0 ? (p.compute.digits > 24 ? 1e-15L : 1e-8L) : 0; }
Real lgammaInfiniteFrom(const Precision& p) { return p.compute.digits > 24 ? 2e305L : 4e36L; }

// Sleef's sin, cos and tan keep their 1.0-ulp bound only for |x| below these
// (float: 1e28, double: 1e299); beyond, any value in [-1, 1] is allowed.
Real trigLimit(const Precision& p) { return p.compute.digits > 24 ? 1e299L : 1e28L; }

// Relative error (in u) of the kernels' standard normal CDF Phi(x) = erfc(-x/sqrt 2)/2:
// the function's own error (float: the rational fit's 1.2e-7 relative, about 2u, in
// the vector form; Sleef's erfc u15, 3u, in the scalar one; double: libm's erfc, 5
// ulp = 10u) plus the rounding of its argument -x/sqrt 2 (2u relative), which erfc
// magnifies by its condition number z erfc'(z)/erfc(z), and the halving and the
// final subtraction from 1 above the mean (1u).
Real normalCdfRelative(Real x, const Precision& p) {
  const Real function = p.compute.digits > 24 ? 10 : 3;
  if (!std::isfinite(x)) return function + 1;
  const Real z = -x / std::sqrt(Real(2));
  const Real erfc_z = std::erfc(z);
  const Real condition = erfc_z > 0 ? std::fabs(z) * 2 / std::sqrt(std::acos(Real(-1))) * std::exp(-z * z) / erfc_z
                                    : 2 * z * z;
  return function + 2 * condition + 1;
}

Real normalCdf(Real x) { return std::erfc(-x / std::sqrt(Real(2))) / 2; }
Real normalPdf(Real x) { return std::exp(-x * x / 2) / std::sqrt(2 * std::acos(Real(-1))); }

// tanh's argument in the tanh form of gelu, k (x + c x^3), and the error the kernel
// may make forming it: the cube's three products and the constant (4u of c x^3),
// the sum (u of it) and the scaling by k (2u), at most u k (6 |c x^3| + 3 |x|).
constexpr Real kGeluK = 0.79788456080286535587989211986876373L;  // sqrt(2 / pi)
constexpr Real kGeluC = 0.044715L;
Real geluInner(Real x) { return kGeluK * (x + kGeluC * x * x * x); }
Real geluInnerError(Real x, Real u) { return u * kGeluK * (6 * std::fabs(kGeluC * x * x * x) + 3 * std::fabs(x)); }
Real onePlusTanh(Real v) { return 2 / (1 + std::exp(-2 * v)); }  // no cancellation as tanh(v) -> -1
Real sech2(Real v) {
  const Real c = std::cosh(v);
  return 1 / (c * c);
}

// Floor of a / b, exact: the long double quotient's floor, corrected by the sign of
// the exactly rounded residual a - m b (a fused multiply-add is zero only when the
// residual is). Python's (and PyTorch's) floor division, infinities included.
Real floorQuotient(Real a, Real b) {
  if (b == 0) return a / b;  // before the infinities, as c10::div_floor_floating: inf // 0 is inf
  if (std::isnan(a) || std::isnan(b) || std::isinf(a)) return kNaN;
  if (std::isinf(b)) return a == 0 || std::signbit(a) == std::signbit(b) ? std::copysign(Real(0), a / b) : -1;
  Real m = std::floor(a / b);
  if (std::fabs(m) >= std::ldexp(Real(1), 53)) return m;  // beyond any compute type's integers
  auto residual_sign = [&](Real q) {  // sign of (a - q b) / b
    const double r = std::fma(-static_cast<double>(q), static_cast<double>(b), static_cast<double>(a));
    return r == 0 ? 0 : (r < 0) == (b < 0) ? 1 : -1;
  };
  if (residual_sign(m) < 0) m -= 1;
  else if (residual_sign(m + 1) >= 0) m += 1;
  return m == 0 ? std::copysign(Real(0), a / b) : m;
}

// tadd/tsub's alpha b: rounded in the compute type (u of it), or for float16/bfloat16
// to storage, half an ulp of it there (as PyTorch's CPU kernels), where it may also
// overflow: its error and the magnitude that overflows like the compute type's.
std::pair<Real, Real> scaledOperandError(const RealArgs& r) {
  const Real scaled = r.immediate * r.in[1];
  const Precision& p = r.precision;
  if (r.immediate == 1) return {0, 0};
  if (p.storage.digits == p.compute.digits) return {p.u() * std::fabs(scaled) + p.compute.ulp(0) / 2, std::fabs(scaled)};
  const bool overflows = std::fabs(scaled) >= p.storage.overflowThreshold();
  return {p.storage.ulp(scaled) / 2, overflows ? kInf : 0};
}

// logaddexp: max + log1p(e), e = exp(-g), g = |a - b| (logaddexp2: exp2, and the term
// over ln 2): g's rounding moves the term by e / (1 + e) g u; the exponential's ulp (2u
// of e; libm's exp2 2 ulps, and the 1 / ln 2 factor: 4u / ln 2) by e / (1 + e) 2u (6u);
// log1p's 2 ulps 4u of the term (its product with 1 / ln 2 2u more); the sum u; a
// subnormal e its absolute ulp. Where a and b are one infinity, a.
Bound logAddExpBound(const RealArgs& r, bool base2) {
  const Real a = r.in[0], b = r.in[1], u = r.precision.u();
  if (std::isnan(a) || std::isnan(b)) return {kNaN};
  if (std::isinf(a) && a == b) return {a};
  const Real g = std::fabs(a - b), e = base2 ? std::exp2(-g) : std::exp(-g);
  const Real term = base2 ? std::log1p(e) / std::log(Real(2)) : std::log1p(e);
  const Real share = e == 0 ? 0 : e / (1 + e) * (g + (base2 ? 6 : 2));
  return {std::max(a, b) + term, 0, 1, (share + (base2 ? 6 : 4) * term) * u + r.precision.compute.ulp(0)};
}

// ---------------------------------------------------------------------------
// The references, one per opcode.
// ---------------------------------------------------------------------------

struct Reference {
  Bound (*real)(const RealArgs&) = nullptr;  // for the floating dtypes
  Int (*integer)(const IntArgs&) = nullptr;  // for the integer dtypes and bool
  // Where a function's accuracy holds only on a range of finite inputs (Sleef's trig).
  Real (*input_limit)(const Precision&) = nullptr;
  // max/min return either zero for (0, -0): PyTorch's vector and scalar CPU loops differ.
  bool zero_sign_matters = true;
  bool divides = false;  // integer zero divisors fail the kernel: the inputs avoid them
  std::vector<double> float_immediates = {0};
  std::vector<double> integer_immediates = {0};
  // The immediates after the first, fixed (elu's scale and input_scale): each case
  // varies the first alone.
  std::vector<double> later_immediates = {};
};

Int wrapTo(Int v, int bits, bool is_signed) {
  if (bits == 1) return v != 0;
  const Int modulus = Int(1) << bits;
  Int r = v % modulus;
  if (r < 0) r += modulus;
  if (is_signed && r >= modulus / 2) r -= modulus;
  return r;
}

Int floorDivide(Int a, Int b) {
  const Int q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

// tadd/tsub's alphas: exact, powers of two and an inexact one; integers wrap (-2 in u8).
const std::vector<double> kFloatAlphas = {1.0, 0.5, -2.0, 0.3};
const std::vector<double> kIntegerAlphas = {1.0, 3.0, -2.0};

#define REAL [](const RealArgs& r) -> Bound
#define INT [](const IntArgs& i) -> Int
#define A r.in[0]
#define B r.in[1]
#define C r.in[2]
#define U r.precision.u()

// Reference of one opcode; `real`/`integer` stay null where no formula is written.
Reference referenceOf(Opcode op) {
  Reference ref;
  switch (op) {
    // Exact: sign, zero sign and NaN as PyTorch's CPU kernels (sign(NaN) = 0, relu(-0) = -0).
    case Opcode::kAbs:
      ref.real = REAL { return {std::fabs(A)}; };
      ref.integer = INT { return wrapTo(i.in[0] < 0 ? -i.in[0] : i.in[0], i.bits, i.is_signed); };
      break;
    case Opcode::kNeg:
      ref.real = REAL { return {-A}; };
      ref.integer = INT { return wrapTo(-i.in[0], i.bits, i.is_signed); };
      break;
    case Opcode::kSign:
      ref.real = REAL { return {std::isnan(A) ? 0 : A > 0 ? 1 : A < 0 ? -1 : Real(0)}; };
      ref.integer = INT { return i.in[0] > 0 ? 1 : i.in[0] < 0 ? -1 : 0; };
      break;
    case Opcode::kRelu:
      ref.real = REAL { return {A < 0 ? Real(0) : A}; };
      ref.integer = INT { return i.in[0] < 0 ? 0 : i.in[0]; };
      break;
    // The CPU kernels' steps: x + 3 (rounded), held in [0, 6], over 6 (rounded), and for
    // hardswish times x first (rounded); the sum's rounding carries through.
    case Opcode::kHardSigmoid:
      ref.real = REAL {
        const Real held = std::min(std::max(A + 3, Real(0)), Real(6));
        return {held / 6, 0.5, 0, r.precision.u() * std::fabs(A + 3) / 6};
      };
      break;
    case Opcode::kHardSwish:
      ref.real = REAL {
        const Real held = std::min(std::max(A + 3, Real(0)), Real(6));
        return {A * held / 6, 0, 2, std::fabs(A) * r.precision.u() * std::fabs(A + 3) / 6, std::fabs(A * held)};
      };
      break;
    case Opcode::kLeakyRelu:  // one product, rounded
      ref.real = REAL { return {A > 0 ? A : A * r.immediate, 0.5}; };
      ref.float_immediates = {0.01, 0.2, -1.5};
      break;
    case Opcode::kNanToNum:  // the harness sets the first immediate, NaN's replacement; the infinities' are 0
      ref.real = REAL { return {std::isnan(A) ? r.immediate : std::isinf(A) ? Real(0) : A}; };
      ref.float_immediates = {0.0, 1.5, -2.0};
      break;
    // expm1(x input_scale) alpha scale: expm1's ulps (libm's scalar form: 2, 4u of it),
    // its argument's rounding (moving it by exp(z) |z| u), then the product with alpha
    // scale, itself a rounded product (2u of the value); scale x one rounding, zeros too.
    case Opcode::kElu:
      ref.real = REAL {
        const Real scale = r.later[0], input_scale = r.later[1], coefficient = r.immediate * scale;
        if (!(A < 0)) return {A * scale, 0.5, 0, 0, std::fabs(A * scale)};
        const Real z = A * input_scale, e = std::exp(z);
        return {std::expm1(z) * coefficient, 0, 6, e == 0 ? 0 : std::fabs(coefficient) * e * std::fabs(z) * U};
      };
      ref.float_immediates = {1.0, 1.6732632423543772, -0.5};
      ref.later_immediates = {1.0507009873554805, 0.5};
      break;
    // log1p(exp(z)) / beta of z = beta x as rounded (the kernel's branch reads it): z's
    // rounding moves log1p(exp(z)) by sigmoid(z) |z| u, exp's ulp by sigmoid(z) 2u;
    // log1p's 2 ulps (libm's scalar form) and the quotient 5u of the value; a subnormal
    // exp (z below -87) carries its absolute ulp through.
    case Opcode::kSoftplus:
      ref.real = REAL {
        const Real beta = r.immediate, threshold = r.later[0];
        const Real z = r.precision.compute.round(A * beta);
        if (z > threshold) return {A};
        const Real e = std::exp(z), sigmoid = e / (1 + e);
        const Real moved = sigmoid == 0 ? 0 : sigmoid * (std::fabs(z) + 2) * U;
        return {std::log1p(e) / beta, 0, 5, (moved + 2 * r.precision.compute.ulp(0)) / std::fabs(beta)};
      };
      ref.float_immediates = {1.0, 2.0, -0.5};
      ref.later_immediates = {2.0};
      break;
    // min(x, 0) - log1p(e), e = exp(-|x|): exp's ulp (2u of e) moves log1p by e / (1 + e)
    // 2u, log1p's 2 ulps 4u of it, a subnormal e its absolute ulp; the difference u.
    case Opcode::kLogSigmoid:
      ref.real = REAL {
        const Real e = std::exp(-std::fabs(A)), l = std::log1p(e);
        return {std::min(A, Real(0)) - l, 0, 1, (2 * e / (1 + e) + 4 * l) * U + r.precision.compute.ulp(0)};
      };
      break;
    // x tanh(p), p = log1p(e), e = exp(x): exp's ulp moves p by e / (1 + e) 2u <= 2u of p,
    // log1p's 2u of it; tanh turns p's relative error into at most as much of t
    // ((1 - t^2) p / t <= 1) and adds its own 7u (Sleef's 3.5-ulp tanh); the product u.
    // A subnormal e carries its absolute ulp through p, t and the product.
    case Opcode::kMish:
      ref.real = REAL {
        const Real t = std::tanh(std::log1p(std::exp(A)));
        return {A * t, 0, 12, (2 * std::fabs(A) + 1) * r.precision.compute.ulp(0)};
      };
      break;
    case Opcode::kHardShrink:  // exact
      ref.real = REAL { return {A >= -r.immediate && A <= r.immediate ? Real(0) : A}; };
      ref.float_immediates = {0.5, 0.0, 1.5};
      break;
    case Opcode::kSoftShrink:  // one rounded sum; +0 between, NaN stays
      ref.real = REAL {
        const Real l = r.immediate;
        return {std::isnan(A) ? A : A > l ? A - l : A < -l ? A + l : Real(0), 0.5};
      };
      ref.float_immediates = {0.5, 0.0, 1.5};
      break;
    // Exact: the value where x <= threshold (NaN fails the test), both numbers in the
    // compute type (float32 for float16/bfloat16: the threshold unrounded to the dtype);
    // an integer dtype's truncated, wrapped to the width as PyTorch converts its numbers.
    case Opcode::kThreshold:
      ref.real = REAL { return {A <= r.immediate ? r.later[0] : A}; };
      ref.integer = INT {
        const Int threshold = wrapTo(i.immediate, i.bits, i.is_signed);
        return i.in[0] <= threshold ? wrapTo(i.later[0], i.bits, i.is_signed) : i.in[0];
      };
      ref.float_immediates = {0.5, -1.5, 0.1};
      ref.integer_immediates = {0.0, 2.0, -1.0};
      ref.later_immediates = {-7.2};
      break;
    case Opcode::kNot:
      ref.integer = INT { return i.bits == 1 ? Int(i.in[0] == 0) : wrapTo(~i.in[0], i.bits, i.is_signed); };
      break;
    case Opcode::kFloor: ref.real = REAL { return {std::floor(A)}; }; break;
    case Opcode::kCeil: ref.real = REAL { return {std::ceil(A)}; }; break;
    case Opcode::kRound: ref.real = REAL { return {std::nearbyint(A)}; }; break;  // half to even
    case Opcode::kTrunc: ref.real = REAL { return {std::trunc(A)}; }; break;
    case Opcode::kFrac: ref.real = REAL { return {A - std::trunc(A)}; }; break;  // exact: inf gives NaN

    // One function of the input: the function's own accuracy; IEEE operations 0.5 ulp.
    case Opcode::kExp: ref.real = REAL { return {std::exp(A), kExpUlps}; }; break;
    case Opcode::kExp2: ref.real = REAL { return {std::exp2(A), kLibmUlps}; }; break;
    case Opcode::kExpm1: ref.real = REAL { return {std::expm1(A), kLibmUlps}; }; break;
    case Opcode::kLog: ref.real = REAL { return {std::log(A), kLibmUlps}; }; break;
    case Opcode::kLog2: ref.real = REAL { return {std::log2(A), kLibmUlps}; }; break;
    case Opcode::kLog1p: ref.real = REAL { return {std::log1p(A), kLibmUlps}; }; break;
    case Opcode::kErf: ref.real = REAL { return {std::erf(A), kLibmUlps}; }; break;
    case Opcode::kErfc: ref.real = REAL { return {std::erfc(A), kErfcUlps}; }; break;
    case Opcode::kLog10: ref.real = REAL { return {std::log10(A), kLibmUlps}; }; break;
    case Opcode::kAsin: ref.real = REAL { return {std::asin(A), kLibmUlps}; }; break;
    case Opcode::kAcos: ref.real = REAL { return {std::acos(A), kLibmUlps}; }; break;
    case Opcode::kAtan: ref.real = REAL { return {std::atan(A), kLibmUlps}; }; break;
    case Opcode::kSinh: ref.real = REAL { return {std::sinh(A), kLibmUlps}; }; break;
    case Opcode::kCosh: ref.real = REAL { return {std::cosh(A), kLibmUlps}; }; break;
    case Opcode::kAsinh: ref.real = REAL { return {std::asinh(A), kLibmUlps}; }; break;
    case Opcode::kAcosh: ref.real = REAL { return {std::acosh(A), kLibmUlps}; }; break;
    case Opcode::kAtanh: ref.real = REAL { return {std::atanh(A), kLibmUlps}; }; break;
    case Opcode::kLgamma:
      ref.real = REAL {
        return {std::lgamma(A), 1, 0, lgammaAbsolute(A, r.precision), A > lgammaInfiniteFrom(r.precision) ? kInf : 0};
      };
      break;
    case Opcode::kTanh: ref.real = REAL { return {std::tanh(A), kTanhUlps}; }; break;
    case Opcode::kSin: ref.real = REAL { return {std::sin(A), kLibmUlps}; }; ref.input_limit = trigLimit; break;
    case Opcode::kCos: ref.real = REAL { return {std::cos(A), kLibmUlps}; }; ref.input_limit = trigLimit; break;
    case Opcode::kTan: ref.real = REAL { return {std::tan(A), kLibmUlps}; }; ref.input_limit = trigLimit; break;
    case Opcode::kSqrt: ref.real = REAL { return {std::sqrt(A), 0.5}; }; break;
    case Opcode::kRecip: ref.real = REAL { return {1 / A, 0.5}; }; break;
    // 1 / sqrt(x): two roundings of u each, 2u relative.
    case Opcode::kRsqrt: ref.real = REAL { return {1 / std::sqrt(A), 0, 2}; }; break;

    // 1 / (1 + exp(-x)) and x / (1 + exp(-x)): exp's 1 ulp (2u), the sum (u, its terms
    // positive) and the division (u): 4u. Where exp(-x) overflows the kernel returns 0
    // for a true value below 1 / max (x / max for silu).
    case Opcode::kSigmoid:
      ref.real = REAL { return {1 / (1 + std::exp(-A)), 0, 4, 1 / r.precision.compute.largest()}; };
      break;
    case Opcode::kSilu:
      ref.real = REAL { return {A / (1 + std::exp(-A)), 0, 4, std::fabs(A) / r.precision.compute.largest()}; };
      break;
    // x Phi(x). double: Phi's relative error and the product's rounding. float (and the
    // half types computing in it): a fit of Phi within 4u |x| all told (torch's own
    // formula: 6.3u |x|), half an ulp more where the result is subnormal.
    case Opcode::kGelu:
      ref.real = REAL {
        if (r.precision.compute.digits > 24) return {A * normalCdf(A), 0, normalCdfRelative(A, r.precision) + 1};
        return {A * normalCdf(A), 0.5, 0, 4 * U * std::fabs(A)};
      };
      break;
    // x/2 (1 + tanh(v)), computed as x / (1 + E), E = exp(-2 v): v's error moves the
    // result by |x|/2 sech^2(v) times it; exp's ulp (2u of E, E / (1 + E) = 1 - s of the
    // result, s = (1 + tanh v) / 2), the sum and the quotient 2u more. Where E overflows
    // (v < -44) the result is 0 for one below |x| / the largest float, as silu's.
    case Opcode::kGeluTanh:
      ref.real = REAL {
        const Real inner = geluInner(A), s = onePlusTanh(inner) / 2;
        return {A * s, 0, 2 * (1 - s) + 2,
                std::fabs(A) / 2 * sech2(inner) * geluInnerError(A, U) + std::fabs(A) / r.precision.compute.largest(),
                std::fabs(kGeluC * A * A * A)};
      };
      break;

    // Binary. a +- alpha b: alpha b rounded (u |alpha b|; float16/bfloat16 round it to
    // storage, half an ulp of it), then the sum, 0.5 ulp. Integers wrap.
    case Opcode::kAdd:
      ref.real = REAL {
        const auto [scaling, intermediate] = scaledOperandError(r);
        return {A + r.immediate * B, 0.5, 0, scaling, intermediate};
      };
      ref.integer = INT { return wrapTo(i.in[0] + i.immediate * i.in[1], i.bits, i.is_signed); };
      ref.float_immediates = kFloatAlphas;
      ref.integer_immediates = kIntegerAlphas;
      break;
    case Opcode::kSub:
      ref.real = REAL {
        const auto [scaling, intermediate] = scaledOperandError(r);
        return {A - r.immediate * B, 0.5, 0, scaling, intermediate};
      };
      ref.integer = INT { return wrapTo(i.in[0] - i.immediate * i.in[1], i.bits, i.is_signed); };
      ref.float_immediates = kFloatAlphas;
      ref.integer_immediates = kIntegerAlphas;
      break;
    case Opcode::kMul:
      ref.real = REAL { return {A * B, 0.5}; };
      ref.integer = INT { return wrapTo(i.in[0] * i.in[1], i.bits, i.is_signed); };
      break;
    case Opcode::kDiv: ref.real = REAL { return {A / B, 0.5}; }; break;
    case Opcode::kMax:
      ref.real = REAL { return {std::isnan(A) || std::isnan(B) ? kNaN : std::max(A, B)}; };
      ref.integer = INT { return std::max(i.in[0], i.in[1]); };
      ref.zero_sign_matters = false;
      break;
    case Opcode::kMin:
      ref.real = REAL { return {std::isnan(A) || std::isnan(B) ? kNaN : std::min(A, B)}; };
      ref.integer = INT { return std::min(i.in[0], i.in[1]); };
      ref.zero_sign_matters = false;
      break;
    case Opcode::kPow: ref.real = REAL { return {std::pow(A, B), kLibmUlps}; }; break;
    case Opcode::kAtan2: ref.real = REAL { return {std::atan2(A, B), kAtan2Ulps}; }; break;
    case Opcode::kCopySign: ref.real = REAL { return {std::copysign(A, B)}; }; break;
    // From the nearer end, one fused multiply-add: the difference's rounding (and
    // weight - 1's, past 2) carry through, then the final rounding.
    case Opcode::kLerp:
      ref.real = REAL {
        const Real weight = r.immediate, difference = B - A;
        const Real carried = 2 * r.precision.u() * std::fabs(difference) * (std::fabs(weight) + 1);
        return {A + weight * difference, 0.5, 0, carried, std::fabs(difference) * (std::fabs(weight) + 1)};
      };
      ref.float_immediates = {0.25, 0.75, -1.5};
      break;
    case Opcode::kHypot: ref.real = REAL { return {std::hypot(A, B), kLibmUlps}; }; break;  // Sleef u05, libm 1
    case Opcode::kFMax:  // std::max and std::min keep a at a tie (0 and -0), as the kernels
      ref.real = REAL { return {std::isnan(A) ? B : std::isnan(B) ? A : std::max(A, B)}; };
      break;
    case Opcode::kFMin:
      ref.real = REAL { return {std::isnan(A) ? B : std::isnan(B) ? A : std::min(A, B)}; };
      break;
    case Opcode::kLogAddExp: ref.real = REAL { return logAddExpBound(r, false); }; break;
    case Opcode::kLogAddExp2: ref.real = REAL { return logAddExpBound(r, true); }; break;
    // Exact: b where a is 0 (either sign), else 1 above 0 and 0 below it (NaN too).
    case Opcode::kHeaviside:
      ref.real = REAL { return {A == 0 ? B : Real(A > 0)}; };
      ref.integer = INT { return i.in[0] == 0 ? i.in[1] : Int(i.in[0] > 0); };
      break;
    // a log(b): libm's log (2 ulp: 4u relative) and the product (u); float16/bfloat16
    // round log(b) to storage before the product (half an ulp of it, relative).
    case Opcode::kXlogy:
      ref.real = REAL {
        const Real relative = 5 + (r.precision.storage.digits < r.precision.compute.digits
                                       ? r.precision.storage.unitRoundoff() / U : 0);
        return {std::isnan(B) ? kNaN : A == 0 ? Real(0) : A * std::log(B), 0, relative};
      };
      break;
    case Opcode::kAnd: ref.integer = INT { return i.in[0] & i.in[1]; }; break;
    case Opcode::kOr: ref.integer = INT { return wrapTo(i.in[0] | i.in[1], i.bits, i.is_signed); }; break;
    case Opcode::kXor: ref.integer = INT { return wrapTo(i.in[0] ^ i.in[1], i.bits, i.is_signed); }; break;
    // Shifts past the width (the shift amount read as signed): left gives 0, right
    // fills with the sign; within it, a * 2^b wrapped and floor(a / 2^b).
    case Opcode::kShiftLeft:
      ref.integer = INT {
        const Int amount = wrapTo(i.in[1], i.bits, true);
        if (amount < 0 || amount >= i.bits) return 0;
        return wrapTo(i.in[0] * (Int(1) << amount), i.bits, i.is_signed);
      };
      break;
    case Opcode::kShiftRight:
      ref.integer = INT {
        const Int amount = wrapTo(i.in[1], i.bits, true);
        if (amount < 0 || amount >= i.bits) return i.in[0] < 0 ? -1 : 0;
        return floorDivide(i.in[0], Int(1) << amount);
      };
      break;
    // C's fmod (the sign of a) and Python's % (the sign of b; a zero keeps fmod's sign,
    // as PyTorch's CPU kernel: remainder(-4., 2.) is -0.): fmod is exact, the
    // correction by b one rounding. Integers: truncated and floored division's remainders.
    case Opcode::kFmod:
      ref.real = REAL { return {std::fmod(A, B)}; };
      ref.integer = INT { return wrapTo(i.in[0] % i.in[1], i.bits, i.is_signed); };
      ref.divides = true;
      break;
    case Opcode::kRemainder:
      ref.real = REAL {
        const Real mod = std::fmod(A, B);
        return {mod != 0 && std::signbit(mod) != std::signbit(B) ? mod + B : mod, 0.5};
      };
      ref.integer = INT { return wrapTo(i.in[0] - i.in[1] * floorDivide(i.in[0], i.in[1]), i.bits, i.is_signed); };
      ref.divides = true;
      break;
    // Python's //, as c10::div_floor_floating computes it in the dtype (float16 and
    // bfloat16 rounded after every step): (a - fmod(a, b)) / b is the integer n = floor
    // within 2u|n| (two roundings), which its final rounding to the nearest integer
    // recovers while that stays below 1/2; beyond, it may be one off (PyTorch's CPU
    // kernels too: float16 -5.890625 // -0.00671 is 876 in its vector loop, exactly
    // 877; float32 1.1426e29 // -1.3773e22 is -8295729, exactly -8295728), and past
    // 2^digits an ulp of storage.
    case Opcode::kFloorDiv:
      ref.real = REAL {
        const Real q = floorQuotient(A, B);
        const Real drift = 2 * r.precision.storage.unitRoundoff() * std::fabs(q);
        const Real off = !std::isfinite(q) || drift < 0.5 ? 0 : std::max(std::ceil(drift), r.precision.storage.ulp(q));
        return {q, 0, 0, off};
      };
      ref.integer = INT { return wrapTo(floorDivide(i.in[0], i.in[1]), i.bits, i.is_signed); };
      ref.divides = true;
      break;
    // trunc of the quotient rounded to storage (PyTorch: trunc(a / b) in the dtype):
    // the quotient's rounding (float16/bfloat16: through float, an ulp of storage) may
    // move it across an integer.
    case Opcode::kTruncDiv:
      ref.real = REAL {
        const Real q = A / B;
        const Real t = std::trunc(q);
        const Real slack = r.precision.storage.ulp(q);
        const Real across = std::isfinite(q) ? std::max(std::fabs(std::trunc(q + slack) - t), std::fabs(std::trunc(q - slack) - t)) : 0;
        return {t, 0, 0, across};
      };
      ref.integer = INT { return wrapTo(i.in[0] / i.in[1], i.bits, i.is_signed); };
      ref.divides = true;
      break;

    // Activation gradients, inputs (grad a, x b) or (grad a, y b).
    case Opcode::kReluGrad:
      ref.real = REAL { return {B <= r.immediate ? Real(0) : A}; };
      ref.integer = INT { return i.in[1] <= i.immediate ? 0 : i.in[0]; };
      ref.float_immediates = {0.0, 1.5, -0.5};
      ref.integer_immediates = {0.0, 2.0};
      break;
    // g (1 - y)(y): three roundings. g (1 - y^2): y^2 (u y^2), the difference, the product.
    case Opcode::kSigmoidGrad:
      ref.real = REAL { return {A * (1 - B) * B, 0, 3, 0, std::fabs(A * (1 - B))}; };
      break;
    // The CPU's vector loops: 1/6 a float32 constant (for float64 too), hardswish's
    // corners -3 (0) and 3 (the gradient), a NaN x gives NaN there and 0 for the shrinks.
    case Opcode::kHardSigmoidGrad:
      ref.real = REAL { return {B > -3 && B < 3 ? A * Real(1.0f / 6.0f) : Real(0), 0.5}; };
      break;
    case Opcode::kHardSwishGrad:  // x / 3 and the sum rounded (u each, of what they are), then the product
      ref.real = REAL {
        if (B <= -3) return {Real(0)};
        if (B >= 3) return {A};
        return {A * (B / 3 + Real(0.5)), 0, 2, U * std::fabs(A * B / 3), std::fabs(A)};
      };
      break;
    case Opcode::kLeakyReluGrad:
      ref.real = REAL { return {A * (B > 0 ? Real(1) : r.immediate), 0.5}; };
      ref.float_immediates = {0.01, 0.2, -1.5};
      break;
    case Opcode::kShrinkGrad:
      ref.real = REAL { return {B < -r.immediate || B > r.immediate ? A : Real(0)}; };
      ref.float_immediates = {0.5, 0.0, 1.5};
      break;
    // g (x < 0 ? 1 - q : q), q = e / (1 + e), e = exp(-|x|): e's ulp, the sum and the
    // quotient carry 5u of q into either side, the product u; a subnormal e its ulp.
    case Opcode::kLogSigmoidGrad:
      ref.real = REAL {
        const Real e = std::exp(-std::fabs(B)), q = e / (1 + e);
        return {A * (B < 0 ? 1 - q : q), 0, 2, std::fabs(A) * (6 * U * q + r.precision.compute.ulp(0)), std::fabs(A)};
      };
      break;
    // From x (is_result 0; the from-y form is bare arithmetic, compared with the CPU's bits
    // in test_elementwise.py): ((g input_scale) c) exp(z), c = alpha scale rounded,
    // z = x input_scale: three rounded products (u each), exp's ulp (2u), z's rounding
    // (|z| u of exp); a subnormal exp its absolute ulp times the factors before it.
    case Opcode::kEluGrad:
      ref.real = REAL {
        const Real scale = r.later[0], input_scale = r.later[1];
        if (B > 0) return {A * scale, 0.5, 0, 0, std::fabs(A * scale)};
        const Real coefficient = r.precision.compute.round(r.immediate * scale), z = B * input_scale;
        const Real factor = std::fabs(A * input_scale * coefficient);
        return {A * input_scale * coefficient * std::exp(z), 0, 5 + std::fabs(z),
                (factor + 1) * r.precision.compute.ulp(0), std::max(std::fabs(A * input_scale), factor)};
      };
      ref.float_immediates = {1.0, 1.6732632423543772, -0.5};
      ref.later_immediates = {1.0507009873554805, 0.5, 0.0};
      break;
    // g e / (e + 1), e = exp(z), z = beta x as rounded (the branch reads it): z's rounding
    // and exp's ulp carry (|z| + 2) u into e, at most that into e + 1, the product, sum and
    // quotient u each; a subnormal e its absolute ulp through the product.
    case Opcode::kSoftplusGrad:
      ref.real = REAL {
        const Real z = r.precision.compute.round(B * r.immediate);
        if (z > r.later[0]) return {A};
        const Real e = std::exp(z);
        return {A * e / (e + 1), 0, 7 + 2 * std::fabs(z), (std::fabs(A) + 1) * r.precision.compute.ulp(0),
                std::fabs(A * e)};
      };
      ref.float_immediates = {1.0, 2.0, -0.5};
      ref.later_immediates = {2.0};
      break;
    // g (t + x s (1 - t^2)) with t as in tmish (12u) and
    // s = 1 / (1 + exp(-x)) (exp's ulp, the sum and quotient: 4u): the terms' errors are
    // absolute, t's 12u |t|, t^2's 25u t^2 and (1 - t^2)'s u of x s's product, x s's 5u of
    // |x s (1 - t^2)|; the sum and the product with g 2u of the value. The sum cancels near
    // x = -1.19, where only this absolute bound holds; a subnormal exp (t's, or s's, which
    // x then scales) its absolute ulp, and s 0 where exp(-x) overflows (as the CPU's
    // formula gives it) all of s, below the smallest normal, x s then off by |x| times that.
    case Opcode::kMishGrad:
      ref.real = REAL {
        const Real t = std::tanh(std::log1p(std::exp(B))), s = 1 / (1 + std::exp(-B)), xs = B * s;
        const Real inner = t + xs * (1 - t * t);
        const Real terms = 12 * std::fabs(t) + std::fabs(xs) * (25 * t * t + 6 * std::fabs(1 - t * t));
        const Real lost = std::exp(-B) > r.precision.compute.largest() ? r.precision.compute.smallestNormal() : 0;
        return {A * inner, 0, 2,
                std::fabs(A) * (terms * U + (2 * std::fabs(B) + 4) * r.precision.compute.ulp(0) + std::fabs(B) * lost),
                std::fabs(A) * (std::fabs(t) + std::fabs(xs))};
      };
      break;
    case Opcode::kHardtanhGrad:  // exact; a NaN x gives 0, as the CPU's vector loop
      ref.real = REAL { return {B > r.immediate && B < r.later[0] ? A : Real(0)}; };
      ref.float_immediates = {-1.0, 0.0, 0.5};
      ref.later_immediates = {1.0};
      break;
    case Opcode::kTanhGrad:
      ref.real = REAL {
        return {A * (1 - B * B), 0, 2, U * std::fabs(A) * (B * B + std::fabs(1 - B * B)), std::max(B * B, std::fabs(A * B * B))};
      };
      break;
    // g s (1 + x (1 - s)), s the sigmoid (4u): 1 - s carries s's error absolutely.
    case Opcode::kSiluGrad:
      ref.real = REAL {
        const Real s = 1 / (1 + std::exp(-B));
        const Real inner = 1 + B * (1 - s);
        const Real inner_error = std::fabs(B) * (4 * U * s + 2 * U * (1 - s)) + U * std::fabs(inner);
        const Real error = std::fabs(A) * (s * inner_error + 4 * U * s * std::fabs(inner));
        return {A * s * inner, 0, 2, error + std::fabs(A) * (1 + std::fabs(B)) / r.precision.compute.largest(),
                std::fabs(A * B)};
      };
      break;
    // g (Phi(x) + x phi(x)): Phi's relative error; phi = exp(-x^2/2)/sqrt(2 pi): exp's
    // 2u, its argument's u x^2/2, two products; the sum and the product.
    case Opcode::kGeluGrad:
      ref.real = REAL {
        const Real cdf = normalCdf(B), density_term = B * normalPdf(B);
        const Real error = std::fabs(A) * (normalCdfRelative(B, r.precision) * U * cdf +
                                           (5 + B * B / 2) * U * std::fabs(density_term) +
                                           U * std::fabs(cdf + density_term));
        return {A * (cdf + density_term), 0, 1, error, std::fabs(A * B * B)};
      };
      break;
    // g ((1 + t)/2 + x/2 (1 - t^2) k (1 + 3 c x^2)): t's error as in gelu_tanh, 1 - t^2
    // twice it, the products (6u) and sums.
    case Opcode::kGeluTanhGrad:
      ref.real = REAL {
        const Real inner = geluInner(B), t = std::tanh(inner);
        const Real t_error = 7 * U * std::fabs(t) + sech2(inner) * geluInnerError(B, U);
        const Real slope = kGeluK * (1 + 3 * kGeluC * B * B);
        const Real left = B / 2 * sech2(inner) * slope;
        const Real sum = onePlusTanh(inner) / 2 + left;
        const Real error = std::fabs(A) * (t_error / 2 + U * onePlusTanh(inner) / 2 +
                                           std::fabs(B / 2 * slope) * (2 * t_error + 2 * U) + 6 * U * std::fabs(left) +
                                           U * std::fabs(sum));
        return {A * sum, 0, 1, error, std::max(std::fabs(kGeluC * B * B * B), std::fabs(A * kGeluC * B * B * B))};
      };
      break;

    // Ternary: a + value b c with value b rounded then one fused multiply-add; a +
    // (value b) / c, two roundings of the quotient and the sum. Integers wrap.
    case Opcode::kAddcmul:
      ref.real = REAL {
        const Real scaled = r.immediate * B;
        const Real scaled_underflow = r.precision.compute.ulp(0) / 2 * std::fabs(C);
        return {A + scaled * C, 0.5, 0, U * std::fabs(scaled * C) + scaled_underflow, std::fabs(scaled)};
      };
      // The triple product of int64s leaves even 128 bits: it wraps there (unsigned), which
      // agrees with the wrap to the dtype's width, a divisor of 2^128.
      ref.integer = INT {
        using Wide = unsigned __int128;
        const Wide product = static_cast<Wide>(i.immediate) * static_cast<Wide>(i.in[1]) * static_cast<Wide>(i.in[2]);
        return wrapTo(static_cast<Int>(static_cast<Wide>(i.in[0]) + product), i.bits, i.is_signed);
      };
      ref.float_immediates = {1.0, -0.5, 0.3};
      ref.integer_immediates = {1.0, 3.0, -2.0};
      break;
    case Opcode::kAddcdiv:
      ref.real = REAL {
        const Real quotient = r.immediate * B / C;
        const Real scaled_underflow = r.precision.compute.ulp(0) / 2 / std::fabs(C);
        return {A + quotient, 0.5, 0, 2 * U * std::fabs(quotient) + scaled_underflow,
                std::max(std::fabs(r.immediate * B), std::fabs(quotient))};
      };
      ref.float_immediates = {1.0, -0.5, 0.3};
      break;
    // tlerp's bound with the weight an input: from the nearer end, one fused multiply-add.
    case Opcode::kLerpWeights:
      ref.real = REAL {
        const Real difference = B - A;
        const Real carried = 2 * r.precision.u() * std::fabs(difference) * (std::fabs(C) + 1);
        return {A + C * difference, 0.5, 0, carried, std::fabs(difference) * (std::fabs(C) + 1)};
      };
      break;
    // min(max(a, b), c), exact: a at a tie (its sign of zero), NaN where any input is.
    case Opcode::kClamp:
      ref.real = REAL {
        if (std::isnan(A) || std::isnan(B) || std::isnan(C)) return {kNaN};
        const Real raised = A < B ? B : A;
        return {C < raised ? C : raised};
      };
      ref.integer = INT { return std::min(std::max(i.in[0], i.in[1]), i.in[2]); };
      break;

    // Comparisons: IEEE (NaN unordered, -0 == 0).
    case Opcode::kEq:
      ref.real = REAL { return {Real(A == B)}; };
      ref.integer = INT { return i.in[0] == i.in[1]; };
      break;
    case Opcode::kNe:
      ref.real = REAL { return {Real(A != B)}; };
      ref.integer = INT { return i.in[0] != i.in[1]; };
      break;
    case Opcode::kLt:
      ref.real = REAL { return {Real(A < B)}; };
      ref.integer = INT { return i.in[0] < i.in[1]; };
      break;
    case Opcode::kLe:
      ref.real = REAL { return {Real(A <= B)}; };
      ref.integer = INT { return i.in[0] <= i.in[1]; };
      break;
    case Opcode::kGt:
      ref.real = REAL { return {Real(A > B)}; };
      ref.integer = INT { return i.in[0] > i.in[1]; };
      break;
    case Opcode::kGe:
      ref.real = REAL { return {Real(A >= B)}; };
      ref.integer = INT { return i.in[0] >= i.in[1]; };
      break;
    default:
      break;
  }
  return ref;
}

#undef REAL
#undef INT
#undef A
#undef B
#undef C
#undef U

// ---------------------------------------------------------------------------
// Element types: their format, and values in and out of memory.
// ---------------------------------------------------------------------------

template <DType dtype>
struct Element;

template <> struct Element<DType::kFloat16> {
  using Storage = uint16_t;
  static constexpr Format kFormat = kHalfFormat, kCompute = kFloatFormat;
  static Real decode(Storage s) { return decodeHalf(s); }
  static Storage encode(Real v) { return encodeHalf(v); }
};
template <> struct Element<DType::kBFloat16> {
  using Storage = uint16_t;
  static constexpr Format kFormat = kBFloat16Format, kCompute = kFloatFormat;
  static Real decode(Storage s) { return decodeBFloat16(s); }
  static Storage encode(Real v) { return encodeBFloat16(v); }
};
template <> struct Element<DType::kFloat32> {
  using Storage = float;
  static constexpr Format kFormat = kFloatFormat, kCompute = kFloatFormat;
  static Real decode(Storage s) { return s; }
  static Storage encode(Real v) { return static_cast<float>(v); }
};
template <> struct Element<DType::kFloat64> {
  using Storage = double;
  static constexpr Format kFormat = kDoubleFormat, kCompute = kDoubleFormat;
  static Real decode(Storage s) { return s; }
  static Storage encode(Real v) { return static_cast<double>(v); }
};
template <> struct Element<DType::kBool> { using Storage = bool; };
template <> struct Element<DType::kUInt8> { using Storage = uint8_t; };
template <> struct Element<DType::kInt8> { using Storage = int8_t; };
template <> struct Element<DType::kInt16> { using Storage = int16_t; };
template <> struct Element<DType::kInt32> { using Storage = int32_t; };
template <> struct Element<DType::kInt64> { using Storage = int64_t; };

template <DType dtype>
constexpr bool kFloating = isa::isFloating(dtype);

// Inputs: first the special values in pairs (and triples, in part), so every pair of
// specials meets in a binary op; then seeded values, half of them in [-8, 8] on a
// grid of the format, half arbitrary bit patterns (every exponent, subnormals, NaN
// payloads).
template <DType dtype>
std::vector<Real> floatSpecials() {
  constexpr Format f = Element<dtype>::kFormat;
  std::vector<Real> values = {0, -0.0L, kInf, -kInf, kNaN, 1, -1, 0.5, -0.5, 2, -2, 3, -3, 0.25, 1.5, -2.5,
                              10, -10, 100, -100, 88.5, -88.5, 710, -710, 1e-3L, -0.75,
                              // exp's and pow's last finite results in double (Sleef issue 523)
                              709.782712L, 1023.9999999L,
                              f.largest(), -f.largest(), f.smallestNormal(), -f.smallestNormal(),
                              f.ulp(0), -f.ulp(0)};
  for (Real& v : values) v = f.round(v);
  return values;
}

template <DType dtype>
std::vector<Int> integerSpecials() {
  using S = typename Element<dtype>::Storage;
  if constexpr (dtype == DType::kBool) {
    return {0, 1};
  } else {
    constexpr int bits = sizeof(S) * 8;
    std::vector<Int> values = {0, 1, -1, 2, -2, 3, -3, 7, -7, 5, bits - 1, bits, bits + 1,
                               std::numeric_limits<S>::min(), std::numeric_limits<S>::max(),
                               Int(std::numeric_limits<S>::min()) + 1, Int(std::numeric_limits<S>::max()) - 1};
    for (Int& v : values) v = static_cast<S>(v);
    return values;
  }
}

// A value in [-8, 8] on a grid of the format (every one of its values there at its
// coarsest spacing).
template <DType dtype>
Real gridFloat(std::mt19937_64& rng) {
  constexpr Format f = Element<dtype>::kFormat;
  const int64_t span = int64_t{1} << (f.digits - 1);
  return std::ldexp(static_cast<Real>(std::uniform_int_distribution<int64_t>(-span, span)(rng)), 4 - f.digits);
}

template <DType dtype>
Real randomFloat(std::mt19937_64& rng) {
  using S = typename Element<dtype>::Storage;
  if (rng() % 2) return gridFloat<dtype>(rng);
  if constexpr (sizeof(S) == 2) return Element<dtype>::decode(static_cast<uint16_t>(rng()));
  else if constexpr (sizeof(S) == 4) return std::bit_cast<float>(static_cast<uint32_t>(rng()));
  else return std::bit_cast<double>(static_cast<uint64_t>(rng()));
}

template <DType dtype>
Int randomInteger(std::mt19937_64& rng) {
  using S = typename Element<dtype>::Storage;
  if constexpr (dtype == DType::kBool) return rng() % 2;
  else if (rng() % 2) return static_cast<S>(static_cast<int64_t>(rng() % 21) - 10);
  else return static_cast<S>(rng());
}

// ---------------------------------------------------------------------------
// One instruction over [rows, cols] operands in a layout, checked element by element.
// ---------------------------------------------------------------------------

enum class Layout {
  kContiguous,  // every operand row-major: the kernels' contiguous (vector) paths
  kStrided,     // every operand's elements two apart: the strided scalar paths
  kBroadcast,   // inputs after the first repeat one element per row: the scalar-operand paths
};

constexpr int64_t kRows = 24, kCols = 67;  // 67: vectors and a partial one per row

isa::Operand operandOf(int32_t buffer, DType dtype, Layout layout, bool repeated, int64_t* elements) {
  isa::Operand operand;
  operand.buffer = buffer;
  operand.dtype = dtype;
  operand.rank = 2;
  operand.shape = {kRows, kCols};
  const int64_t step = layout == Layout::kStrided ? 2 : 1;
  operand.strides = {kCols * step, step};
  if (repeated) operand.strides = {1, 0};
  *elements = repeated ? kRows : kRows * kCols * step;
  return operand;
}

const char* layoutName(Layout layout) {
  switch (layout) {
    case Layout::kContiguous: return "contiguous";
    case Layout::kStrided: return "strided";
    case Layout::kBroadcast: return "broadcast";
  }
  return "?";
}

std::string realText(Real v) {
  std::ostringstream out;
  out.precision(21);
  out << v;
  return out.str();
}

template <DType dtype>
class Case {
 public:
  using S = typename Element<dtype>::Storage;
  using Memory = std::conditional_t<std::is_same_v<S, bool>, uint8_t, S>;  // std::vector<bool> has no data()

  Case(const isa::InstructionInfo& row, const Reference& ref, double immediate, Layout layout, uint64_t seed)
      : row_(row), ref_(ref), immediate_(immediate), layout_(layout), rng_(seed) {}

  void run() {
    const DType out_dtype = row_.output == isa::OutputDType::Bool ? DType::kBool : dtype;
    isa::Instruction instruction;
    instruction.opcode = row_.opcode;
    instruction.immediates[0] = row_.immediateCount() > 0 ? immediate_ : 0;
    for (size_t k = 0; k < ref_.later_immediates.size(); ++k) instruction.immediates[1 + k] = ref_.later_immediates[k];
    std::vector<std::vector<Memory>> inputs(row_.inputs);
    int64_t elements = 0;
    std::vector<uint8_t> out_memory;
    instruction.operands.push_back(operandOf(0, out_dtype, layout_, false, &elements));
    out_memory.assign(static_cast<size_t>(elements) * isa::dtypeSize(out_dtype), 0xa5);
    for (int k = 0; k < row_.inputs; ++k) {
      const bool repeated = layout_ == Layout::kBroadcast && k > 0;
      instruction.operands.push_back(operandOf(k + 1, dtype, layout_, repeated, &elements));
      inputs[k].resize(static_cast<size_t>(elements));
    }
    fillInputs(instruction, inputs);
    std::vector<void*> buffers = {out_memory.data()};
    for (auto& input : inputs) buffers.push_back(input.data());
    std::vector<uint64_t> bytes = {out_memory.size()};
    for (auto& input : inputs) bytes.push_back(input.size() * sizeof(Memory));
    ASSERT_EQ(isa::verifyInstruction(instruction, bytes), "") << isa::print(instruction);
    kernels::execute(instruction, buffers);

    int failures = 0;
    for (int64_t i = 0; i < kRows && failures < 5; ++i) {
      for (int64_t j = 0; j < kCols && failures < 5; ++j) {
        std::array<S, 3> in{};
        for (int k = 0; k < row_.inputs; ++k) in[k] = static_cast<S>(inputs[k][position(instruction.operands[k + 1], i, j)]);
        const int64_t at = position(instruction.operands[0], i, j);
        std::string problem = out_dtype == DType::kBool
            ? check(in, Real(out_memory[at]))
            : check(in, readOutput(out_memory.data() + at * sizeof(S)));
        if (!problem.empty()) {
          ++failures;
          ADD_FAILURE() << row_.name << " " << isa::dtypeName(dtype) << " " << layoutName(layout_)
                        << (row_.immediateCount() > 0 ? " " + std::string(row_.immediates[0]) + "=" + std::to_string(immediate_) : "")
                        << " inputs (" << inputText(in) << "): " << problem;
        }
      }
    }
  }

  // "" when `got` is right for the inputs `in` (the first row.inputs of them), else what was expected.
  std::string check(const std::array<S, 3>& in, Real got) const {
    if constexpr (kFloating<dtype>) {
      RealArgs args{{}, static_cast<Real>(precision().compute.round(immediate_)), precision()};
      for (size_t k = 0; k < ref_.later_immediates.size(); ++k) {
        args.later[k] = static_cast<Real>(precision().compute.round(ref_.later_immediates[k]));
      }
      for (int k = 0; k < row_.inputs; ++k) args.in[k] = Element<dtype>::decode(in[k]);
      const Bound bound = ref_.real(args);
      if (row_.output == isa::OutputDType::Bool) {
        return got == bound.value ? "" : "expected " + realText(bound.value) + ", got " + realText(got);
      }
      return compareFloat(bound, got);
    } else {
      IntArgs args{{}, static_cast<Int>(immediate_), dtype == DType::kBool ? 1 : static_cast<int>(sizeof(S) * 8),
                   std::numeric_limits<S>::is_signed};
      for (size_t k = 0; k < ref_.later_immediates.size(); ++k) args.later[k] = static_cast<Int>(ref_.later_immediates[k]);
      for (int k = 0; k < row_.inputs; ++k) args.in[k] = static_cast<Int>(in[k]);
      const Int expected = ref_.integer(args);
      return static_cast<Real>(expected) == got ? "" : "expected " + realText(static_cast<Real>(expected)) + ", got " + realText(got);
    }
  }

 private:
  static int64_t position(const isa::Operand& operand, int64_t i, int64_t j) {
    return operand.offset + i * operand.strides[0] + j * operand.strides[1];
  }

  Real readOutput(const uint8_t* p) const {
    S value;
    std::memcpy(&value, p, sizeof value);
    if constexpr (kFloating<dtype>) return Element<dtype>::decode(value);
    else return static_cast<Real>(value);
  }

  static Real toReal(S s) {
    if constexpr (kFloating<dtype>) return Element<dtype>::decode(s);
    else return static_cast<Real>(s);
  }

  std::string inputText(const std::array<S, 3>& in) const {
    std::string text;
    for (int k = 0; k < row_.inputs; ++k) text += (k ? ", " : "") + realText(toReal(in[k]));
    return text;
  }

  S inputValue(int k, int64_t e) {
    if constexpr (kFloating<dtype>) {
      static const std::vector<Real> specials = floatSpecials<dtype>();
      const auto n = static_cast<int64_t>(specials.size());
      const int64_t index = k == 0 ? e : k == 1 ? e / n : e + e / n;
      Real v = e < n * n ? specials[index % n] : randomFloat<dtype>(rng_);
      if (ref_.input_limit && std::isfinite(v) && std::fabs(v) > ref_.input_limit(precision())) v = gridFloat<dtype>(rng_);
      return Element<dtype>::encode(v);
    } else {
      static const std::vector<Int> specials = integerSpecials<dtype>();
      const auto n = static_cast<int64_t>(specials.size());
      const int64_t index = k == 0 ? e : k == 1 ? e / n : e + e / n;
      Int v = e < n * n ? specials[index % n] : randomInteger<dtype>(rng_);
      if (ref_.divides && k == 1 && v == 0) v = 1;
      return static_cast<S>(v);
    }
  }

  // Logical element (i, j) of input k is value number i * cols + j of its sequence;
  // a repeated operand takes its row's first.
  void fillInputs(const isa::Instruction& instruction, std::vector<std::vector<Memory>>& inputs) {
    for (int k = 0; k < row_.inputs; ++k) {
      const isa::Operand& operand = instruction.operands[k + 1];
      for (int64_t i = 0; i < kRows; ++i) {
        for (int64_t j = 0; j < kCols; ++j) {
          if (operand.strides[1] == 0 && j > 0) continue;
          inputs[k][position(operand, i, j)] = inputValue(k, i * kCols + j);
        }
      }
    }
  }

  static Precision precision() { return {Element<dtype>::kCompute, Element<dtype>::kFormat}; }

  std::string compareFloat(const Bound& bound, Real got) const {
    const Precision p = precision();
    const Format& storage = p.storage;
    const Real value = bound.value;
    const bool overflowed = bound.intermediate >= p.compute.overflowThreshold();
    auto fail = [&](const std::string& why) {
      return "expected " + realText(value) + ", got " + realText(got) + " (" + why + ")";
    };
    if (std::isnan(value) || std::isnan(got)) {
      if (std::isnan(value) && std::isnan(got)) return "";
      return overflowed && !std::isfinite(got) ? "" : fail("NaN");
    }
    // The kernel's own error, then the rounding to storage, then the reference's: its
    // long double functions are within a few ulps of long double (glibc's largest
    // known errors for them: 5, erfcl), 16 of them counted, of the result and of the
    // terms it cancels.
    // Each rounding counted relatively (u of its result) may lose up to half the
    // smallest subnormal instead.
    Real tolerance = bound.ulps * p.compute.ulp(value) + bound.relative * (p.u() * std::fabs(value) + p.compute.ulp(0) / 2) +
                     bound.absolute;
    if (storage.digits < p.compute.digits) tolerance += storage.ulp(std::fabs(value) + tolerance) / 2;
    tolerance += 16 * kLongDoubleFormat.unitRoundoff() * (std::fabs(value) + bound.absolute / p.u());
    if (std::isnan(tolerance)) tolerance = 0;  // a bound's terms at infinite inputs (inf * 0): results there are exact
    if (std::isinf(value) || std::isinf(got)) {
      if (got == value) return "";
      if (overflowed) return "";
      // A finite result within the tolerance of the overflow threshold may round either way.
      const Real finite = std::isinf(got) ? value : got;
      const Real infinite = std::isinf(got) ? got : value;
      if (std::signbit(finite) == std::signbit(infinite) && std::fabs(finite) + tolerance >= storage.overflowThreshold()) return "";
      return fail("infinity");
    }
    if (std::fabs(got - value) > tolerance) return fail("off by " + realText(std::fabs(got - value) / p.compute.ulp(value)) + " ulp of the compute type, tolerance " + realText(tolerance / p.compute.ulp(value)));
    const bool exact = bound.ulps == 0 && bound.relative == 0 && bound.absolute == 0;
    if (exact && value == 0 && ref_.zero_sign_matters && std::signbit(got) != std::signbit(value)) return fail("zero's sign");
    return "";
  }

  const isa::InstructionInfo& row_;
  const Reference& ref_;
  double immediate_;
  Layout layout_;
  std::mt19937_64 rng_;
};

// Calls fn.template operator()<dtype>() with `dtype` as a template argument.
template <typename Fn>
void withDType(DType dtype, Fn&& fn) {
  switch (dtype) {
#define PTO_WITH_DTYPE(name, text, size) \
    case DType::name: fn.template operator()<DType::name>(); return;
    PTO_DTYPES(PTO_WITH_DTYPE)
#undef PTO_WITH_DTYPE
  }
}

void checkGroup(Group group) {
  int combinations = 0;
  for (const isa::InstructionInfo& row : isa::instructionTable()) {
    if (row.group != group) continue;
    const Reference ref = referenceOf(row.opcode);
    for (int d = 0; d < isa::kDTypeCount; ++d) {
      const auto dtype = static_cast<DType>(d);
      if (!row.dtypes.contains(dtype)) continue;
      const bool floating = isa::isFloating(dtype);
      if (floating ? !ref.real : !ref.integer) {
        ADD_FAILURE() << row.name << " takes " << isa::dtypeName(dtype) << " but has no reference here";
        continue;
      }
      const auto& immediates = floating ? ref.float_immediates : ref.integer_immediates;
      for (double immediate : row.immediateCount() > 0 ? immediates : std::vector<double>{0}) {
        for (Layout layout : {Layout::kContiguous, Layout::kStrided, Layout::kBroadcast}) {
          if (layout == Layout::kBroadcast && row.inputs < 2) continue;
          withDType(dtype, [&]<DType dt>() { Case<dt>(row, ref, immediate, layout, 1000 + combinations).run(); });
          ++combinations;
        }
      }
    }
  }
  EXPECT_GT(combinations, 0);
}

// float32 exp is computed inline (vector_math-inl.h) along two paths: one for |x| <= 87,
// one for the rest (subnormal results, overflow, NaN). Its reference's bound on every
// 251st float of [-105, 105] and on every float within 4096 of where a path or the kind
// of result changes: 87, the overflow threshold, the smallest normal, the underflow to 0.
TEST(ElementwiseReference, ExpFloat32Sweep) {
  std::vector<float> inputs;
  for (float start : {0.0f, -0.0f}) {
    for (uint32_t bits = std::bit_cast<uint32_t>(start); std::fabs(std::bit_cast<float>(bits)) <= 105; bits += 251) {
      inputs.push_back(std::bit_cast<float>(bits));
    }
  }
  for (float edge : {87.0f, -87.0f, 88.7228394f, -87.3365479f, -103.972084f}) {
    for (int32_t k = -4096; k <= 4096; ++k) inputs.push_back(std::bit_cast<float>(std::bit_cast<int32_t>(edge) + k));
  }
  const auto n = static_cast<int64_t>(inputs.size());
  std::vector<float> outputs(inputs.size());
  isa::Instruction instruction;
  instruction.opcode = Opcode::kExp;
  instruction.operands = {isa::contiguousOperand(0, DType::kFloat32, {n}), isa::contiguousOperand(1, DType::kFloat32, {n})};
  kernels::execute(instruction, std::vector<void*>{outputs.data(), inputs.data()});
  const Reference ref = referenceOf(Opcode::kExp);
  const Case<DType::kFloat32> reference(isa::info(Opcode::kExp), ref, 0, Layout::kContiguous, 0);
  int failures = 0;
  for (int64_t i = 0; i < n && failures < 5; ++i) {
    const std::string problem = reference.check({inputs[i]}, outputs[i]);
    if (!problem.empty()) {
      ++failures;
      ADD_FAILURE() << "exp(" << realText(inputs[i]) << "): " << problem;
    }
  }
}

TEST(ElementwiseReference, Unary) { checkGroup(Group::Unary); }
TEST(ElementwiseReference, Binary) { checkGroup(Group::Binary); }
TEST(ElementwiseReference, Ternary) { checkGroup(Group::Ternary); }
TEST(ElementwiseReference, Compare) { checkGroup(Group::Compare); }

}  // namespace
