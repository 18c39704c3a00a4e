"""Memory of the pto devices: the caching allocator's statistics and controls.

The numbers come from the allocator through ``torch.accelerator.memory``; this
module gives them ``torch.cuda``'s names and a readable summary.
"""

from collections import OrderedDict
from typing import Any

import torch
import torch.accelerator.memory as accelerator_memory


def _index(device: Any) -> int:
    from pypto_torch.pto import _device_index

    return _device_index(device)


def memory_stats(device: Any = None) -> "OrderedDict[str, Any]":
    return accelerator_memory.memory_stats(_index(device))


def memory_allocated(device: Any = None) -> int:
    return accelerator_memory.memory_allocated(_index(device))


def max_memory_allocated(device: Any = None) -> int:
    return accelerator_memory.max_memory_allocated(_index(device))


def memory_reserved(device: Any = None) -> int:
    return accelerator_memory.memory_reserved(_index(device))


def max_memory_reserved(device: Any = None) -> int:
    return accelerator_memory.max_memory_reserved(_index(device))


def reset_peak_memory_stats(device: Any = None) -> None:
    accelerator_memory.reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    accelerator_memory.reset_accumulated_memory_stats(_index(device))


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of the device, as the runtime accounts them."""
    return accelerator_memory.get_memory_info(_index(device))


def empty_cache() -> None:
    """Return every unused cached block to the devices."""
    accelerator_memory.empty_cache()


def _format_bytes(count: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.2f} {unit}"
        count /= 1024
    return str(count)


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A table of the allocator's statistics for `device`, like torch.cuda.memory_summary."""
    index = _index(device)
    stats = memory_stats(index)
    free, total = mem_get_info(index)
    rows = [
        ("Allocated memory", "allocated_bytes", _format_bytes),
        ("Active memory", "active_bytes", _format_bytes),
        ("Requested memory", "requested_bytes", _format_bytes),
        ("Reserved memory", "reserved_bytes", _format_bytes),
        ("Non-releasable memory", "inactive_split_bytes", _format_bytes),
        ("Allocations", "allocation", str),
        ("Active allocations", "active", str),
        ("Reserved segments", "segment", str),
    ]
    pools = ["all"] if abbreviated else ["all", "large_pool", "small_pool"]
    width = 78
    lines = ["=" * width,
             f" pto:{index} memory summary ({_format_bytes(total)} capacity, {_format_bytes(free)} free)",
             "-" * width,
             f" {'Metric':<28}" + "".join(f"{name:>12} " for name in ("Current", "Peak", "Allocated", "Freed")),
             "-" * width]
    for title, key, fmt in rows:
        for pool in pools:
            label = title if pool == "all" else f"  from {pool.replace('_', ' ')}"
            values = [stats.get(f"{key}.{pool}.{field}", 0) for field in ("current", "peak", "allocated", "freed")]
            lines.append(f" {label:<28}" + "".join(f"{fmt(v):>12} " for v in values))
    lines.append("-" * width)
    lines.append(f" Device allocations: {stats.get('num_device_alloc', 0)}    "
                 f"Device frees: {stats.get('num_device_free', 0)}    "
                 f"Alloc retries: {stats.get('num_alloc_retries', 0)}    OOMs: {stats.get('num_ooms', 0)}")
    lines.append("=" * width)
    return "\n".join(lines)
