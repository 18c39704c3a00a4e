// oneDNN matmul primitives over the device's buffers (memory descriptors with our
// strides, no copies), created once per shape, layout and scaling and
// kept in a small least-recently-used cache: creating one costs 0.1-2 ms, running a
// small one microseconds.
#include "gemm_onednn.h"

#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "onednn_common.h"

namespace pto::rt::sim::kernels {
namespace {

using dnnl::memory;

// Primitives kept: the distinct GEMMs of a model's step (its layers' shapes, the
// row bands the device's cores split them into) fit with room to spare.
constexpr size_t kCachedPrimitives = 128;

struct GemmKey {
  int64_t m, n, k, lda, ldb, ldc;
  bool a_transposed, b_transposed;
  float alpha, beta;

  bool operator==(const GemmKey& other) const {
    return m == other.m && n == other.n && k == other.k && lda == other.lda &&
           ldb == other.ldb && ldc == other.ldc && a_transposed == other.a_transposed &&
           b_transposed == other.b_transposed && std::memcmp(&alpha, &other.alpha, sizeof alpha) == 0 &&
           std::memcmp(&beta, &other.beta, sizeof beta) == 0;
  }
};

struct GemmKeyHash {
  size_t operator()(const GemmKey& key) const {
    size_t hash = 0xcbf29ce484222325ull;
    auto mix = [&hash](uint64_t value) { hash = (hash ^ value) * 0x100000001b3ull; };
    for (int64_t value : {key.m, key.n, key.k, key.lda, key.ldb, key.ldc}) mix(static_cast<uint64_t>(value));
    uint32_t alpha_bits, beta_bits;
    std::memcpy(&alpha_bits, &key.alpha, sizeof alpha_bits);
    std::memcpy(&beta_bits, &key.beta, sizeof beta_bits);
    mix((uint64_t{alpha_bits} << 32) | beta_bits);
    mix((key.a_transposed ? 2u : 0u) | (key.b_transposed ? 1u : 0u));
    return hash;
  }
};

// A created primitive, or none where oneDNN has no brgemm kernel for the GEMM: its
// other kernels (reference loops, "gemm:jit") are slower than MKL's bfloat16 GEMM,
// which then takes the call.
struct GemmPrimitive {
  std::unique_ptr<dnnl::matmul> matmul;
  memory::desc a, b, c, scratchpad;
};

memory::desc matrixDesc(int64_t rows, int64_t cols, int64_t ld, bool transposed) {
  return memory::desc({rows, cols}, memory::data_type::bf16, transposed ? memory::dims{1, ld} : memory::dims{ld, 1});
}

std::shared_ptr<const GemmPrimitive> createPrimitive(const GemmKey& key) {
  auto primitive = std::make_shared<GemmPrimitive>();
  primitive->a = matrixDesc(key.m, key.k, key.lda, key.a_transposed);
  primitive->b = matrixDesc(key.k, key.n, key.ldb, key.b_transposed);
  primitive->c = matrixDesc(key.m, key.n, key.ldc, false);
  dnnl::primitive_attr attributes;
  // Callers share primitives across threads; each brings its own scratchpad.
  attributes.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  // C = alpha AB + beta C: alpha scales the float32 accumulator (a linear eltwise),
  // then the sum adds beta times C's old value, before the one rounding to bfloat16.
  dnnl::post_ops post_ops;
  if (key.alpha != 1.0f) post_ops.append_eltwise(dnnl::algorithm::eltwise_linear, key.alpha, 0.0f);
  if (key.beta != 0.0f) post_ops.append_sum(key.beta);
  attributes.set_post_ops(post_ops);
  try {
    dnnl::matmul::primitive_desc description(onednnEngine(), primitive->a, primitive->b, primitive->c, attributes);
    while (!std::string_view(description.impl_info_str()).starts_with("brg")) {
      if (!description.next_impl()) return primitive;
    }
    primitive->scratchpad = description.scratchpad_desc();
    primitive->matmul = std::make_unique<dnnl::matmul>(description);
  } catch (const dnnl::error&) {
    // No implementation at all (bfloat16 below AVX-512): the caller falls back.
  }
  return primitive;
}

PrimitiveCache<GemmKey, GemmPrimitive, GemmKeyHash>& primitives() {
  static PrimitiveCache<GemmKey, GemmPrimitive, GemmKeyHash> cache(kCachedPrimitives);
  return cache;
}

}  // namespace

dnnl::engine& onednnEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

bool onednnBf16GemmIsFast() {
  static const bool fast = [] {
    SingleOpenMpThread single;
    return createPrimitive({64, 64, 64, 64, 64, 64, false, false, 1, 0})->matmul != nullptr;
  }();
  return fast;
}

bool onednnBf16Gemm(int64_t m, int64_t n, int64_t k, GemmMatrix<BFloat16> a, GemmMatrix<BFloat16> b, float alpha,
                    float beta, BFloat16* c, int64_t ldc) {
  SingleOpenMpThread single;
  const std::shared_ptr<const GemmPrimitive> primitive =
      primitives().get({m, n, k, a.ld, b.ld, ldc, a.transposed, b.transposed, alpha, beta}, createPrimitive);
  if (!primitive->matmul) return false;
  thread_local dnnl::stream stream(onednnEngine());
  thread_local std::vector<char> scratchpad;
  if (scratchpad.size() < primitive->scratchpad.get_size()) scratchpad.resize(primitive->scratchpad.get_size());
  dnnl::engine& engine = onednnEngine();
  primitive->matmul->execute(
      stream, {{DNNL_ARG_SRC, memory(primitive->a, engine, const_cast<BFloat16*>(a.data))},
               {DNNL_ARG_WEIGHTS, memory(primitive->b, engine, const_cast<BFloat16*>(b.data))},
               {DNNL_ARG_DST, memory(primitive->c, engine, c)},
               {DNNL_ARG_SCRATCHPAD, memory(primitive->scratchpad, engine, scratchpad.data())}});
  stream.wait();
  return true;
}

}  // namespace pto::rt::sim::kernels
