#include "sim_faults.h"

#include <charconv>
#include <stdexcept>

namespace pto::rt::sim {

std::string_view faultSiteName(FaultSite site) {
  static constexpr std::string_view kNames[kFaultSiteCount] = {"malloc", "memcpy", "launch"};
  return kNames[static_cast<size_t>(site)];
}

FaultPlan parseFaultPlan(std::string_view text) {
  FaultPlan plan;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view entry = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t colon = entry.find(':');
    const std::string_view site = entry.substr(0, colon);
    const std::string_view count = colon == std::string_view::npos ? "" : entry.substr(colon + 1);
    uint64_t ordinal = 0;
    const auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), ordinal);
    size_t index = kFaultSiteCount;
    for (size_t i = 0; i < kFaultSiteCount; ++i) {
      if (faultSiteName(static_cast<FaultSite>(i)) == site) index = i;
    }
    if (index == kFaultSiteCount || ec != std::errc() || end != count.data() + count.size() ||
        ordinal == 0) {
      throw std::invalid_argument("PTO_SIM_FAULTS: '" + std::string(entry) +
                                  "' is not SITE:N with SITE one of malloc, memcpy, launch "
                                  "and N >= 1 (the Nth call at that site fails)");
    }
    plan[index].insert(ordinal);
  }
  return plan;
}

std::string describeFault(FaultSite site, uint64_t ordinal) {
  return "fault injected by PTO_SIM_FAULTS (" + std::string(faultSiteName(site)) + ":" +
         std::to_string(ordinal) + ")";
}

}  // namespace pto::rt::sim
