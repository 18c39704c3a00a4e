// torch.pto.set_sync_debug_mode, as torch.cuda's (c10::cuda::warning_state): whether
// a call that makes the host wait for the device warns, raises, or neither. The
// calls that check are the ones CUDA's check: a copy between host and device the host
// waits for (.cpu(), .item(), tensor printing, nonzero's count) and a stream's
// synchronize; a device-wide or event synchronize, asked for by name, does not.
#pragma once

#include <cstdint>

namespace pto::torch_glue {

enum class SyncDebugMode : int64_t { kDefault = 0, kWarn = 1, kError = 2 };

void setSyncDebugMode(int64_t mode);  // 0, 1 or 2, else CUDA's error
SyncDebugMode syncDebugMode();

// Called by the glue right before the host waits for the device.
void warnOrErrorOnSync();

}  // namespace pto::torch_glue
