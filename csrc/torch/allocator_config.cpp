#include "allocator_config.h"

#include <c10/core/AllocatorConfig.h>

namespace pto::torch_glue {
namespace {

using c10::CachingAllocator::AcceleratorAllocatorConfig;

// torch rejects unknown keys only once a backend has registered a parser hook. pto has no
// keys of its own, so its hook has nothing to parse; registering it is what turns a typo
// in PYTORCH_ALLOC_CONF into torch's "Unrecognized key" error.
const bool hook_registered = [] {
  AcceleratorAllocatorConfig::registerDeviceConfigParserHook([](const std::string&) {}, {});
  return true;
}();

}  // namespace

AllocatorSettings allocatorSettings() {
  AcceleratorAllocatorConfig& config = AcceleratorAllocatorConfig::instance();  // parses the environment
  // Parsed before pto's hook was registered (by whoever asked first), unknown keys went
  // unchecked: parse the same settings again, now checked.
  config.parseArgs(AcceleratorAllocatorConfig::last_allocator_settings());
  return {AcceleratorAllocatorConfig::max_split_size(), AcceleratorAllocatorConfig::max_non_split_rounding_size(),
          AcceleratorAllocatorConfig::large_segment_size(),
          AcceleratorAllocatorConfig::garbage_collection_threshold(),
          AcceleratorAllocatorConfig::use_expandable_segments()};
}

}  // namespace pto::torch_glue
