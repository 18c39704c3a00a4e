"""What Inductor, torch.compile's default backend, finds for the pto device.

Inductor looks up a PrivateUse1 device's code generators on its module
(``torch.pto.Scheduling``, ``PythonWrapperCodegen``, ``CppWrapperCodegen``,
``WrapperFxCodegen``) when it first compiles, and registers what it finds. The first
lookup registers pto's backend itself (pypto_torch.compile.inductor.register), with what
the lookup cannot carry (the device's cache-key pass, the device op overrides); pto
has no C++ or FX wrapper to offer, so Inductor then keeps that registration. Resolving
the names on first lookup keeps Inductor (seconds to import) out of ``import
pypto_torch``.

Inductor decomposes every op its table names before any device is asked; on pto, the
ops with a fused row instruction (softmax, attention's safe softmax, log_softmax, layer
norm, GELU and their gradients) stay whole instead (``KEPT_WHOLE``): Inductor calls them
as extern kernels, one pass over each row where their decompositions make one per
reduction and pointwise step. The table is amended as Inductor's decomposition module loads
(``keep_whole_on_pto``), before any compile reads it, for pto's tensors only.
"""
import functools
import importlib
import importlib.abc
import importlib.machinery
import sys

import torch

aten = torch.ops.aten

CODEGEN_NAMES = ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen")


def codegen(name: str):
    inductor = importlib.import_module("pypto_torch.compile.inductor")
    inductor.register()
    if name == "Scheduling":
        return inductor.PTOScheduling
    if name == "PythonWrapperCodegen":
        return inductor.PTOWrapperCodegen
    raise AttributeError(f"torch.pto has no {name}: pto's Inductor kernels are launched from a Python wrapper")


# The ops Inductor calls whole on pto: each is one row instruction of the device (a
# recipe in csrc/recipes/rows.cpp and norms) with an eager pto kernel.
KEPT_WHOLE = (
    aten._softmax.default, aten._softmax_backward_data.default, aten._safe_softmax.default,
    aten._log_softmax.default, aten._log_softmax_backward_data.default,
    aten.native_layer_norm.default, aten.native_layer_norm_backward.default,
    aten.gelu.default, aten.gelu_backward.default,
)

_DECOMPOSITION_MODULE = "torch._inductor.decomposition"


def keep_whole_on_pto() -> None:
    """Amends Inductor's decomposition table (now, or as its module loads): each op of
    KEPT_WHOLE is decomposed as before unless one of its tensors is a pto tensor."""
    module = sys.modules.get(_DECOMPOSITION_MODULE)
    if module is not None:
        _amend(module.decompositions)
    else:
        sys.meta_path.insert(0, _AfterLoading(_DECOMPOSITION_MODULE, lambda m: _amend(m.decompositions)))


def _amend(table: dict) -> None:
    for op in KEPT_WHOLE:
        decompose = table.get(op)
        if decompose is not None and not getattr(decompose, "amended_for_pto", False):
            table[op] = _unless_on_pto(decompose)


def _unless_on_pto(decompose):
    @functools.wraps(decompose)
    def decomposition(*args, **kwargs):
        if any(isinstance(a, torch.Tensor) and a.device.type == "pto" for a in (*args, *kwargs.values())):
            return NotImplemented  # what a decomposition returns to leave its op whole
        return decompose(*args, **kwargs)
    decomposition.amended_for_pto = True
    return decomposition


class _AfterLoading(importlib.abc.MetaPathFinder):
    """Finds module `name` as Python would, and runs then(module) once it has executed."""

    def __init__(self, name: str, then):
        self.name = name
        self.then = then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            self.then(module)
        spec.loader.exec_module = exec_module
        return spec
