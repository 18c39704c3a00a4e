"""Memory of the pto devices: the caching allocator's statistics and controls.

The numbers come from the allocator through ``torch.accelerator.memory``; this
module gives them ``torch.cuda``'s names and a readable summary.
"""

import pickle
import sys
from collections import OrderedDict
from typing import Any

import torch
import torch.accelerator.memory as accelerator_memory

from pypto_torch import _C
from pypto_torch.pto import streams


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



def caching_allocator_alloc(size: int, device: Any = None, stream: Any = None) -> int:
    """Allocate `size` bytes from the caching allocator on `device` for `stream` (default:
    the device's current stream); returns the address. Free it with caching_allocator_delete."""
    index = _index(device)
    if stream is None:
        stream = streams.current_stream(index)
    elif isinstance(stream, int):
        stream = torch.Stream(stream_id=stream, device_index=index,
                              device_type=streams.current_stream(index).device_type)
    if not isinstance(stream, torch.Stream):
        raise TypeError(f"caching_allocator_alloc: stream must be a torch.pto.Stream or a stream id, "
                        f"got {type(stream).__name__}")
    with streams.stream(stream):
        return _C._caching_allocator_alloc(size, stream.device_index)


def caching_allocator_delete(mem_ptr: int) -> None:
    """Free memory that caching_allocator_alloc returned."""
    _C._caching_allocator_delete(mem_ptr)


def _record_memory_history(enabled: str | None = "all", context: str | None = "all", stacks: str = "all",
                           max_entries: int = sys.maxsize, device: Any = None, clear_history: bool = False,
                           **unsupported: Any) -> None:
    """Record the allocator's history, as torch.cuda.memory._record_memory_history: with
    enabled="state" the stack that allocated each live block, with "all" also a trace of
    every alloc, free and segment (the newest `max_entries`); None stops and forgets.
    `context` is whose stacks are kept ("all" adds frees; None keeps none); `stacks` is
    "python" or "all" (C++ frames too). The recording covers every pto device."""
    if unsupported:
        raise TypeError(f"_record_memory_history: pto does not record {sorted(unsupported)}")
    if enabled not in (None, "state", "all"):
        raise ValueError(f"_record_memory_history: enabled must be None, 'state' or 'all', got {enabled!r}")
    if context not in (None, "state", "alloc", "all"):
        raise ValueError(f"_record_memory_history: context must be None, 'state', 'alloc' or 'all', got {context!r}")
    if stacks not in ("python", "all"):
        raise ValueError(f"_record_memory_history: stacks must be 'python' or 'all', got {stacks!r}")
    _index(device)
    _C._record_memory_history(enabled is not None, enabled == "all", context is not None, context == "all",
                              stacks == "all", max_entries, clear_history)


def _snapshot(device: Any = None) -> dict[str, Any]:
    """The allocator's segments and recorded history: the dictionary torch.cuda.memory._snapshot()
    returns, which torch.cuda._memory_viz reads."""
    _index(device)
    return _C._memory_snapshot()


def memory_snapshot() -> list[dict[str, Any]]:
    """The allocator's segments on every pto device (_snapshot()["segments"])."""
    return _C._memory_snapshot()["segments"]


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Save _snapshot() as a pickle that https://pytorch.org/memory_viz opens."""
    with open(filename, "wb") as file:
        pickle.dump(_snapshot(), file)
