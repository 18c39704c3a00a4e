"""``torch.pto.utilization``: how busy a device has been, from the runtime's count of the
time its streams spent running work (PTO_DEVICE_ATTR_BUSY_NANOSECONDS)."""

import time
from typing import Any

from pypto_torch import _C

# Per device: (busy nanoseconds, clock) when utilization() last asked. The counter
# starts at 0 with the runtime, which starts when the extension loads.
_started = time.monotonic_ns()
_last_sample: dict[int, tuple[int, int]] = {}


def utilization(device: Any = None) -> int:
    """Percent of the time since the previous call for `device` (the first time: since the
    runtime started) during which its streams ran work, as torch.cuda.utilization.
    Streams running at once count each, capped at 100."""
    from pypto_torch.pto import _device_index, current_device

    index = _device_index(device)
    index = current_device() if index < 0 else index
    busy = _C._device_attribute(index, "busy_nanoseconds")
    now = time.monotonic_ns()
    last_busy, last_time = _last_sample.get(index, (0, _started))
    _last_sample[index] = (busy, now)
    return min(100, round(100 * (busy - last_busy) / max(1, now - last_time)))
