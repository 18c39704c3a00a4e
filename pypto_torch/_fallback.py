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


class fallback_mode:
    """Context manager that sets the fallback policy for the duration of a block."""

    def __init__(self, mode: str):
        self.mode = mode
        self.previous = None

    def __enter__(self):
        self.previous = set_fallback_mode(self.mode)

    def __exit__(self, *exc_info):
        set_fallback_mode(self.previous)
        return False


def quiet_tensor_printing(torch_module) -> None:
    """Printing a pto tensor runs a dozen small ops that the user did not write;
    their fallback warnings would be noise, so formatting runs silently."""
    tensor_str = torch_module._tensor_str
    format_tensor = tensor_str._str

    def _str(self, *, tensor_contents=None):
        if self.device.type != "pto" or _C._fallback_mode() != "warn":
            return format_tensor(self, tensor_contents=tensor_contents)
        with fallback_mode("silent"):
            return format_tensor(self, tensor_contents=tensor_contents)

    tensor_str._str = _str
