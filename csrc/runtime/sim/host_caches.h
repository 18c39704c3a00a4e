// The data caches of the host the sim runs on: the sim's cores are the host's, so
// its tuning comes from them (the tile sizes it reports as device attributes, the
// kernels' blocking). Only the sim driver asks the host; the isa and the compiler
// take what a device reports.
#pragma once

#include <cstdint>

namespace pto::rt::sim {

// The data cache sizes of the host's core 0, read once at run time (sysconf, else
// /sys/devices/system/cpu/cpu0/cache), with common sizes where neither answers.
struct HostCaches {
  int64_t l1_data_bytes;
  int64_t l2_bytes;
  int64_t last_level_bytes;  // L3 where the host has one, else L2
};
const HostCaches& hostCaches();

}  // namespace pto::rt::sim
