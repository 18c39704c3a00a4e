// Non-temporal stores in the kernels, per Highway target (vector_target.h); when they
// pay and why: stream_copy.h. Included once per target, hence the toggle guard.
#if defined(PTO_SIM_KERNELS_STREAM_STORE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PTO_SIM_KERNELS_STREAM_STORE_INL_H_
#undef PTO_SIM_KERNELS_STREAM_STORE_INL_H_
#else
#define PTO_SIM_KERNELS_STREAM_STORE_INL_H_
#endif

#include <hwy/highway.h>

#include <hwy/cache_control.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "element_types.h"
#include "stream_copy.h"

HWY_BEFORE_NAMESPACE();
namespace pto::rt::sim::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Copies `bytes` from src to dst (not overlapping): up to dst's first vector-aligned
// byte by memcpy, then four vectors at a time (loads in flight while the stores
// drain), then the rest. Streamed stores are weakly ordered: the caller ends its
// stores with hwy::FlushStream() before another thread may read them.
inline void streamBytes(uint8_t* dst, const uint8_t* src, size_t bytes) {
  const hn::ScalableTag<uint8_t> d;
  const size_t lanes = hn::Lanes(d);
  const size_t head = std::min(bytes, (lanes - reinterpret_cast<uintptr_t>(dst) % lanes) % lanes);
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 4 * lanes <= bytes; i += 4 * lanes) {
    const auto v0 = hn::LoadU(d, src + i), v1 = hn::LoadU(d, src + i + lanes);
    const auto v2 = hn::LoadU(d, src + i + 2 * lanes), v3 = hn::LoadU(d, src + i + 3 * lanes);
    hn::Stream(v0, d, dst + i);
    hn::Stream(v1, d, dst + i + lanes);
    hn::Stream(v2, d, dst + i + 2 * lanes);
    hn::Stream(v3, d, dst + i + 3 * lanes);
  }
  for (; i + lanes <= bytes; i += lanes) hn::Stream(hn::LoadU(d, src + i), d, dst + i);
  std::memcpy(dst + i, src + i, bytes - i);
}

// Writes a contiguous row of n elements: compute(dst, start, count) puts elements
// [start, start + count) at dst[0, count). Streamed, the row is computed a block at a
// time into a buffer that stays in the L1 cache and streamed out from there; a row
// shorter than a few blocks is written in place (a fence per short row would cost
// more than the reads it saves). compute by reference: copied into the call for every
// row, its closure cost a store-forwarding stall a row (short strided rows 2x slower).
template <typename T, typename Compute>
void writeRow(T* out, int64_t n, bool streamed, const Compute& compute) {
  constexpr int64_t kStreamedRowElements = 4 * kBlockElements;
  if (!streamed || n < kStreamedRowElements) return compute(out, 0, n);
  HWY_ALIGN T block[kBlockElements];
  for (int64_t start = 0; start < n; start += kBlockElements) {
    const int64_t count = std::min<int64_t>(kBlockElements, n - start);
    compute(block, start, count);
    streamBytes(reinterpret_cast<uint8_t*>(out + start), reinterpret_cast<const uint8_t*>(block),
                static_cast<size_t>(count) * sizeof(T));
  }
  hwy::FlushStream();
}

}  // namespace pto::rt::sim::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // PTO_SIM_KERNELS_STREAM_STORE_INL_H_
