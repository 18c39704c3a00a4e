// Writes that bypass the caches. A copy or a kernel's output too large for the host's
// last-level cache cannot stay there, and ordinary stores first read every line they
// write (write-allocate): non-temporal stores move those bytes once instead of twice
// (stream_store-inl.h has them per vector target, for the kernels).
#pragma once

#include <cstddef>
#include <cstdint>

namespace pto::rt::sim::kernels {

// Whether output of `bytes` should be streamed: more than half the host's last-level
// cache cannot stay there, and left to ordinary stores it would evict the inputs
// still to be read.
bool streamsOutput(int64_t bytes);

// Copies `bytes` from src to dst (not overlapping) with non-temporal stores, on the
// best vector target the host has; they are visible to every thread on return.
void streamCopy(void* dst, const void* src, size_t bytes);

}  // namespace pto::rt::sim::kernels
