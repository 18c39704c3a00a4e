// oneDNN convolution primitives over the device's buffers. Each tensor is described
// with its own strides. With AVX-512 the primitive is asked for with those layouts
// first: where oneDNN has a direct kernel for them (channels_last images) the call
// reads and writes the tensors in place. Where it has none (plain NCHW images: its
// kernels for those are GEMM-based), and on AVX2 hosts always, the images are
// reordered into the blocked layouts its direct kernels choose, and the pass's output
// back: two passes over the images, where im2col's columns cost kernel-volume times
// as much. On AVX2, oneDNN 2.6's (the library before 3.2) direct kernels for
// channels_last images were slower than its blocked ones and the reorders together
// (32x64x32x32, 3x3, on the 2-core Zen 3 EPYC: forward 18.4 -> 14.7-15.3 ms, forward +
// backward 57.7 -> 52.8-54.5 ms).
// The weights are always the blocked ones its kernels choose (a small reorder per
// call). Created once per problem and kept in a least-recently-used cache.
//
// Kernels not taken: the reference loops ("ref:", 100-1000x slower), and the GEMM-based
// ones ("gemm:jit": bfloat16 32x64x32x32, 3x3 in 6.9 ms, against 1.1 ms for the direct
// kernel and the reorders); a problem with neither left runs in convolution.cpp's GEMM form.
#include "conv_onednn.h"

#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "onednn_common.h"

namespace pto::rt::sim::kernels {
namespace {

using dnnl::memory;

// Problems kept: a model's convolutions, three passes each, on one or two batch sizes.
constexpr size_t kCachedPrimitives = 128;

// The problem as the cache's key: its integers in a row (beta's bits among them).
struct ConvKey {
  std::vector<int64_t> values;
  bool operator==(const ConvKey& other) const = default;
};

struct ConvKeyHash {
  size_t operator()(const ConvKey& key) const {
    size_t hash = 0xcbf29ce484222325ull;
    for (int64_t value : key.values) hash = (hash ^ static_cast<uint64_t>(value)) * 0x100000001b3ull;
    return hash;
  }
};

ConvKey keyOf(const ConvProblem& p) {
  uint32_t beta_bits;
  std::memcpy(&beta_bits, &p.beta, sizeof beta_bits);
  ConvKey key{{static_cast<int64_t>(p.pass), p.spatial, p.groups, beta_bits, p.x.bfloat16, p.w.bfloat16,
               p.y.bfloat16}};
  for (int i = 0; i < 3; ++i) key.values.insert(key.values.end(), {p.stride[i], p.pad[i], p.dilation[i]});
  for (const ConvTensor* t : {&p.x, &p.w, &p.y}) {
    for (int d = 0; d < p.spatial + 2; ++d) key.values.insert(key.values.end(), {t->dims[d], t->strides[d]});
  }
  return key;
}

enum Role { kX, kW, kY };

// The primitive of one problem, or none, and the reorders between the caller's layouts
// and the primitive's where they differ.
struct ConvPrimitive {
  std::unique_ptr<dnnl::primitive> conv;
  std::array<memory::desc, 3> user, inner;  // by Role
  std::array<std::unique_ptr<dnnl::reorder>, 3> to_inner, to_user;
  memory::desc scratchpad;
};

memory::data_type dataTypeOf(const ConvTensor& t) {
  return t.bfloat16 ? memory::data_type::bf16 : memory::data_type::f32;
}

memory::dims dimsOf(const ConvTensor& t, int rank) { return memory::dims(t.dims.begin(), t.dims.begin() + rank); }
memory::dims stridesOf(const ConvTensor& t, int rank) {
  return memory::dims(t.strides.begin(), t.strides.begin() + rank);
}

// The weight [O, C / g, K...] as oneDNN's grouped weight [g, O / g, C / g, K...].
memory::desc weightDesc(const ConvProblem& p) {
  const int rank = p.spatial + 2;
  memory::dims dims = dimsOf(p.w, rank), strides = stridesOf(p.w, rank);
  if (p.groups > 1) {
    dims[0] /= p.groups;
    dims.insert(dims.begin(), p.groups);
    strides.insert(strides.begin(), dims[1] * strides[0]);
  }
  return memory::desc(dims, dataTypeOf(p.w), strides);
}

bool directKernel(std::string_view name) {
  return !name.starts_with("ref") && name.find("gemm") == std::string_view::npos;
}

// The primitive descriptor of the pass over descs {x, w, y}, with a direct kernel, or
// none (a default-constructed one).
template <typename PrimitiveDesc>
PrimitiveDesc firstDirect(PrimitiveDesc description) {
  while (!directKernel(description.impl_info_str())) {
    if (!description.next_impl()) return PrimitiveDesc();
  }
  return description;
}

using Descs = std::array<memory::desc, 3>;

std::unique_ptr<dnnl::primitive> create(const ConvProblem& p, const Descs& d, Descs* inner, memory::desc* scratchpad) {
  dnnl::engine& engine = onednnEngine();
  const int spatial = p.spatial;
  const memory::dims stride(p.stride.begin(), p.stride.begin() + spatial);
  const memory::dims pad(p.pad.begin(), p.pad.begin() + spatial);
  memory::dims dilation(spatial), pad_right(spatial);
  for (int i = 0; i < spatial; ++i) {
    dilation[i] = p.dilation[i] - 1;  // oneDNN counts the gaps between taps
    const int64_t span = p.dilation[i] * (p.w.dims[2 + i] - 1) + 1;
    pad_right[i] = (p.y.dims[2 + i] - 1) * p.stride[i] + span - p.x.dims[2 + i] - p.pad[i];
  }
  const auto algorithm = dnnl::algorithm::convolution_direct;
  dnnl::primitive_attr attributes;
  // Callers share primitives across threads; each brings its own scratchpad.
  attributes.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  // The forward pass the gradients' kernels are chosen for: its weight of the images'
  // dtype (a bfloat16 weight gradient may be float32, a forward's weight may not).
  const memory::desc hint_weight(d[kW].get_dims(), d[kX].get_data_type(), memory::format_tag::any);
  const dnnl::convolution_forward::primitive_desc hint(engine, dnnl::prop_kind::forward_training, algorithm, d[kX],
                                                        hint_weight, d[kY], stride, dilation, pad, pad_right);
  if (p.pass == ConvPass::kForward) {
    if (p.beta != 0) {
      dnnl::post_ops sum;
      sum.append_sum(p.beta);
      attributes.set_post_ops(sum);
    }
    const auto found = firstDirect(dnnl::convolution_forward::primitive_desc(
        engine, dnnl::prop_kind::forward_training, algorithm, d[kX], d[kW], d[kY], stride, dilation, pad, pad_right,
        attributes));
    if (!found) return nullptr;
    *inner = {found.src_desc(), found.weights_desc(), found.dst_desc()};
    *scratchpad = found.scratchpad_desc();
    return std::make_unique<dnnl::convolution_forward>(found);
  }
  if (p.pass == ConvPass::kBackwardData) {
    const auto found = firstDirect(dnnl::convolution_backward_data::primitive_desc(
        engine, algorithm, d[kX], d[kW], d[kY], stride, dilation, pad, pad_right, hint, attributes));
    if (!found) return nullptr;
    *inner = {found.diff_src_desc(), found.weights_desc(), found.diff_dst_desc()};
    *scratchpad = found.scratchpad_desc();
    return std::make_unique<dnnl::convolution_backward_data>(found);
  }
  const auto found = firstDirect(dnnl::convolution_backward_weights::primitive_desc(
      engine, algorithm, d[kX], d[kW], d[kY], stride, dilation, pad, pad_right, hint, attributes));
  if (!found) return nullptr;
  *inner = {found.src_desc(), found.diff_weights_desc(), found.diff_dst_desc()};
  *scratchpad = found.scratchpad_desc();
  return std::make_unique<dnnl::convolution_backward_weights>(found);
}

Role outputOf(ConvPass pass) {
  return pass == ConvPass::kForward ? kY : pass == ConvPass::kBackwardData ? kX : kW;
}

std::shared_ptr<const ConvPrimitive> createPrimitive(const ConvProblem& p) {
  auto primitive = std::make_shared<ConvPrimitive>();
  const int rank = p.spatial + 2;
  primitive->user = {memory::desc(dimsOf(p.x, rank), dataTypeOf(p.x), stridesOf(p.x, rank)), weightDesc(p),
                     memory::desc(dimsOf(p.y, rank), dataTypeOf(p.y), stridesOf(p.y, rank))};
  const auto any = [](const memory::desc& desc) {
    return memory::desc(desc.get_dims(), desc.get_data_type(), memory::format_tag::any);
  };
  // The images as they lie, then as oneDNN would have them (the other way round on
  // a host without AVX-512, or capped below it by ONEDNN_MAX_CPU_ISA).
  const Descs as_they_lie{primitive->user[kX], any(primitive->user[kW]), primitive->user[kY]};
  const Descs blocked{any(primitive->user[kX]), any(primitive->user[kW]), any(primitive->user[kY])};
  const auto isa = static_cast<int>(dnnl::get_effective_cpu_isa());
  const bool avx512 = (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  const std::array<Descs, 2> attempts = avx512 ? std::array{as_they_lie, blocked} : std::array{blocked, as_they_lie};
  for (const Descs& descs : attempts) {
    try {
      primitive->conv = create(p, descs, &primitive->inner, &primitive->scratchpad);
    } catch (const dnnl::error&) {
      primitive->conv = nullptr;  // no implementation at all (a negative right padding, say)
    }
    if (primitive->conv) break;
  }
  if (!primitive->conv) return primitive;
  const Role output = outputOf(p.pass);
  dnnl::engine& engine = onednnEngine();
  for (int role = kX; role <= kY; ++role) {
    const memory::desc &user = primitive->user[role], &inner = primitive->inner[role];
    if (user == inner) continue;
    const bool read = role != output || (p.pass == ConvPass::kForward && p.beta != 0);
    if (read) primitive->to_inner[role] = std::make_unique<dnnl::reorder>(dnnl::reorder::primitive_desc(engine, user, engine, inner));
    if (role == output) primitive->to_user[role] = std::make_unique<dnnl::reorder>(dnnl::reorder::primitive_desc(engine, inner, engine, user));
  }
  return primitive;
}

PrimitiveCache<ConvKey, ConvPrimitive, ConvKeyHash>& primitives() {
  static PrimitiveCache<ConvKey, ConvPrimitive, ConvKeyHash> cache(kCachedPrimitives);
  return cache;
}

std::shared_ptr<const ConvPrimitive> primitiveOf(const ConvProblem& problem) {
  return primitives().get(keyOf(problem), [&problem](const ConvKey&) { return createPrimitive(problem); });
}

// A 64-byte aligned buffer of this thread's, kept between calls.
class ScratchBuffer {
 public:
  void* get(size_t bytes) {
    if (bytes + 64 > storage_.size()) storage_.resize(bytes + 64);
    void* start = storage_.data();
    size_t space = storage_.size();
    return std::align(64, bytes, start, space);
  }

 private:
  std::vector<char> storage_;
};

}  // namespace

bool onednnConvolutionAvailable(const ConvProblem& problem) {
  SingleOpenMpThread single;
  return primitiveOf(problem)->conv != nullptr;
}

bool onednnConvolution(const ConvProblem& problem) {
  SingleOpenMpThread single;
  const std::shared_ptr<const ConvPrimitive> primitive = primitiveOf(problem);
  if (!primitive->conv) return false;
  dnnl::engine& engine = onednnEngine();
  thread_local dnnl::stream stream(engine);
  thread_local std::array<ScratchBuffer, 4> buffers;  // by Role, then the scratchpad
  const std::array<void*, 3> data = {problem.x.data, problem.w.data, problem.y.data};
  std::array<memory, 3> user, inner;
  for (int role = kX; role <= kY; ++role) {
    user[role] = memory(primitive->user[role], engine, data[role]);
    inner[role] = primitive->user[role] == primitive->inner[role]
                      ? user[role]
                      : memory(primitive->inner[role], engine, buffers[role].get(primitive->inner[role].get_size()));
    if (primitive->to_inner[role]) primitive->to_inner[role]->execute(stream, user[role], inner[role]);
  }
  const memory scratchpad(primitive->scratchpad, engine, buffers[3].get(primitive->scratchpad.get_size()));
  switch (problem.pass) {
    case ConvPass::kForward:
      primitive->conv->execute(stream, {{DNNL_ARG_SRC, inner[kX]}, {DNNL_ARG_WEIGHTS, inner[kW]},
                                        {DNNL_ARG_DST, inner[kY]}, {DNNL_ARG_SCRATCHPAD, scratchpad}});
      break;
    case ConvPass::kBackwardData:
      primitive->conv->execute(stream, {{DNNL_ARG_DIFF_SRC, inner[kX]}, {DNNL_ARG_WEIGHTS, inner[kW]},
                                        {DNNL_ARG_DIFF_DST, inner[kY]}, {DNNL_ARG_SCRATCHPAD, scratchpad}});
      break;
    case ConvPass::kBackwardWeight:
      primitive->conv->execute(stream, {{DNNL_ARG_SRC, inner[kX]}, {DNNL_ARG_DIFF_WEIGHTS, inner[kW]},
                                        {DNNL_ARG_DIFF_DST, inner[kY]}, {DNNL_ARG_SCRATCHPAD, scratchpad}});
      break;
  }
  const Role output = outputOf(problem.pass);
  if (primitive->to_user[output]) primitive->to_user[output]->execute(stream, inner[output], user[output]);
  stream.wait();
  return true;
}

}  // namespace pto::rt::sim::kernels
