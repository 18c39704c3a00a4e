"""Building one PTO program out of lowered aten nodes.

A tensor value during lowering is a ``View``: dtype, shape, strides and offset
(in elements) over a ``Storage``. A storage is either memory the caller holds at
run time (a graph input, or the output of an earlier step: it has a ``slot``) or
a buffer the program being built writes. A ``Segment`` turns storages into the
program's numbered buffers and collects instructions; closing it decides which of
its buffers are outputs (someone after it reads them), has the C++ printer write its
PTO-AS (``_C._pto_as``) and compiles that.
"""
from __future__ import annotations

import dataclasses
import math

import torch

from pypto_torch import _C

# torch dtype -> PTO dtype name: the torch glue's one map (csrc/torch/dtype_map.cpp).
PTO_DTYPE_NAMES = dict(_C._dtype_map())


class Unsupported(Exception):
    """A node the lowering table cannot turn into PTO instructions; it runs eagerly.
    `node` names it where the whole graph must run eagerly because of it."""

    def __init__(self, message: str, node: str | None = None):
        super().__init__(message)
        self.node = node


class Storage:
    """Memory a view reads: a run-time slot, or a buffer of the segment that writes it."""

    def __init__(self, dtype: torch.dtype, device: torch.device, slot: int | None = None):
        self.dtype = dtype
        self.device = torch.device(device)
        self.slot = slot      # index into the run-time slots, once the memory is the caller's


@dataclasses.dataclass(frozen=True)
class View:
    storage: Storage
    shape: tuple
    strides: tuple
    offset: int = 0

    @property
    def dtype(self) -> torch.dtype:
        return self.storage.dtype

    @property
    def rank(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    def extent(self) -> int:
        """Elements from the storage's start to one past the last this view touches."""
        if self.numel() == 0:
            return self.offset
        return self.offset + 1 + sum((n - 1) * s for n, s in zip(self.shape, self.strides) if s > 0)

    def is_contiguous(self) -> bool:
        """Row-major over its shape (dimensions of extent 1 may have any stride)."""
        return self.numel() <= 1 or all(
            n == 1 or s == e for n, s, e in zip(self.shape, self.strides, contiguous_strides(self.shape)))


def contiguous_strides(shape) -> tuple:
    strides, running = [], 1
    for n in reversed(shape):
        strides.append(running)
        running *= max(n, 1)
    return tuple(reversed(strides))


def pto_dtype(dtype: torch.dtype) -> str:
    if dtype not in PTO_DTYPE_NAMES:
        raise Unsupported(f"dtype {dtype} has no PTO equivalent")
    return PTO_DTYPE_NAMES[dtype]


@dataclasses.dataclass
class Binding:
    """What buffer %i of a bound program is bound to at run time."""
    slot: int
    allocate: tuple | None = None  # (shape, strides, dtype, device) of an output the run allocates


@dataclasses.dataclass
class ProgramStep:
    program: _C._BoundProgram
    bindings: list       # one Binding (or None: a temporary) per buffer
    source: str          # the PTO-AS text it was compiled from (the disk cache keeps it)


class Segment:
    """The instructions of one program, in order, over the buffers they name."""

    def __init__(self):
        self.buffers: dict[Storage, int] = {}
        self.storages: list[Storage] = []
        self.instructions: list[tuple] = []  # (mnemonic, operands, immediates), as _C._pto_as takes them
        self.constants: list[tuple] = []     # fills of scalars, hoisted to the front
        self.constant_views: dict = {}
        self.extents: dict[Storage, int] = {}  # elements each buffer must hold

    def __bool__(self) -> bool:
        return bool(self.instructions)

    def buffer(self, storage: Storage) -> int:
        if storage not in self.buffers:
            self.buffers[storage] = len(self.storages)
            self.storages.append(storage)
        return self.buffers[storage]

    def operand(self, view: View) -> tuple:
        return self.buffer(view.storage), pto_dtype(view.dtype), view.shape, view.strides, view.offset

    def emit(self, mnemonic: str, out: View, *inputs: View, constant: bool = False, **immediates) -> View:
        instruction = (mnemonic, [self.operand(v) for v in (out, *inputs)], immediates)
        (self.constants if constant else self.instructions).append(instruction)
        for view in (out, *inputs):
            self.extents[view.storage] = max(self.extents.get(view.storage, 0), view.extent())
        return out

    def mark(self) -> tuple:
        return len(self.instructions), len(self.constants), len(self.constant_views)

    def rollback(self, mark: tuple) -> None:
        """Drops what a lowering that gave up emitted, the scalars it filled included
        (a later lowering must not read a constant whose fill is gone)."""
        del self.instructions[mark[0]:]
        del self.constants[mark[1]:]
        for key in list(self.constant_views)[mark[2]:]:
            del self.constant_views[key]

    def close(self, live: dict, next_slot, debug: bool, fuse: bool = True) -> ProgramStep:
        """Compiles the segment. Buffers it writes that views after it still read (`live`:
        storage -> those views) become outputs, each given a slot by `next_slot()`; the
        rest are temporaries."""
        buffers, bindings = [], []
        for storage in self.storages:
            numel = self.extents.get(storage, 0)
            if storage.slot is not None:
                kind, binding = "input", Binding(storage.slot)
            elif storage in live:
                storage.slot = next_slot()
                shape, strides = _layout(live[storage], numel)
                kind, binding = "output", Binding(storage.slot, (shape, strides, storage.dtype, storage.device))
            else:
                kind, binding = "temp", None
            buffers.append((kind, numel * storage.dtype.itemsize))
            bindings.append(binding)
        text = _C._pto_as(buffers, self.constants + self.instructions)
        program = _C._BoundProgram(text, debug, fuse)
        return ProgramStep(program, bindings, text)


def _layout(views: list, numel: int) -> tuple:
    """How to allocate a buffer: as the view of it that covers it exactly (so that a
    graph output is the tensor itself, not a view of a flat one), else flat."""
    for view in views:
        if view.offset == 0 and view.numel() == numel and view.extent() == numel:
            return view.shape, view.strides
    return (numel,), (1,)
