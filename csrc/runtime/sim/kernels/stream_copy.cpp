#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/sim/kernels/stream_copy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <hwy/cache_control.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "stream_copy.h"

HWY_BEFORE_NAMESPACE();
namespace pto::rt::sim::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Up to dst's first vector-aligned byte by memcpy, then four vectors at a time
// (loads in flight while the stores drain), then the rest.
void streamCopyBytes(uint8_t* dst, const uint8_t* src, size_t bytes) {
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
  hwy::FlushStream();
}

}  // namespace pto::rt::sim::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pto::rt::sim::kernels {

HWY_EXPORT(streamCopyBytes);

void streamCopy(void* dst, const void* src, size_t bytes) {
  HWY_DYNAMIC_DISPATCH(streamCopyBytes)(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), bytes);
}

}  // namespace pto::rt::sim::kernels
#endif  // HWY_ONCE
