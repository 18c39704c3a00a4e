// Fault injection for the simulated device (PTO_SIM_FAULTS): fails chosen calls
// so that tests can prove every failure surfaces as a clear error and leaves the
// process and the device usable. "launch:3,malloc:2,malloc:3" fails the third
// program launch, and the second and third device allocations, counted from
// the start of the process over all devices and streams.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

namespace pto::rt::sim {

enum class FaultSite : uint8_t { kMalloc, kMemcpy, kLaunch };
constexpr size_t kFaultSiteCount = 3;

// The calls to fail, by site: 1 is the first call.
using FaultPlan = std::array<std::set<uint64_t>, kFaultSiteCount>;

// Parses PTO_SIM_FAULTS; throws std::invalid_argument naming the bad entry.
FaultPlan parseFaultPlan(std::string_view text);

std::string_view faultSiteName(FaultSite site);

class FaultInjector {
 public:
  explicit FaultInjector(FaultPlan plan) : plan_(std::move(plan)) {}

  // Counts a call at `site`: its ordinal if the plan fails it, else 0.
  uint64_t strike(FaultSite site) {
    const auto index = static_cast<size_t>(site);
    if (plan_[index].empty()) return 0;
    const uint64_t ordinal = calls_[index].fetch_add(1) + 1;
    return plan_[index].contains(ordinal) ? ordinal : 0;
  }

 private:
  const FaultPlan plan_;
  std::array<std::atomic<uint64_t>, kFaultSiteCount> calls_{};
};

// What an injected failure says: "fault injected by PTO_SIM_FAULTS (launch:3)".
std::string describeFault(FaultSite site, uint64_t ordinal);

}  // namespace pto::rt::sim
