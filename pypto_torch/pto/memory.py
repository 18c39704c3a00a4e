"""Memory of the pto devices: the caching allocator's statistics and controls.

The numbers come from the allocator through ``torch.accelerator.memory``; this
module gives them ``torch.cuda``'s names and a readable summary. Memory pools,
the pluggable allocator, the memory fraction and the pinned host allocator's
statistics are torch.cuda.memory's, over the caching allocator in C++
(``csrc/torch/device_allocator.h``, ``mem_pool.h``, ``pluggable_allocator.h``).
"""

import contextlib
import ctypes
import os
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


# The four counters read alone, not out of memory_stats' dict of every counter: the
# same numbers in ~1 us, not ~190 (training loops log them every step).
def memory_allocated(device: Any = None) -> int:
    return _C._allocator_bytes(_index(device), "allocated_bytes", peak=False)


def max_memory_allocated(device: Any = None) -> int:
    return _C._allocator_bytes(_index(device), "allocated_bytes", peak=True)


def memory_reserved(device: Any = None) -> int:
    return _C._allocator_bytes(_index(device), "reserved_bytes", peak=False)


def max_memory_reserved(device: Any = None) -> int:
    return _C._allocator_bytes(_index(device), "reserved_bytes", peak=True)


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


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    """Limit the caching allocator of `device` to `fraction` of its capacity, as torch.cuda's:
    an allocation beyond it empties the cache and, if still beyond, raises torch.OutOfMemoryError."""
    index = _index(device)
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C._set_memory_fraction(fraction, index)


def get_per_process_memory_fraction(device: Any = None) -> float:
    """The fraction of `device`'s capacity the caching allocator may take (1.0 unless set)."""
    return _C._get_memory_fraction(_index(device))


def host_memory_stats_as_nested_dict() -> dict[str, Any]:
    """The pinned host allocator's statistics, with torch.cuda.host_memory_stats_as_nested_dict's keys."""
    return _C._host_memory_stats()


def host_memory_stats() -> "OrderedDict[str, Any]":
    """The pinned host allocator's statistics, flat: ``allocations``, ``allocated_bytes``,
    ``active_requests``, ``active_bytes`` (current, peak, allocated, freed), ``num_host_alloc``,
    ``num_host_free`` and ``host_alloc_time`` / ``host_free_time`` in microseconds, as torch.cuda's."""
    result = []

    def flatten(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                flatten(f"{prefix}.{key}" if prefix else key, item)
        else:
            result.append((prefix, value))

    flatten("", host_memory_stats_as_nested_dict())
    return OrderedDict(sorted(result))


def reset_accumulated_host_memory_stats() -> None:
    """Reset the pinned host allocator's "allocated" and "freed" counts."""
    _C._reset_accumulated_host_memory_stats()


def reset_peak_host_memory_stats() -> None:
    """Reset the pinned host allocator's "peak" values."""
    _C._reset_peak_host_memory_stats()


class _PTOAllocator:
    """An allocator torch.pto can use instead of the caching allocator's segments (as torch.cuda's)."""

    def __init__(self, allocator: "_C._PTOAllocator"):
        self._allocator = allocator

    def allocator(self) -> "_C._PTOAllocator":
        return self._allocator


class PTOPluggableAllocator(_PTOAllocator):
    """An allocator from a shared library, as torch.cuda.memory.CUDAPluggableAllocator: its
    functions are ``void* alloc(size_t size, int device, void* stream)`` and
    ``void free(void* ptr, size_t size, int device, void* stream)``. What ``alloc`` returns must
    be device memory the runtime knows: the library calls the runtime's C API (``ptoMalloc``,
    ``csrc/runtime/pto_runtime.h``), which pypto_torch makes visible to it."""

    def __init__(self, path_to_so_file: str, alloc_fn_name: str, free_fn_name: str):
        # The runtime's entry points live in pypto_torch._C, loaded privately as every extension
        # is: made global, an allocator library resolves ptoMalloc there as a CUDA one resolves
        # cudaMalloc in libcudart.
        ctypes.CDLL(_C.__file__, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
        library = ctypes.CDLL(path_to_so_file)
        alloc_fn = ctypes.cast(getattr(library, alloc_fn_name), ctypes.c_void_p).value
        free_fn = ctypes.cast(getattr(library, free_fn_name), ctypes.c_void_p).value
        super().__init__(_C._PTOAllocator(alloc_fn, free_fn))


def change_current_allocator(allocator: _PTOAllocator) -> None:
    """Make `allocator` torch's allocator for pto tensors, as torch.cuda's: only before the
    caching allocator has handed out memory. Every tensor then comes from its ``alloc``."""
    _C._change_current_allocator(allocator.allocator())


class MemPool(_C._MemPool):
    """A pool of the caching allocator's memory, as torch.cuda.MemPool: allocations inside
    ``use_mem_pool(pool)`` come from it and nothing else shares its blocks; its memory returns
    to the device (or to `allocator`) when the pool and everything allocated from it are gone.

    `allocator`: a PTOPluggableAllocator (or its ``allocator()``) the pool's segments come from;
    None: the runtime. `use_on_oom`: when an allocation outside every pool finds no memory, the
    pool's cached blocks are its last resort. `no_split`: each block gets a segment of its own size.
    """

    def __init__(self, allocator: "_PTOAllocator | _C._PTOAllocator | None" = None, use_on_oom: bool = False,
                 no_split: bool = False):
        if isinstance(allocator, _PTOAllocator):
            allocator = allocator.allocator()
        super().__init__(allocator, use_on_oom, no_split)

    @property
    def id(self) -> tuple[int, int]:
        """The pool's id, as graph capture's ``pool=`` takes it."""
        return super().id

    def use_count(self) -> int:  # pylint: disable=useless-parent-delegation
        """The pool's users: this object, graphs capturing into it and open use_mem_pool contexts."""
        return super().use_count()

    def snapshot(self) -> list[dict[str, Any]]:
        """memory_snapshot()'s segments of this pool."""
        return [segment for segment in memory_snapshot() if segment["segment_pool_id"] == self.id]


@contextlib.contextmanager
def use_mem_pool(pool: MemPool, device: Any = None):
    """Route this thread's allocations on `device` (default: the current one) to `pool`,
    as torch.cuda.use_mem_pool; other threads allocate as before."""
    index = _index(device)
    _C._begin_allocate_current_thread_to_pool(index, pool.id)
    try:
        yield
    finally:
        _C._end_allocate_to_pool(index, pool.id)
        _C._release_pool(index, pool.id)
