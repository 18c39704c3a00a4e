#include "sync_debug.h"

#include <c10/util/Exception.h>

#include <atomic>

namespace pto::torch_glue {
namespace {

std::atomic<SyncDebugMode> sync_debug_mode{SyncDebugMode::kDefault};

}  // namespace

void setSyncDebugMode(int64_t mode) {
  TORCH_CHECK(mode >= 0 && mode <= 2, "invalid value of debug_mode, expected one of 0,1,2");
  sync_debug_mode.store(static_cast<SyncDebugMode>(mode), std::memory_order_relaxed);
}

SyncDebugMode syncDebugMode() { return sync_debug_mode.load(std::memory_order_relaxed); }

void warnOrErrorOnSync() {
  switch (syncDebugMode()) {
    case SyncDebugMode::kDefault: return;
    case SyncDebugMode::kWarn: TORCH_WARN("called a synchronizing pto operation"); return;
    case SyncDebugMode::kError: TORCH_CHECK(false, "called a synchronizing pto operation");
  }
}

}  // namespace pto::torch_glue
