"""pypto_torch: PyTorch on a PTO device.

Importing this package (or just ``import torch``, through the ``torch.backends``
entry point) registers the ``pto`` device: ``torch.randn(3, device="pto")``,
``tensor.to("pto")``, ``torch.pto.*``, autograd and ``torch.accelerator``.
"""

import torch

from pypto_torch import _C  # loading it registers kernels, allocators, guard and hooks
from pypto_torch import pto
from pypto_torch._fallback import fallback_mode, fallback_ops, quiet_tensor_printing, set_fallback_mode

torch.utils.rename_privateuse1_backend("pto")
torch._register_device_module("pto", pto)
torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
quiet_tensor_printing(torch)


def _autoload() -> None:
    """Entry point of ``torch.backends``: importing this package is the registration."""


__all__ = ["fallback_mode", "fallback_ops", "set_fallback_mode", "pto"]
