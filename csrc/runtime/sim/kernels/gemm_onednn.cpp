// oneDNN matmul primitives over the device's buffers (memory descriptors with our
// strides, no copies), created once per shape, layout and scaling and
// kept in a small least-recently-used cache: creating one costs 0.1-2 ms, running a
// small one microseconds.
#include "gemm_onednn.h"

#include <omp.h>

#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <list>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pto::rt::sim::kernels {
namespace {

using dnnl::memory;

// Primitives kept: the distinct GEMMs of a model's step (its layers' shapes, the
// row bands the device's cores split them into) fit with room to spare.
constexpr size_t kCachedPrimitives = 128;

// Debian's oneDNN threads with OpenMP, sizing its work (when a primitive is created)
// and its team (when it runs) by omp_get_max_threads(). The device's cores already
// split every GEMM into row bands (matmul.cpp), so each call runs on its own thread
// only: a team per core would oversubscribe the cores, and its threads spin after
// each call. The setting is the calling thread's own and is restored afterwards, so
// PyTorch's CPU ops on that thread keep their threads.
class SingleOpenMpThread {
 public:
  SingleOpenMpThread() : previous_(omp_get_max_threads()) {
    if (previous_ != 1) omp_set_num_threads(1);
  }
  ~SingleOpenMpThread() {
    if (previous_ != 1) omp_set_num_threads(previous_);
  }
  SingleOpenMpThread(const SingleOpenMpThread&) = delete;
  SingleOpenMpThread& operator=(const SingleOpenMpThread&) = delete;

 private:
  int previous_;
};

dnnl::engine& cpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

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

// A created primitive, or none where oneDNN has no brgemm kernel for the GEMM. Its
// other kernels are no use here: the reference loops are slow, and the "gemm:jit"
// ones fail in a process that has loaded PyTorch, whose own oneDNN (3.x) exports the
// same name for the function that generates their code, and the dynamic linker binds
// libdnnl's call to PyTorch's copy ("could not execute a primitive").
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
  if (key.alpha != 1.0f) attributes.set_output_scales(0, {key.alpha});
  if (key.beta != 0.0f) {
    dnnl::post_ops sum;
    sum.append_sum(key.beta);
    attributes.set_post_ops(sum);
  }
  try {
    dnnl::matmul::primitive_desc description(dnnl::matmul::desc(primitive->a, primitive->b, primitive->c),
                                             attributes, cpuEngine());
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

class PrimitiveCache {
 public:
  std::shared_ptr<const GemmPrimitive> get(const GemmKey& key) {
    {
      std::lock_guard lock(mutex_);
      if (auto found = index_.find(key); found != index_.end()) {
        entries_.splice(entries_.begin(), entries_, found->second);
        return found->second->second;
      }
    }
    // Created outside the cache's lock, so that other threads' GEMMs on cached shapes
    // need not wait, but one at a time: two threads wanting the same new shape build
    // it once, and oneDNN's code generation is never entered twice at once.
    std::lock_guard creating(creation_mutex_);
    {
      std::lock_guard lock(mutex_);
      if (auto found = index_.find(key); found != index_.end()) return found->second->second;
    }
    std::shared_ptr<const GemmPrimitive> created = createPrimitive(key);
    std::lock_guard lock(mutex_);
    entries_.emplace_front(key, created);
    index_.emplace(key, entries_.begin());
    if (entries_.size() > kCachedPrimitives) {
      index_.erase(entries_.back().first);
      entries_.pop_back();
    }
    return created;
  }

 private:
  using Entry = std::pair<GemmKey, std::shared_ptr<const GemmPrimitive>>;
  std::mutex creation_mutex_;  // taken before mutex_, never after it
  std::mutex mutex_;
  std::list<Entry> entries_;
  std::unordered_map<GemmKey, std::list<Entry>::iterator, GemmKeyHash> index_;
};

PrimitiveCache& primitives() {
  static PrimitiveCache cache;
  return cache;
}

}  // namespace

bool onednnBf16GemmIsFast() {
  static const bool fast = [] {
    SingleOpenMpThread single;
    return createPrimitive({64, 64, 64, 64, 64, 64, false, false, 1, 0})->matmul != nullptr;
  }();
  return fast;
}

bool onednnBf16Gemm(int64_t m, int64_t n, int64_t k, GemmOperand a, GemmOperand b, float alpha, float beta, void* c,
                    int64_t ldc) {
  SingleOpenMpThread single;
  const std::shared_ptr<const GemmPrimitive> primitive =
      primitives().get({m, n, k, a.ld, b.ld, ldc, a.transposed, b.transposed, alpha, beta});
  if (!primitive->matmul) return false;
  thread_local dnnl::stream stream(cpuEngine());
  thread_local std::vector<char> scratchpad;
  if (scratchpad.size() < primitive->scratchpad.get_size()) scratchpad.resize(primitive->scratchpad.get_size());
  dnnl::engine& engine = cpuEngine();
  primitive->matmul->execute(
      stream, {{DNNL_ARG_SRC, memory(primitive->a, engine, const_cast<void*>(a.data))},
               {DNNL_ARG_WEIGHTS, memory(primitive->b, engine, const_cast<void*>(b.data))},
               {DNNL_ARG_DST, memory(primitive->c, engine, c)},
               {DNNL_ARG_SCRATCHPAD, memory(primitive->scratchpad, engine, scratchpad.data())}});
  stream.wait();
  return true;
}

}  // namespace pto::rt::sim::kernels
