#include "host_caches.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace pto::rt::sim {
namespace {

// The size of the cache at `level` of `type` ("Data" or "Unified") from sysfs, in bytes; 0 if none.
int64_t sysfsCacheBytes(int level, const std::string& type) {
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    int found_level = 0;
    std::string found_type, size;
    if (!(level_file >> found_level) || !(type_file >> found_type) || !(size_file >> size)) break;
    if (found_level != level || found_type != type || size.empty()) continue;
    const int64_t unit = size.back() == 'K' ? 1024 : size.back() == 'M' ? 1024 * 1024 : 1;
    return std::stoll(size) * unit;
  }
  return 0;
}

int64_t cacheBytes(int sysconf_name, int level, const std::string& type, int64_t fallback) {
  const long bytes = sysconf(sysconf_name);
  if (bytes > 0) return bytes;
  const int64_t from_sysfs = sysfsCacheBytes(level, type);
  return from_sysfs > 0 ? from_sysfs : fallback;
}

}  // namespace

const HostCaches& hostCaches() {
  static const HostCaches caches = [] {
    HostCaches found{
        .l1_data_bytes = cacheBytes(_SC_LEVEL1_DCACHE_SIZE, 1, "Data", 32 * 1024),
        .l2_bytes = cacheBytes(_SC_LEVEL2_CACHE_SIZE, 2, "Unified", 1024 * 1024),
        .last_level_bytes = 0,
    };
    found.last_level_bytes = std::max(found.l2_bytes, cacheBytes(_SC_LEVEL3_CACHE_SIZE, 3, "Unified", 0));
    return found;
  }();
  return caches;
}

}  // namespace pto::rt::sim
