#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/sim/kernels/stream_copy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstdint>

#include "runtime/sim/host_caches.h"
#include "stream_copy.h"
#include "stream_store-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pto::rt::sim::kernels::HWY_NAMESPACE {

void streamCopyFenced(uint8_t* dst, const uint8_t* src, size_t bytes) {
  streamBytes(dst, src, bytes);
  hwy::FlushStream();
}

}  // namespace pto::rt::sim::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pto::rt::sim::kernels {

HWY_EXPORT(streamCopyFenced);

bool streamsOutput(int64_t bytes) { return bytes > hostCaches().last_level_bytes / 2; }

void streamCopy(void* dst, const void* src, size_t bytes) {
  HWY_DYNAMIC_DISPATCH(streamCopyFenced)(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), bytes);
}

}  // namespace pto::rt::sim::kernels
#endif  // HWY_ONCE
