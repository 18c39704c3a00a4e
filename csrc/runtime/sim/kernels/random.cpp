// tuniform, tnormal, trandint, tbernoulli, texponential: Philox4x32-10 blocks turned into the
// requested distribution. Every element's value depends only on the key, the
// counter and its row-major position, so chunks run on any core in any order.
// Compiled once per vector target, chosen at run time (vector_target.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/sim/kernels/random.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

#include "element_types.h"
#include "execute.h"
#include "multi_index.h"
#include "opcode_dispatch.h"
#include "runtime/sim/sim_parallel.h"
#include "vector_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pto::rt::sim::kernels::HWY_NAMESPACE {
namespace {

struct PhiloxKey {
  uint32_t k0, k1;
};

constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;

// One block: the counter's low and high words, two zero words, ten rounds.
void philoxBlock(PhiloxKey key, uint64_t counter, uint32_t* words) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = key.k0, k1 = key.k1;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    c0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    c2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    k0 += kW0;
    k1 += kW1;
  }
  words[0] = c0;
  words[1] = c1;
  words[2] = c2;
  words[3] = c3;
}

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
// The high 32 bits of the eight lane products a * m.
inline __m256i mulHigh(__m256i a, __m256i m) {
  const __m256i even = _mm256_srli_epi64(_mm256_mul_epu32(a, m), 32);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  return _mm256_blend_epi32(even, odd, 0xAA);
}

// Eight consecutive blocks at once, one per vector lane: philoxBlock's twin.
void philoxBlocks8(PhiloxKey key, uint64_t first, uint32_t* words) {
  alignas(32) uint32_t low[8], high[8];
  for (int j = 0; j < 8; ++j) {
    low[j] = static_cast<uint32_t>(first + j);
    high[j] = static_cast<uint32_t>((first + j) >> 32);
  }
  __m256i c0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(low));
  __m256i c1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(high));
  __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(kM0)), m1 = _mm256_set1_epi32(static_cast<int>(kM1));
  uint32_t k0 = key.k0, k1 = key.k1;
  for (int round = 0; round < 10; ++round) {
    const __m256i next0 = _mm256_xor_si256(_mm256_xor_si256(mulHigh(c2, m1), c1), _mm256_set1_epi32(static_cast<int>(k0)));
    const __m256i next2 = _mm256_xor_si256(_mm256_xor_si256(mulHigh(c0, m0), c3), _mm256_set1_epi32(static_cast<int>(k1)));
    c1 = _mm256_mullo_epi32(c2, m1);
    c3 = _mm256_mullo_epi32(c0, m0);
    c0 = next0;
    c2 = next2;
    k0 += kW0;
    k1 += kW1;
  }
  alignas(32) uint32_t lanes[4][8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes[0]), c0);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes[1]), c1);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes[2]), c2);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes[3]), c3);
  for (int j = 0; j < 8; ++j) {
    for (int w = 0; w < 4; ++w) words[4 * j + w] = lanes[w][j];
  }
}
#endif

// Blocks `first` .. `first` + count - 1 into words[4 * count]: the four words of
// block b are words[4b .. 4b+3].
void philoxBlocks(PhiloxKey key, uint64_t first, int64_t count, uint32_t* words) {
  int64_t b = 0;
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
  for (; b + 8 <= count; b += 8) philoxBlocks8(key, first + static_cast<uint64_t>(b), words + 4 * b);
#endif
  for (; b < count; ++b) philoxBlock(key, first + static_cast<uint64_t>(b), words + 4 * b);
}

// Writes values[0 .. count) to the elements first .. first + count - 1 of `out`
// in row-major order, whatever its strides.
template <typename T, typename V>
void storeRowMajor(const isa::Operand& out, char* base, int64_t first, const V* values, int64_t count) {
  const auto size = static_cast<int64_t>(sizeof(T));
  bool contiguous = true;
  int64_t expected = 1;
  for (int d = out.rank - 1; d >= 0; --d) {
    if (out.shape[d] != 1 && out.strides[d] != expected) contiguous = false;
    expected *= out.shape[d];
  }
  char* origin = base + out.offset * size;
  if (contiguous) {
    T* target = reinterpret_cast<T*>(origin) + first;
    for (int64_t i = 0; i < count; ++i) target[i] = castTo<T>(values[i]);
    return;
  }
  for (ElementWalk element(out, first); count > 0; --count, ++values, element.step(out)) {
    store<T>(origin + element.offset * size, *values);
  }
}

constexpr float kTwoToMinus24 = 1.0f / 16777216.0f;
constexpr double kTwoToMinus53 = 1.0 / 9007199254740992.0;

inline float unitFloat(uint32_t word) { return static_cast<float>(word >> 8) * kTwoToMinus24; }  // [0, 1)
inline double unitDouble(uint32_t low, uint32_t high) {                                       // [0, 1)
  return static_cast<double>(((static_cast<uint64_t>(high) << 32) | low) >> 11) * kTwoToMinus53;
}

// The values of one chunk of elements from its Philox words; `wide` draws (float64,
// integer ranges above 2^32) use two words per element, the others one.
// Box-Muller on float32 words, a vector of pairs at a time: the radius
// sqrt(-2 log(1 - u0)) and the angle 2 pi u1 of each pair's words, through Sleef's
// vector log and sinpi/cospi (of 2 u1, exact in float). out has room for an even count.
// (A template, so that Sleef's float64 twin in PTO_SLEEF_CALL is never instantiated.)
template <class D>
void boxMullerFloat(D d, const uint32_t* words, int64_t count, float mean, float spread, float* out) {
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  HWY_ALIGN float from_one[hn::MaxLanes(D())], turns[hn::MaxLanes(D())];
  HWY_ALIGN float radius[hn::MaxLanes(D())], sine[hn::MaxLanes(D())],
      cosine[hn::MaxLanes(D())];
  const int64_t pairs = (count + 1) / 2;
  for (int64_t first = 0; first < pairs; first += lanes) {
    const int64_t n = std::min(lanes, pairs - first);
    for (int64_t k = 0; k < lanes; ++k) {  // lanes past n are padding: uniforms of 1, never stored
      from_one[k] = k < n ? 1.0f - unitFloat(words[2 * (first + k)]) : 1.0f;
      turns[k] = k < n ? 2.0f * unitFloat(words[2 * (first + k) + 1]) : 0.0f;
    }
    const auto log_of = PTO_SLEEF_CALL(log, u10, d, PTO_SLEEF_RAW(hn::Load(d, from_one)));
    hn::Store(hn::Sqrt(hn::Mul(hn::Set(d, -2.0f), log_of)), d, radius);
    const auto angle = hn::Load(d, turns);
    hn::Store(PTO_SLEEF_CALL(sinpi, u05, d, PTO_SLEEF_RAW(angle)), d, sine);
    hn::Store(PTO_SLEEF_CALL(cospi, u05, d, PTO_SLEEF_RAW(angle)), d, cosine);
    for (int64_t k = 0; k < n; ++k) {
      out[2 * (first + k)] = radius[k] * cosine[k] * spread + mean;
      out[2 * (first + k) + 1] = radius[k] * sine[k] * spread + mean;
    }
  }
}

template <typename T>
struct Draw {
  using Value = std::conditional_t<std::is_floating_point_v<ComputeType<T>>, ComputeType<T>, int64_t>;

  template <isa::Opcode op>
  static void values(const std::array<double, isa::kMaxImmediates>& imm, bool wide, const uint32_t* words,
                     int64_t count, Value* out) {
    if constexpr (op == isa::Opcode::kUniform) {
      const auto low = static_cast<Value>(imm[0]), span = static_cast<Value>(imm[1] - imm[0]);
      for (int64_t i = 0; i < count; ++i) {
        const Value unit = wide ? static_cast<Value>(unitDouble(words[2 * i], words[2 * i + 1]))
                                : static_cast<Value>(unitFloat(words[i]));
        out[i] = unit * span + low;
      }
    } else if constexpr (op == isa::Opcode::kNormal) {  // Box-Muller on pairs of uniforms: two normals each
      if constexpr (std::is_floating_point_v<Value>) {
        const auto mean = static_cast<Value>(imm[0]), std = static_cast<Value>(imm[1]);
        if constexpr (std::is_same_v<Value, float>) {
          boxMullerFloat(hn::ScalableTag<float>(), words, count, mean, std, out);
        } else {
          for (int64_t i = 0; i < count; i += 2) {  // values has room for an even count
            const double radius = std::sqrt(-2 * std::log(1 - unitDouble(words[2 * i], words[2 * i + 1])));
            const double angle = 2 * std::numbers::pi * unitDouble(words[2 * i + 2], words[2 * i + 3]);
            out[i] = radius * std::cos(angle) * std + mean;
            out[i + 1] = radius * std::sin(angle) * std + mean;
          }
        }
      }
    } else if constexpr (op == isa::Opcode::kRandInt) {  // a draw scaled onto the range: multiply-shift, no division
      const auto low = static_cast<uint64_t>(static_cast<int64_t>(imm[0]));
      if (wide) {
        const auto range = static_cast<unsigned __int128>(static_cast<__int128>(imm[1]) - static_cast<__int128>(imm[0]));
        for (int64_t i = 0; i < count; ++i) {
          const uint64_t draw = (static_cast<uint64_t>(words[2 * i + 1]) << 32) | words[2 * i];
          out[i] = static_cast<Value>(static_cast<int64_t>(low + static_cast<uint64_t>((draw * range) >> 64)));
        }
      } else {
        const auto range = static_cast<uint64_t>(imm[1] - imm[0]);  // at most 2^32
        for (int64_t i = 0; i < count; ++i) {
          out[i] = static_cast<Value>(static_cast<int64_t>(low + ((words[i] * range) >> 32)));
        }
      }
    } else if constexpr (op == isa::Opcode::kExponential) {  // the CPU's -1/lambda * log1p(-u), never 0
      if constexpr (std::is_floating_point_v<Value>) {
        const Value scale = static_cast<Value>(-1) / static_cast<Value>(imm[0]);
        const Value step = wide ? Value(0x1p-53) : Value(0x1p-24);
        for (int64_t i = 0; i < count; ++i) {
          const Value unit = wide ? static_cast<Value>(unitDouble(words[2 * i], words[2 * i + 1]))
                                  : static_cast<Value>(unitFloat(words[i]));
          out[i] = scale * std::log1p(-(unit == 0 ? step : unit));
        }
      }
    } else if constexpr (op == isa::Opcode::kBernoulli) {
      const double p = imm[0];
      for (int64_t i = 0; i < count; ++i) {
        out[i] = static_cast<Value>(static_cast<double>(words[i]) * 0x1p-32 < p ? 1 : 0);
      }
    } else {
      static_assert(op == isa::Opcode::kUniform, "the Random family has no draw for this instruction");
    }
  }
};

// Whether the draw takes two words per element.
bool isWide(isa::Opcode opcode, isa::DType dtype, const std::array<double, isa::kMaxImmediates>& imm) {
  if (opcode == isa::Opcode::kRandInt) return imm[1] - imm[0] > 4294967296.0;
  return opcode != isa::Opcode::kBernoulli && dtype == isa::DType::kFloat64;
}

}  // namespace

void randomKernel(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const isa::Operand& out = instruction.operands[0];
  const auto& imm = instruction.immediates;
  const int key_at = isa::info(instruction.opcode).immediateCount() - 3;  // a draw's last three: key0, key1, counter
  const PhiloxKey key{static_cast<uint32_t>(imm[key_at]), static_cast<uint32_t>(imm[key_at + 1])};
  const auto counter = static_cast<uint64_t>(imm[key_at + 2]);
  const int64_t count = out.numel();
  if (count == 0) return;
  const bool wide = isWide(instruction.opcode, out.dtype, imm);
  const int64_t per_block = wide ? 2 : 4;
  char* base = static_cast<char*>(buffers[out.buffer]);
  dispatchOpcode<isa::Group::Random>(instruction.opcode, [&]<isa::Opcode op>() {
    dispatchDType(out.dtype, [&]<typename T>() {
      using Value = typename Draw<T>::Value;
      constexpr int64_t kChunkBlocks = 1024;  // 16 KiB of words: the chunk stays in L1
      const auto blocks = static_cast<size_t>((count + per_block - 1) / per_block);
      rt::sim::parallelFor(blocks, kChunkBlocks, [&](size_t begin, size_t end) {
        std::vector<uint32_t> words(4 * kChunkBlocks);
        std::vector<Value> values(4 * kChunkBlocks);
        for (size_t block = begin; block < end; block += kChunkBlocks) {
          const int64_t n_blocks = std::min<int64_t>(kChunkBlocks, static_cast<int64_t>(end - block));
          philoxBlocks(key, counter + block, n_blocks, words.data());
          const int64_t first = static_cast<int64_t>(block) * per_block;
          const int64_t n = std::min(n_blocks * per_block, count - first);
          Draw<T>::template values<op>(imm, wide, words.data(), n, values.data());
          storeRowMajor<T>(out, base, first, values.data(), n);
        }
      });
    });
  });
}

}  // namespace pto::rt::sim::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pto::rt::sim::kernels {

HWY_EXPORT(randomKernel);

void executeRandom(const isa::Instruction& instruction, std::span<void* const> buffers) {
  HWY_DYNAMIC_DISPATCH(randomKernel)(instruction, buffers);
}

}  // namespace pto::rt::sim::kernels
#endif  // HWY_ONCE
