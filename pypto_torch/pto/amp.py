"""``torch.pto.amp``: mixed precision on pto, as ``torch.cuda.amp`` has it.

The cast policies themselves are CUDA's, registered for pto in C++
(``csrc/torch/autocast.cpp``); GradScaler's kernels are native pto ops
(``csrc/torch/aten/amp.cpp``). These are the device-bound spellings of
``torch.autocast("pto")`` and ``torch.amp.GradScaler("pto")``.
"""

import torch


class autocast(torch.amp.autocast):
    """``torch.autocast("pto", ...)``; dtype None means ``torch.get_autocast_dtype("pto")`` (float16 by default,
    as on cuda).

    Unlike ``torch.autocast``, which warns and disables itself, a dtype pto cannot autocast to is an error.
    """

    def __init__(self, enabled: bool = True, dtype: torch.dtype | None = None, cache_enabled: bool = True):
        supported = torch.pto.get_amp_supported_dtype()
        if dtype is not None and dtype not in supported:
            raise ValueError(
                f"torch.pto.amp.autocast: dtype {dtype} is not supported, pto autocasts to one of {supported}"
            )
        super().__init__("pto", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """``torch.amp.GradScaler("pto", ...)``."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ):
        super().__init__("pto", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


__all__ = ["GradScaler", "autocast"]
