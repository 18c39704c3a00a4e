"""``torch.pto``: the pto device module, shaped after ``torch.cuda``."""

import dataclasses
import functools
from typing import Any

import torch

from pypto_torch import _C
from pypto_torch.pto import inductor as _inductor
from pypto_torch.pto import amp
from pypto_torch.pto.graphs import (
    PTOGraph,
    graph,
    graph_pool_handle,
    is_current_stream_capturing,
    make_graphed_callables,
)
from pypto_torch.pto.memory import (
    MemPool,
    PTOPluggableAllocator,
    caching_allocator_alloc,
    caching_allocator_delete,
    change_current_allocator,
    empty_cache,
    get_per_process_memory_fraction,
    host_memory_stats,
    host_memory_stats_as_nested_dict,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_summary,
    reset_accumulated_host_memory_stats,
    reset_accumulated_memory_stats,
    reset_peak_host_memory_stats,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
    use_mem_pool,
)
from pypto_torch.pto.random import (
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from pypto_torch.pto.storage import STORAGE_CLASSES
from pypto_torch.sharing import ipc_collect
from pypto_torch.pto.streams import (
    Event,
    ExternalStream,
    Stream,
    current_stream,
    default_stream,
    get_stream_from_external,
    set_stream,
    stream,
)
from pypto_torch.pto.utilization import utilization

globals().update(STORAGE_CLASSES)  # torch.pto.FloatStorage, ...
_inductor.keep_whole_on_pto()

def _device_index(device: Any, optional: bool = True) -> int:
    """Index of `device` (a torch.device, 'pto:1', an int, or None for the current one)."""
    if device is None:
        return current_device() if optional else 0
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "pto":
        raise ValueError(f"expected a pto device, got {device}")
    return current_device() if device.index is None else device.index


def is_available() -> bool:
    return _C._device_count() > 0


def device_count() -> int:
    return _C._device_count()


def current_device() -> int:
    return _C._current_device()


def set_device(device: Any) -> None:
    index = _device_index(device)
    if index >= 0:
        init()  # as torch.cuda.set_device: the device is initialised from here on
        _C._set_device(index)


def init() -> None:
    _C._init()


def _lazy_init() -> None:
    """What torch calls before the first tensor on pto from Python (its device_lazy_init,
    as torch.cuda._lazy_init): the device starts, and torch.pto._initialized is True.
    torch.utils.checkpoint saves a device's RNG state for the recomputation only where
    that attribute is: without it, dropout drew other masks in the backward."""
    _C._init()


def is_initialized() -> bool:
    """Whether the device is initialised: by init(), set_device or the first tensor on pto."""
    return _C._is_initialized()


def _is_in_bad_fork() -> bool:
    """Whether this process was forked after the device started in its parent."""
    return _C._is_in_bad_fork()


def synchronize(device: Any = None) -> None:
    """Wait for all work on every stream of `device` (default: the current one)."""
    _C._synchronize(_device_index(device))


_SYNC_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode: int | str) -> None:
    """As ``torch.cuda.set_sync_debug_mode``: "default" (0) lets calls that make the
    host wait for the device pass, "warn" (1) warns at each, "error" (2) raises. They
    are the ones CUDA's mode flags: copies between host and device the host waits for
    (``.cpu()``, ``.item()``, ``nonzero``...) and ``Stream.synchronize``."""
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_DEBUG_MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = _SYNC_DEBUG_MODES[debug_mode]
    if not isinstance(debug_mode, int):
        raise RuntimeError("invalid argument to set_sync_debug_mode, must be an int")
    _C._set_sync_debug_mode(debug_mode)


def get_sync_debug_mode() -> int:
    """The mode set_sync_debug_mode set: 0, 1 or 2."""
    return _C._get_sync_debug_mode()


def get_device_name(device: Any = None) -> str:
    return get_device_properties(device).name


@dataclasses.dataclass(frozen=True)
class DeviceProperties:
    """What a pto device is and can do, as the runtime reports it (ptoDeviceGetAttribute)."""

    name: str
    driver: str                    # the runtime's driver, for people to read ("sim", "acl")
    major: int                     # the PTO ISA version the device executes
    minor: int
    total_memory: int              # bytes
    multi_processor_count: int     # cores that run a program's tiles in parallel
    unified_buffer_bytes: int      # each core's on-chip tile memory (the ISA's tiles live there)
    pageable_memory_access: bool   # programs reach plain host memory by its address
    host_access_to_device_memory: bool  # host code reaches device memory by its address
    bfloat16: bool
    float64: bool
    # The host vector ISA the device's kernels compute with ("avx512", "avx2", "sse4",
    # "neon" or "scalar"; PTO_SIM_VECTOR_ISA caps it), None where the device is not the host.
    vector_isa: str | None


# ptoVectorIsa's values (pto_runtime.h) by name.
_VECTOR_ISAS = ("scalar", "sse4", "avx2", "avx512", "neon")


def _vector_isa(device: int) -> str | None:
    try:
        return _VECTOR_ISAS[_C._device_attribute(device, "vector_isa")]
    except RuntimeError:  # PTO_ERROR_NOT_SUPPORTED: the device does not compute on the host
        return None


def get_device_properties(device: Any = None) -> DeviceProperties:
    index = _device_index(device)
    index = current_device() if index < 0 else index
    attribute = functools.partial(_C._device_attribute, index)
    driver = _C._driver_name()
    return DeviceProperties(
        name=f"PTO {driver} device",
        driver=driver,
        major=attribute("isa_version_major"),
        minor=attribute("isa_version_minor"),
        total_memory=attribute("total_memory_bytes"),
        multi_processor_count=attribute("core_count"),
        unified_buffer_bytes=attribute("unified_buffer_bytes"),
        pageable_memory_access=bool(attribute("pageable_memory_access")),
        host_access_to_device_memory=bool(attribute("host_access_to_device_memory")),
        bfloat16=bool(attribute("bfloat16")),
        float64=bool(attribute("float64")),
        vector_isa=_vector_isa(index),
    )


def get_device_capability(device: Any = None) -> tuple[int, int]:
    """(major, minor): the PTO ISA version the device executes."""
    properties = get_device_properties(device)
    return properties.major, properties.minor


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return including_emulation or get_device_properties().bfloat16


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float16, torch.bfloat16]


class device:
    """Context manager that makes `device` the current pto device (like torch.cuda.device)."""

    def __init__(self, device: Any):
        self.index = -1 if device is None else _device_index(device)
        self.previous = -1

    def __enter__(self):
        self.previous = _C._exchange_device(self.index)

    def __exit__(self, *exc_info):
        if self.index >= 0:
            _C._set_device(self.previous)
        return False


class device_of(device):
    """Context manager that makes the device of `tensor` current (no-op for CPU tensors)."""

    def __init__(self, tensor: torch.Tensor):
        super().__init__(tensor.get_device() if tensor.device.type == "pto" else None)


__all__ = [
    "DeviceProperties",
    "Event",
    "ExternalStream",
    "PTOGraph",
    "Stream",
    "amp",
    "caching_allocator_alloc",
    "caching_allocator_delete",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "empty_cache",
    "get_amp_supported_dtype",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_rng_state",
    "get_rng_state_all",
    "get_stream_from_external",
    "get_sync_debug_mode",
    "graph",
    "graph_pool_handle",
    "init",
    "initial_seed",
    "ipc_collect",
    "is_available",
    "is_bf16_supported",
    "is_current_stream_capturing",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "make_graphed_callables",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_summary",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_device",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "set_sync_debug_mode",
    "stream",
    "synchronize",
    "utilization",
]


def __getattr__(name: str):
    # torch.cuda's flag, read by torch (torch.utils.checkpoint), kept by the device itself.
    if name == "_initialized":
        return is_initialized()
    # Inductor's code generators, resolved on first lookup (pypto_torch/pto/inductor.py).
    if name in _inductor.CODEGEN_NAMES:
        return _inductor.codegen(name)
    raise AttributeError(f"module 'torch.pto' has no attribute {name!r}")
