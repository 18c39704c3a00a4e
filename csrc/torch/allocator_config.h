// The caching allocator's settings from PYTORCH_ALLOC_CONF (or the older
// PYTORCH_CUDA_ALLOC_CONF), read through c10's AcceleratorAllocatorConfig, the
// parser torch shares between its accelerators: its values, its errors.
#pragma once

#include <cstddef>

namespace pto::torch_glue {

struct AllocatorSettings {
  size_t max_split_size;           // max_split_size_mb: larger blocks are never split
  size_t max_non_split_rounding;   // max_non_split_rounding_mb: an oversize request takes a cached
                                   // block at most this much larger than itself
  size_t large_segment_size;       // large_segment_size_mb: what 1-10 MiB requests share
  double garbage_collection_threshold;  // 0: off; else the share of the allowed memory above
                                        // which the oldest cached segments go back
  bool expandable_segments;
};

// The settings as torch parsed them; a key torch does not know, or a bad value,
// throws torch's error (ValueError).
AllocatorSettings allocatorSettings();

}  // namespace pto::torch_glue
