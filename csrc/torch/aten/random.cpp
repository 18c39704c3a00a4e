#include "random.h"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/Operators.h>
#include <ATen/core/DistributionsHelper.h>

#include <cmath>
#include <limits>
#include <mutex>
#include <optional>

#include "../pto_graph.h"
#include "../dtype_map.h"
#include "../generator.h"
#include "fallback.h"
#include "instruction_launch.h"

namespace pto::torch_glue {
namespace {

// Launches `opcode` into `self`, its key and counter reserved from the generator:
// `parameters` first, then key0, key1, counter. A draw of n elements uses at most
// ceil(n / 2) Philox blocks (the ISA's contract), so the generator moves on by that.
void draw(isa::Opcode opcode, const at::Tensor& self, std::initializer_list<double> parameters,
          const std::optional<at::Generator>& generator) {
  if (self.numel() == 0) return;
  at::assert_no_internal_overlap(self);  // an expanded tensor: the CPU's "unsupported operation"
  at::Generator chosen = generator.has_value() && generator->defined()
                                   ? *generator
                                   : defaultGenerator(self.device().index());
  TORCH_CHECK(chosen.device() == self.device(), "random: a generator on ", chosen.device(),
              " cannot draw a tensor on ", self.device());
  // The key and counter are immediates of the launch: a captured draw would
  // repeat its numbers at every replay (CUDA graphs move a device-side offset).
  TORCH_CHECK(!isCurrentStreamCapturing(self.device().index()), "Drawing random numbers (",
              isa::info(opcode).name, ") cannot be captured in a PTOGraph: every replay would repeat ",
              "the numbers of the capture. Draw them before the capture, or outside it into a tensor ",
              "the graph reads.");
  PhiloxDraw reserved{};
  {
    std::lock_guard<std::mutex> lock(chosen.mutex());
    reserved = chosen.get<PtoGeneratorImpl>()->reserve(static_cast<uint64_t>((self.numel() + 1) / 2));
  }
  std::array<double, isa::kMaxImmediates> immediates{};
  size_t at = 0;
  for (double parameter : parameters) immediates[at++] = parameter;
  immediates[at++] = reserved.key0;
  immediates[at++] = reserved.key1;
  immediates[at] = static_cast<double>(reserved.counter);
  // Element i of the row-major order takes word counter + i, whatever the rank:
  // above PTO's, the draw fills a flat tensor that a (mergeable) copy lays out.
  if (self.dim() > isa::kMaxRank) {
    at::Tensor flat = at::empty({self.numel()}, self.options());
    launchInstruction(opcode, flat, {}, immediates);
    self.copy_(flat.view(self.sizes()));
    return;
  }
  launchInstruction(opcode, self, {}, immediates);
}

// PyTorch's bound on a uniform draw's range: the dtype's largest finite value.
double largestFinite(at::ScalarType type) {
  switch (type) {
    case at::kHalf: return 65504.0;
    case at::kBFloat16: return 3.3895313892515355e38;
    case at::kFloat: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

// The half-open range [low, high) random_ draws from, as PyTorch defines it, when
// PTO can draw it exactly (both ends whole doubles): nullopt sends it to the CPU.
struct IntegerRange {
  __int128 low, high;
};

std::optional<IntegerRange> drawableRange(at::ScalarType type, __int128 low, std::optional<__int128> high) {
  __int128 lowest = 0, highest = 0;  // the dtype's range, inclusive
  if (at::isFloatingType(type)) {
    const int digits = type == at::kHalf ? 11 : type == at::kBFloat16 ? 8 : type == at::kFloat ? 24 : 53;
    highest = static_cast<__int128>(1) << digits;
    lowest = -highest;
  } else if (type == at::kBool) {
    highest = 1;
  } else if (at::isIntegralType(type, false)) {  // uint16/32/64 too, which PTO lacks
    const int bits = 8 * static_cast<int>(c10::elementSize(type));
    const bool is_signed = at::isSignedType(type);
    lowest = is_signed ? -(static_cast<__int128>(1) << (bits - 1)) : 0;
    highest = (static_cast<__int128>(1) << (is_signed ? bits - 1 : bits)) - 1;
  } else {
    return std::nullopt;
  }
  const __int128 end = high.value_or(highest + 1);
  if (low >= end || low < lowest || end - 1 > highest) return std::nullopt;
  auto exact = [](__int128 value) { return static_cast<__int128>(static_cast<double>(value)) == value; };
  if (!exact(low) || !exact(end) || !accepts(isa::Opcode::kRandInt, type)) return std::nullopt;
  return IntegerRange{low, end};
}

void checkStdTensor(const at::Tensor& std) {  // a sync, as on CUDA
  TORCH_CHECK(std.numel() == 0 || std.min().ge(0).item<bool>(), "normal expects all elements of std >= 0.0");
}

}  // namespace

at::Tensor& normalInplace(at::Tensor& self, double mean, double std, std::optional<at::Generator> generator) {
  if (!accepts(isa::Opcode::kNormal, self.scalar_type()) || !(std >= 0) || !std::isfinite(mean) ||
      !std::isfinite(std)) {
    return Fallback<ATEN_OP(normal_)>::call(self, mean, std, generator);
  }
  draw(isa::Opcode::kNormal, self, {mean, std}, generator);
  return self;
}

at::Tensor& exponentialInplace(at::Tensor& self, double lambd, std::optional<at::Generator> generator) {
  if (!accepts(isa::Opcode::kExponential, self.scalar_type()) || !(lambd > 0) || !std::isfinite(lambd)) {
    return Fallback<ATEN_OP(exponential_)>::call(self, lambd, generator);
  }
  draw(isa::Opcode::kExponential, self, {lambd}, generator);
  return self;
}

at::Tensor& uniformInplace(at::Tensor& self, double from, double to, std::optional<at::Generator> generator) {
  const bool sane = accepts(isa::Opcode::kUniform, self.scalar_type()) && std::isfinite(from) &&
                    std::isfinite(to) && from <= to && to - from <= largestFinite(self.scalar_type());
  if (!sane) return Fallback<ATEN_OP(uniform_)>::call(self, from, to, generator);
  draw(isa::Opcode::kUniform, self, {from, to}, generator);
  return self;
}

at::Tensor& randomFromTo(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                         std::optional<at::Generator> generator) {
  const auto range = drawableRange(self.scalar_type(), from,
                                   to.has_value() ? std::optional<__int128>(*to) : std::nullopt);
  if (!range) return Fallback<ATEN_OP2(random_, from)>::call(self, from, to, generator);
  draw(isa::Opcode::kRandInt, self, {static_cast<double>(range->low), static_cast<double>(range->high)}, generator);
  return self;
}

at::Tensor& randomTo(at::Tensor& self, int64_t to, std::optional<at::Generator> generator) {
  const auto range = drawableRange(self.scalar_type(), 0, to);
  if (!range) return Fallback<ATEN_OP2(random_, to)>::call(self, to, generator);
  draw(isa::Opcode::kRandInt, self, {0.0, static_cast<double>(range->high)}, generator);
  return self;
}

at::Tensor& randomFull(at::Tensor& self, std::optional<at::Generator> generator) {
  const auto range = drawableRange(self.scalar_type(), 0, std::nullopt);
  if (!range) return Fallback<ATEN_OP(random_)>::call(self, generator);
  draw(isa::Opcode::kRandInt, self, {0.0, static_cast<double>(range->high)}, generator);
  return self;
}

at::Tensor& bernoulliScalar(at::Tensor& self, double p, std::optional<at::Generator> generator) {
  if (!accepts(isa::Opcode::kBernoulli, self.scalar_type()) || !(p >= 0 && p <= 1)) {
    return Fallback<ATEN_OP2(bernoulli_, float)>::call(self, p, generator);
  }
  draw(isa::Opcode::kBernoulli, self, {p}, generator);
  return self;
}

// Per-element probabilities: uniforms below p. Probabilities outside [0, 1]
// would need a check on the host; the CPU kernel makes it and raises.
at::Tensor& bernoulliTensor(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> generator) {
  at::assert_no_internal_overlap(self);
  const bool native = p.device() == self.device() && at::isFloatingType(p.scalar_type()) &&
                      accepts(isa::Opcode::kUniform, p.scalar_type()) &&
                      accepts(isa::Opcode::kBernoulli, self.scalar_type()) &&
                      at::is_expandable_to(p.sizes(), self.sizes()) &&
                      at::logical_and(p >= 0, p <= 1).all().item<bool>();
  if (!native) return Fallback<ATEN_OP2(bernoulli_, Tensor)>::call(self, p, generator);
  at::Tensor uniform = at::empty(self.sizes(), p.options());
  draw(isa::Opcode::kUniform, uniform, {0.0, 1.0}, generator);
  self.copy_(at::lt(uniform, p));
  return self;
}

// PyTorch's fused dropout: the kept elements (probability 1 - p) scaled by 1 / (1 - p).
std::tuple<at::Tensor, at::Tensor> nativeDropout(const at::Tensor& input, double p, std::optional<bool> train) {
  if (input.numel() == 0) return {input.clone(), at::empty_like(input, input.options().dtype(at::kBool))};
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  const double keep = 1 - p;
  const double scale = keep == 0 ? 0.0 : 1.0 / keep;
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
  bernoulliScalar(mask, keep, std::nullopt);
  return {input.mul(mask).mul_(scale), mask};
}

// grad * mask * scale, promoted as PyTorch's kernel promotes it: integer and bool
// gradients give the default float dtype.
at::Tensor nativeDropoutBackward(const at::Tensor& grad_output, const at::Tensor& mask, double scale) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Mask should be Bool Scalar Type", mask.scalar_type());
  return grad_output.mul(mask).mul(scale);
}

// normal(mean, std) with tensor parameters: standard normals, scaled and shifted.
at::Tensor normalTensorFloat(const at::Tensor& mean, double std, std::optional<at::Generator> generator) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  at::Tensor out = at::empty_like(mean, at::MemoryFormat::Contiguous);
  normalInplace(out, 0.0, 1.0, generator);
  return out.mul_(std).add_(mean);
}

at::Tensor normalFloatTensor(double mean, const at::Tensor& std, std::optional<at::Generator> generator) {
  checkStdTensor(std);
  at::Tensor out = at::empty_like(std, at::MemoryFormat::Contiguous);
  normalInplace(out, 0.0, 1.0, generator);
  return out.mul_(std).add_(mean);
}

at::Tensor normalTensorTensor(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> generator) {
  checkStdTensor(std);
  at::Tensor out = at::empty(at::infer_size(mean.sizes(), std.sizes()), mean.options());
  normalInplace(out, 0.0, 1.0, generator);
  return out.mul_(std).add_(mean);
}

// A random permutation: the order that sorts n random 63-bit keys (trandint, then
// targsort; equal keys, a 2^-63 chance per pair, keep their order).
namespace {

// The CPU's limits on n for out's dtype: n - 1 must convert to it without overflow,
// and a float type must hold every integer up to n exactly.
void checkPermutationFits(int64_t n, const at::Tensor& out) {
  at::scalar_tensor(n > 0 ? n - 1 : n, out.options().device(at::kCPU));  // raises the conversion's error
  switch (out.scalar_type()) {
    case at::kHalf: TORCH_CHECK(n <= (int64_t{1} << 11) + 1, "n cannot be greater than 2049 for Half type."); break;
    case at::kFloat: TORCH_CHECK(n <= (int64_t{1} << 24) + 1, "n cannot be greater than 2^24+1 for Float type."); break;
    case at::kDouble: TORCH_CHECK(n <= (int64_t{1} << 53) + 1, "n cannot be greater than 2^53+1 for Double type."); break;
    default: break;
  }
}

}  // namespace

at::Tensor& randperm(int64_t n, std::optional<at::Generator> generator, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  checkPermutationFits(n, out);
  if (!accepts(isa::Opcode::kIota, out.scalar_type())) return Fallback<ATEN_OP2(randperm, generator_out)>::call(n, generator, out);
  at::Tensor keys = at::empty({n}, out.options().dtype(at::kLong));
  draw(isa::Opcode::kRandInt, keys, {0.0, 9223372036854775808.0}, generator);
  out.resize_({n});  // silently, as the CPU's randperm
  const at::Tensor permutation = at::argsort(keys, /*stable=*/true, 0, false);
  // An expanded out holds one element, which the CPU's loop writes last with
  // the permutation's last value.
  if (n > 1 && out.stride(0) == 0) {
    out.narrow(0, 0, 1).copy_(permutation.narrow(0, n - 1, 1));
    return out;
  }
  return out.copy_(permutation);
}

}  // namespace pto::torch_glue
