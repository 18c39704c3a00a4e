"""What runs through the CPU fallback instead of a native pto kernel."""

from pypto_torch import _C


def fallback_ops() -> dict[str, int]:
    """Every aten op that ran through the CPU fallback in this process, with its call count."""
    return dict(_C._fallback_counts())


def set_fallback_mode(mode: str) -> str:
    """Set the fallback policy ('warn', 'silent' or 'error'); returns the previous one.

    The initial policy comes from the ``PTO_FALLBACK`` environment variable (default 'warn').
    """
    previous = _C._fallback_mode()
    _C._set_fallback_mode(mode)
    return previous
