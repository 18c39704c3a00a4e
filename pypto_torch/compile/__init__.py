"""torch.compile for the pto device: ``torch.compile(model, backend="pypto")``.

Dynamo captures the graph, AOTAutograd makes aten graphs of it (forward and
backward), the lowering table (``lowering.py``) turns each into PTO programs, the
compiler (csrc/compiler) fuses and memory-plans them, and each program runs as one
launch on the current stream. ``explain`` shows all of that for one function.
What a compile produces is kept on disk for the next process (``disk_cache.py``;
``clear_cache()`` empties it, ``disk_cache.config.enabled`` switches it).

``backend="pypto"`` works after a bare ``import torch``: the package's
``torch_dynamo_backends`` entry point names ``pypto_backend``, and Dynamo registers
it when it first looks the name up. Importing this module first registers it
directly (unless Dynamo has already found the entry point and will register it).
"""
from torch._dynamo.backends import registry
from torch._dynamo.device_interface import register_interface_for_device

from pypto_torch.compile.backend import pypto_backend
from pypto_torch.compile.device_interface import PtoInterface
from pypto_torch.compile.disk_cache import clear_cache
from pypto_torch.compile.explain import Explanation, explain

if "pypto" not in registry._COMPILER_FNS and registry._BACKENDS.get("pypto") is None:
    registry.register_backend(compiler_fn=pypto_backend, name="pypto")
register_interface_for_device("pto", PtoInterface)

__all__ = ["Explanation", "clear_cache", "explain", "pypto_backend"]
