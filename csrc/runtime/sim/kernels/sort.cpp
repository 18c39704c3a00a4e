// targsort and ttopk. Each line along the axis is sorted by one core, the lines in
// parallel. targsort turns the values into unsigned keys whose integer order is
// PyTorch's (NaN greatest, -0.0 equal to 0.0; descending: the keys complemented)
// and sorts (key, position) pairs stably: a radix sort by bytes for long lines.
// ttopk runs torch.topk's CPU algorithm (a partial sort) on the same keys, so that
// it picks among equal values as torch.topk on the CPU does.
#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "element_types.h"
#include "execute.h"
#include "line_positions.h"
#include "opcode_dispatch.h"
#include "runtime/sim/sim_parallel.h"

namespace pto::rt::sim::kernels {
namespace {

// Elements per parallel chunk of lines: below this, waking another core costs more than it saves.
constexpr int64_t kSortGrain = 16384;

// Lines at least this long are radix sorted; shorter ones compare (a radix pass
// costs its 256 buckets whatever the length).
constexpr size_t kRadixMinimum = 256;

template <size_t kBytes>
using UnsignedOf = std::conditional_t<kBytes == 1, uint8_t, std::conditional_t<kBytes == 2, uint16_t,
                   std::conditional_t<kBytes == 4, uint32_t, uint64_t>>>;

// The bits of T's +infinity: a NaN's magnitude is larger.
template <typename T>
constexpr uint64_t kInfinityBits = std::is_same_v<T, Half> ? 0x7c00 : std::is_same_v<T, BFloat16> ? 0x7f80
                                   : std::is_same_v<T, float> ? 0x7f800000 : 0x7ff0000000000000;

// The key of the element at p: unsigned, in the element's order (NaN greatest, every
// NaN alike, -0.0 equal to 0.0).
template <typename T>
UnsignedOf<sizeof(T)> sortKey(const char* p) {
  using U = UnsignedOf<sizeof(T)>;
  U bits;
  std::memcpy(&bits, p, sizeof bits);
  if constexpr (std::is_same_v<T, bool>) {
    return bits != 0;
  } else if constexpr (std::is_unsigned_v<T>) {
    return bits;
  } else if constexpr (std::is_integral_v<T>) {
    return bits ^ (U{1} << (8 * sizeof(T) - 1));  // the sign bit flipped: negatives first
  } else {
    // Selects rather than branches, so that a loop over a line vectorises.
    constexpr U sign = U{1} << (8 * sizeof(T) - 1);
    const U magnitude = bits & static_cast<U>(~sign);
    const U ordered = (bits & sign) ? static_cast<U>(~bits) : static_cast<U>(bits | sign);
    const U zeroed = magnitude == 0 ? sign : ordered;
    return magnitude > kInfinityBits<T> ? static_cast<U>(~U{0}) : zeroed;
  }
}

// Calls emit(i, key ^ flip) for the n elements of a line `step` bytes apart, in
// order; a contiguous line takes a loop of its own, which the compiler vectorises.
template <typename T, typename Emit>
void forEachKey(const char* line, int64_t n, int64_t step, UnsignedOf<sizeof(T)> flip, Emit emit) {
  using K = UnsignedOf<sizeof(T)>;
  if (step == sizeof(T)) {
    for (int64_t i = 0; i < n; ++i) emit(i, static_cast<K>(sortKey<T>(line + i * sizeof(T)) ^ flip));
  } else {
    for (int64_t i = 0; i < n; ++i) emit(i, static_cast<K>(sortKey<T>(line + i * step) ^ flip));
  }
}

// Runs the lines along the axis in parallel: each chunk of lines gets its own
// worker from makeWorker() (with its scratch), called as worker(source, step,
// target) with a line's n elements `step` bytes apart from source, and its output
// at target.
template <typename T, typename MakeWorker>
void forEachLine(const isa::Operand& out, const isa::Operand& in, int axis, std::span<void* const> buffers,
                 MakeWorker makeWorker) {
  constexpr auto size = static_cast<int64_t>(sizeof(T));
  const LinePositions lines = positionsOff(out, in, axis);
  const int64_t n = in.rank > 0 ? in.shape[axis] : 1;
  const int64_t step = in.rank > 0 ? in.strides[axis] * size : size;
  const char* const in_base = static_cast<const char*>(buffers[in.buffer]) + in.offset * size;
  char* const out_base = static_cast<char*>(buffers[out.buffer]) + out.offset * static_cast<int64_t>(sizeof(int64_t));
  const int64_t grain = std::max<int64_t>(1, kSortGrain / std::max<int64_t>(n, 1));  // lines per chunk
  rt::sim::parallelFor(static_cast<size_t>(lines.count), static_cast<size_t>(grain), [&](size_t begin, size_t end) {
    auto worker = makeWorker();
    for (size_t line = begin; line < end; ++line) {
      const auto [out_offset, in_offset] = lines.offsets(static_cast<int64_t>(line));
      worker(in_base + in_offset * size, step, out_base + out_offset * static_cast<int64_t>(sizeof(int64_t)));
    }
  });
}

// Sorts keys ascending with positions alongside, stably: least significant byte
// first, skipping the bytes in which every key agrees. The buffers are scratch of
// the keys' length.
template <typename K>
void radixSort(std::vector<K>& keys, std::vector<int64_t>& positions, std::vector<K>& key_buffer,
               std::vector<int64_t>& position_buffer) {
  const size_t n = keys.size();
  std::array<std::array<size_t, 256>, sizeof(K)> counts{};
  for (const K key : keys) {
    for (size_t b = 0; b < sizeof(K); ++b) ++counts[b][(key >> (8 * b)) & 0xff];
  }
  for (size_t b = 0; b < sizeof(K); ++b) {
    std::array<size_t, 256>& starts = counts[b];
    if (starts[(keys[0] >> (8 * b)) & 0xff] == n) continue;
    size_t sum = 0;
    for (size_t& start : starts) sum += std::exchange(start, sum);
    for (size_t i = 0; i < n; ++i) {
      const size_t at = starts[(keys[i] >> (8 * b)) & 0xff]++;
      key_buffer[at] = keys[i];
      position_buffer[at] = positions[i];
    }
    keys.swap(key_buffer);
    positions.swap(position_buffer);
  }
}

template <typename T>
void argsortLines(const isa::Operand& out, const isa::Operand& in, int axis, bool descending,
                  std::span<void* const> buffers) {
  using K = UnsignedOf<sizeof(T)>;
  const auto n = static_cast<size_t>(out.rank > 0 ? out.shape[axis] : 1);
  const int64_t out_step = out.rank > 0 ? out.strides[axis] * static_cast<int64_t>(sizeof(int64_t)) : 0;
  const K flip = descending ? static_cast<K>(~K{0}) : K{0};  // complemented keys sort descending
  const bool radix = n >= kRadixMinimum;
  forEachLine<T>(out, in, axis, buffers, [&] {
    return [&, keys = std::vector<K>(radix ? n : 0), key_buffer = std::vector<K>(radix ? n : 0),
            positions = std::vector<int64_t>(radix ? n : 0), position_buffer = std::vector<int64_t>(radix ? n : 0),
            pairs = std::vector<std::pair<K, int64_t>>(radix ? 0 : n)](const char* source, int64_t step,
                                                                       char* target) mutable {
      if (!radix) {
        // Positions are unique, so ordering (key, position) pairs is a stable sort by key.
        forEachKey<T>(source, n, step, flip, [&](int64_t i, K key) { pairs[i] = {key, i}; });
        std::sort(pairs.begin(), pairs.end());
        for (size_t i = 0; i < n; ++i) std::memcpy(target + i * out_step, &pairs[i].second, sizeof(int64_t));
      } else {
        forEachKey<T>(source, n, step, flip, [&](int64_t i, K key) {
          keys[i] = key;
          positions[i] = i;
        });
        radixSort(keys, positions, key_buffer, position_buffer);
        for (size_t i = 0; i < n; ++i) std::memcpy(target + i * out_step, &positions[i], sizeof(int64_t));
      }
    };
  });
}

// Moves the k best entries of `queue` (by `before`) to its front, best first, as
// torch.topk's CPU kernel does: a partial sort when k is small against the line,
// else nth_element and a sort of the first k - 1.
template <typename Entry, typename Before>
void selectBest(std::vector<Entry>& queue, int64_t k, Before before) {
  if (k * 64 <= static_cast<int64_t>(queue.size())) {
    std::partial_sort(queue.begin(), queue.begin() + k, queue.end(), before);
  } else {
    std::nth_element(queue.begin(), queue.begin() + k - 1, queue.end(), before);
    std::sort(queue.begin(), queue.begin() + k - 1, before);
  }
}

// ttopk line by line. The CPU compares (value, position) pairs by value, NaN the
// largest; this compares keys (complemented for the largest), and the outcome of
// every comparison is the same, so the same algorithms make the same moves and
// pick the same positions among equal values. Keys of up to 32 bits travel with
// their position in one word, the key in its upper half.
template <typename T>
void topkLines(const isa::Operand& out, const isa::Operand& in, int axis, bool largest,
               std::span<void* const> buffers) {
  using K = UnsignedOf<sizeof(T)>;
  using Pair = std::pair<K, int64_t>;
  const int64_t n = in.rank > 0 ? in.shape[axis] : 1;
  const int64_t k = out.rank > 0 ? out.shape[axis] : 1;
  const int64_t out_step = out.rank > 0 ? out.strides[axis] * static_cast<int64_t>(sizeof(int64_t)) : 0;
  const K flip = largest ? static_cast<K>(~K{0}) : K{0};
  const bool packed = sizeof(K) <= 4 && n <= int64_t{UINT32_MAX};
  forEachLine<T>(out, in, axis, buffers, [&] {
    return [&, words = std::vector<uint64_t>(packed ? n : 0),
            pairs = std::vector<Pair>(packed ? 0 : n)](const char* source, int64_t step, char* target) mutable {
      if (packed) {
        forEachKey<T>(source, n, step, flip, [&](int64_t i, K key) {
          words[i] = uint64_t{key} << 32 | static_cast<uint64_t>(i);
        });
        selectBest(words, k, [](uint64_t a, uint64_t b) { return a >> 32 < b >> 32; });
        for (int64_t i = 0; i < k; ++i) {
          const auto position = static_cast<int64_t>(words[i] & 0xffffffff);
          std::memcpy(target + i * out_step, &position, sizeof position);
        }
      } else {
        forEachKey<T>(source, n, step, flip, [&](int64_t i, K key) { pairs[i] = {key, i}; });
        selectBest(pairs, k, [](const Pair& a, const Pair& b) { return a.first < b.first; });
        for (int64_t i = 0; i < k; ++i) std::memcpy(target + i * out_step, &pairs[i].second, sizeof(int64_t));
      }
    };
  });
}

}  // namespace

void executeSort(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const isa::Operand& out = instruction.operands[0];
  const isa::Operand& in = instruction.operands[1];
  const int axis = static_cast<int>(instruction.immediates[0]);
  const bool flag = instruction.immediates[1] != 0;
  if (out.numel() == 0) return;
  dispatchOpcode<isa::Group::Sort>(instruction.opcode, [&]<isa::Opcode op>() {
    dispatchDType(in.dtype, [&]<typename T>() {
      if constexpr (op == isa::Opcode::kArgsort) {
        argsortLines<T>(out, in, axis, flag, buffers);
      } else if constexpr (op == isa::Opcode::kTopk) {
        if constexpr (!std::is_same_v<T, bool>) topkLines<T>(out, in, axis, flag, buffers);
      } else {
        static_assert(op == isa::Opcode::kArgsort, "the Sort family has no kernel for this instruction");
      }
    });
  });
}

}  // namespace pto::rt::sim::kernels
