// Which driver runs: the drivers registered (registerDriver, driver.h), the one
// started at the first runtime call, and its life beside the process's (exit, fork).
#pragma once

#include "driver.h"

namespace pto::rt {

// The running driver, started at the first call (PTO_DRIVER's, else the registered
// one of highest priority that starts); null with *status set, and the reason
// recorded (fail()), when none starts or the process was forked after it started.
Driver* driverOrNull(ptoError* status);

}  // namespace pto::rt
