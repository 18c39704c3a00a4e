// Copies that bypass the caches. A copy too large for the host's last-level cache
// cannot leave its destination there, and ordinary stores first read every line
// they write (write-allocate): non-temporal stores move half the bytes.
#pragma once

#include <cstddef>

namespace pto::rt::sim::kernels {

// Copies `bytes` from src to dst (not overlapping) with non-temporal stores, on the
// best vector target the host has; they are visible to every thread on return.
void streamCopy(void* dst, const void* src, size_t bytes);

}  // namespace pto::rt::sim::kernels
