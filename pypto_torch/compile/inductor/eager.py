"""The eager form of an Inductor program that PTO cannot express (an op no instruction
computes, a dtype an instruction does not take): the same replay of its loop bodies
(tiles.py), each step an aten call on the pto tensors instead of a PTO instruction.

It stands in for ``Lowerer``: views over storages are tensors' strided windows, a
recipe's op is the aten op of the same name called eagerly, and Inductor ops outside
the recipe table are torch's functions of the same name. The program is counted
(``torch._dynamo.utils.counters["pto_inductor"]``).
"""
from __future__ import annotations

import math

import torch

from pypto_torch.compile.lowering import _overload
from pypto_torch.compile.program_builder import Storage, Unsupported, View, contiguous_strides


class EagerLowerer:
    """Runs recipes' ops as aten calls over the tensors bound to each storage."""

    def __init__(self, device: torch.device):
        self.device = device
        self.tensors: dict[Storage, torch.Tensor] = {}

    # -- storages and views ---------------------------------------------------------------
    def bind(self, storage: Storage, tensor: torch.Tensor) -> None:
        """`tensor`'s memory, from its first element on, as `storage`."""
        self.tensors[storage] = tensor

    def tensor(self, view: View) -> torch.Tensor:
        base = self.tensors[view.storage]
        return base.as_strided(view.shape, view.strides, base.storage_offset() + view.offset)

    def new(self, dtype: torch.dtype, shape) -> View:
        shape = tuple(int(n) for n in shape)
        view = View(Storage(dtype, self.device), shape, contiguous_strides(shape))
        self.bind(view.storage, torch.empty(math.prod(shape), dtype=dtype, device=self.device))
        return view

    def scalar(self, value, dtype: torch.dtype) -> View:
        view = View(Storage(dtype, self.device), (), ())
        self.bind(view.storage, torch.full((), value, dtype=dtype, device=self.device))
        return view

    def contiguous(self, view: View) -> View:
        out = self.new(view.dtype, view.shape)
        self.tensor(out).copy_(self.tensor(view))
        return out

    # -- ops -------------------------------------------------------------------------------
    def recipe(self, op: str, arguments: list, results: list, constant: bool = False) -> None:
        overload = _overload(op)
        schema = {argument.name: argument for argument in overload._schema.arguments}
        kwargs = {}
        for name, value in arguments:
            if name not in schema:
                continue  # what only the recipe reads (a comparison's common dtype)
            if isinstance(value, View):
                value = self.tensor(value)
            elif isinstance(value, list) and str(schema[name].type) in ("int", "Optional[int]"):
                if len(value) != 1:
                    raise Unsupported(f"{op} over {len(value)} dims")
                value = value[0]
            kwargs[name] = value
        if "device" in schema and "device" not in kwargs:
            kwargs["device"] = self.device
        value = overload(**kwargs)
        target = self.tensor(results[0])
        if value is not target and value is not kwargs.get("self"):
            target.copy_(value)

    def torch_op(self, name: str, operands: list) -> View:
        """An Inductor op without a recipe, as torch's function of that name."""
        function = getattr(torch, name, None) or getattr(torch.special, name, None)
        if function is None:
            raise Unsupported(f"Inductor's ops.{name}")
        value = function(*(self.tensor(v) for v in operands))
        out = self.new(value.dtype, value.shape)
        self.tensor(out).copy_(value)
        return out
