// The simulated device's cores: a pool of host threads, one per host core but
// the caller's, over which large copies (and kernels) split their work.
#pragma once

#include <cstddef>
#include <functional>

namespace pto::rt::sim {

// Runs body(begin, end) over [0, count) in chunks of at least `grain` items,
// on the pool and the calling thread together; returns when all are done.
// Called from inside a pool thread it runs serially (no nested parallelism).
// If a chunk throws, the first exception is rethrown once every chunk is done.
void parallelFor(size_t count, size_t grain, const std::function<void(size_t, size_t)>& body);

// The number of threads parallelFor spreads over (pool threads + the caller).
size_t parallelism();

}  // namespace pto::rt::sim
