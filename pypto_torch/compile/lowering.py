"""The lowering table: each aten op the pto compiler handles, as PTO instructions.

An op with a recipe (csrc/recipes, the same one its eager kernel runs) is lowered
by asking the recipe for its steps over the node's views (``_C._recipe``): the
node's arguments by schema name, its results laid out as torch's meta kernel lays
them out. Views, reshapes, transposes and broadcasts emit nothing: they are strides
over the same buffer, as in the ISA. A lowering raises ``Unsupported`` when the case
at hand has no PTO form (a recipe that does not apply): that node then runs as an
eager torch call between programs. No PTO instruction is named here.
"""
from __future__ import annotations

import math
import operator

import torch

from pypto_torch import _C
from pypto_torch.compile.program_builder import PTO_DTYPE_NAMES, Storage, Unsupported, View, contiguous_strides, pto_dtype

aten = torch.ops.aten

TORCH_DTYPES = {name: dtype for dtype, name in PTO_DTYPE_NAMES.items()}


class Lowerer:
    """What a lowering works with: the segment being built and the node's meta result."""

    def __init__(self, segment, device: torch.device):
        self.segment = segment
        self.device = device
        self.meta = None  # the node's result on the meta device: concrete shapes and dtypes
        self.op = None

    # -- new buffers ------------------------------------------------------------------------
    def new(self, dtype: torch.dtype, shape) -> View:
        shape = tuple(int(n) for n in shape)
        return View(Storage(dtype, self.device), shape, contiguous_strides(shape))

    def like_meta(self, meta: torch.Tensor) -> View:
        """A new buffer with the layout aten gives the result (strides included): the
        graph's later views were traced on those strides (an elementwise op on a
        transposed tensor is transposed too, and a view of it may be no view otherwise)."""
        shape, strides = tuple(meta.shape), tuple(meta.stride())
        if any(s < 0 for s in strides):
            raise Unsupported("negative result strides")
        return View(Storage(meta.dtype, self.device), shape, strides)

    # -- recipes ------------------------------------------------------------------------------
    def recipe(self, op: str, arguments: list, results: list, constant: bool = False) -> None:
        """Emits the steps of `op`'s recipe: `arguments` as (schema name, value) pairs with
        tensors as Views, writing the `results` views. A constant recipe (a fill) is
        hoisted to the program's start."""
        storages: dict[Storage, int] = {}

        def number(view: View):
            buffer = storages.setdefault(view.storage, len(storages))
            return _C._RecipeView(buffer, pto_dtype(view.dtype), list(view.shape), list(view.strides), view.offset)

        def convert(value):
            if isinstance(value, View):
                return number(value)
            if isinstance(value, (list, tuple)):
                return [convert(v) for v in value]
            if isinstance(value, torch.dtype):
                return pto_dtype(value)
            if isinstance(value, (torch.device, torch.layout, torch.memory_format)):
                return None
            return value

        converted = [(name, convert(value)) for name, value in arguments]
        result_views = [number(view) for view in results]
        try:
            built = _C._recipe(op, converted, result_views, len(storages))
        except _C.RecipeNotApplicable as error:
            raise Unsupported(f"{op}: {error}") from None
        buffers = list(storages)
        for dtype, shape in built["temporaries"]:
            buffers.append(self.new(TORCH_DTYPES[dtype], shape).storage)
        for mnemonic, operands, immediates, hoisted in built["steps"]:
            views = [View(buffers[o.buffer], tuple(o.shape), tuple(o.strides), o.offset) for o in operands]
            if hoisted:  # a scalar's fill: once per program, shared by every step that reads it
                buffers[operands[0].buffer] = self.scalar(immediates["value"], views[0].dtype).storage
                continue
            self.segment.emit(mnemonic, views[0], *views[1:], constant=constant, **immediates)

    def scalar(self, value, dtype: torch.dtype) -> View:
        """A one-element buffer holding `value`, filled once at the program's start."""
        key = (repr(value), dtype)
        if key not in self.segment.constant_views:
            view = View(Storage(dtype, self.device), (), ())
            self.recipe("aten::scalar_tensor", [("s", value)], [view], constant=True)
            self.segment.constant_views[key] = view
        return self.segment.constant_views[key]

    def contiguous(self, view: View) -> View:
        if view.is_contiguous():
            return view
        out = self.new(view.dtype, view.shape)
        self.recipe("aten::clone", [("self", view)], [out])
        return out


def _by_recipe(lw: Lowerer, *args, **kwargs):
    """A node lowered by its op's recipe. Its arguments are bound to the schema's names
    (defaults filled in); its results are new buffers laid out as the meta kernel's,
    except an in-place op's, which is the argument it writes (copy_)."""
    schema = lw.op._schema
    named, given = [], dict(kwargs)
    for index, argument in enumerate(schema.arguments):
        if index < len(args):
            value = args[index]
        elif argument.name in given:
            value = given[argument.name]
        else:
            value = argument.default_value if argument.has_default_value() else None
        if isinstance(value, torch.device) and value.type != lw.device.type:
            raise Unsupported(f"a copy to {value}")
        named.append((argument.name, value))
    values = dict(named)
    if "self" in values and "other" in values:  # what a comparison computes in
        named.append(("common_dtype", _promoted(values["self"], values["other"])))
    written = [argument.name for argument in schema.arguments if argument.alias_info and argument.alias_info.is_write]
    metas = lw.meta if isinstance(lw.meta, (tuple, list)) else (lw.meta,)
    results = [values[written[0]]] if written else [lw.like_meta(meta) for meta in metas]
    lw.recipe(lw.op.name(), named, results)
    return tuple(results) if isinstance(lw.meta, (tuple, list)) else results[0]


def _promoted(*args) -> torch.dtype:
    metas = [torch.empty((), dtype=a.dtype, device="meta").expand(a.shape) if isinstance(a, View) else a for a in args]
    return torch.result_type(*metas)


# -- views: strides only ------------------------------------------------------------------
def expand(view: View, shape) -> View:
    shape = tuple(int(n) for n in shape)
    if view.shape == shape:
        return view
    lead = len(shape) - view.rank
    if lead < 0:
        raise Unsupported(f"cannot broadcast {list(view.shape)} to {list(shape)}")
    strides = [0] * lead
    for n, (have, stride) in zip(shape[lead:], zip(view.shape, view.strides)):
        if have == n:
            strides.append(stride)
        elif have == 1:
            strides.append(0)
        else:
            raise Unsupported(f"cannot broadcast {list(view.shape)} to {list(shape)}")
    return View(view.storage, shape, tuple(strides), view.offset)


def _view_strides(view: View, shape) -> tuple | None:
    """Strides that show `view` at `shape` without moving data (as aten's view), or None."""
    meta = torch.empty_strided(view.shape, view.strides, dtype=view.dtype, device="meta")
    try:
        return tuple(meta.view(shape).stride())
    except RuntimeError:
        return None


def reshape(lw: Lowerer, view: View, shape) -> View:
    shape = tuple(int(n) for n in shape)
    if -1 in shape:
        known = math.prod(n for n in shape if n != -1)
        shape = tuple(view.numel() // max(known, 1) if n == -1 else n for n in shape)
    strides = _view_strides(view, shape)
    if strides is None:
        view = lw.contiguous(view)
        strides = contiguous_strides(shape)
    return View(view.storage, shape, strides, view.offset)


def permute(view: View, dims) -> View:
    dims = [d % view.rank for d in dims] if view.rank else []
    return View(view.storage, tuple(view.shape[d] for d in dims), tuple(view.strides[d] for d in dims), view.offset)


def transpose(view: View, a: int, b: int) -> View:
    dims = list(range(view.rank))
    if view.rank:
        a, b = a % view.rank, b % view.rank
        dims[a], dims[b] = dims[b], dims[a]
    return permute(view, dims)


def unsqueeze(view: View, dim: int) -> View:
    dim = dim % (view.rank + 1)
    stride = view.strides[dim] * view.shape[dim] if dim < view.rank else 1
    return View(view.storage, view.shape[:dim] + (1,) + view.shape[dim:],
                view.strides[:dim] + (stride,) + view.strides[dim:], view.offset)


def squeeze(view: View, dims=None) -> View:
    if dims is None:
        dims = range(view.rank)
    dims = {d % view.rank for d in ([dims] if isinstance(dims, int) else dims)} if view.rank else set()
    keep = [d for d in range(view.rank) if not (d in dims and view.shape[d] == 1)]
    return View(view.storage, tuple(view.shape[d] for d in keep), tuple(view.strides[d] for d in keep), view.offset)


def slice_view(view: View, dim: int = 0, start=None, end=None, step: int = 1) -> View:
    dim = dim % view.rank
    n = view.shape[dim]
    start, end, step = (0 if start is None else start), (n if end is None else end), step
    start = min(max(start + n if start < 0 else start, 0), n)
    end = min(max(end + n if end < 0 else end, start), n)
    length = (end - start + step - 1) // step
    shape, strides = list(view.shape), list(view.strides)
    shape[dim], strides[dim] = length, strides[dim] * step
    return View(view.storage, tuple(shape), tuple(strides), view.offset + start * view.strides[dim])


def select(view: View, dim: int, index: int) -> View:
    dim = dim % view.rank
    index = index + view.shape[dim] if index < 0 else index
    return View(view.storage, view.shape[:dim] + view.shape[dim + 1:], view.strides[:dim] + view.strides[dim + 1:],
                view.offset + index * view.strides[dim])


def as_strided(view: View, size, stride, storage_offset=None) -> View:
    offset = view.offset if storage_offset is None else storage_offset
    return View(view.storage, tuple(size), tuple(stride), offset)


# -- the table ---------------------------------------------------------------------------
LOWERINGS: dict = {}


def _overload(name: str):
    """The OpOverload torch names `name` ("aten::add.Tensor"), or None where this torch
    has no such overload."""
    packet_name, _, overload = name.removeprefix("aten::").partition(".")
    packet = getattr(aten, packet_name, None)
    if packet is None or (overload or "default") not in packet.overloads():
        return None
    return getattr(packet, overload or "default")


# Every op with a recipe, eager and compiled alike.
RECIPE_OPS = tuple(op for op in map(_overload, _C._recipes()) if op is not None)
LOWERINGS.update({op: _by_recipe for op in RECIPE_OPS})


# -- views ------------------------------------------------------------------------------------
LOWERINGS.update({
    aten.view.default: lambda lw, x, shape: reshape(lw, x, shape),
    aten._unsafe_view.default: lambda lw, x, shape: reshape(lw, x, shape),
    aten.reshape.default: lambda lw, x, shape: reshape(lw, x, shape),
    aten.permute.default: lambda lw, x, dims: permute(x, dims),
    aten.transpose.int: lambda lw, x, a, b: transpose(x, a, b),
    aten.t.default: lambda lw, x: transpose(x, 0, 1) if x.rank == 2 else x,
    aten.expand.default: lambda lw, x, shape, implicit=False: expand(x, [n if n != -1 else x.shape[i - (len(shape) - x.rank)] for i, n in enumerate(shape)]),
    aten.unsqueeze.default: lambda lw, x, dim: unsqueeze(x, dim),
    aten.squeeze.dim: lambda lw, x, dim: squeeze(x, dim),
    aten.squeeze.dims: lambda lw, x, dims: squeeze(x, dims),
    aten.squeeze.default: lambda lw, x: squeeze(x),
    aten.slice.Tensor: lambda lw, x, dim=0, start=None, end=None, step=1: slice_view(x, dim, start, end, step),
    aten.select.int: lambda lw, x, dim, index: select(x, dim, index),
    aten.alias.default: lambda lw, x: x,
    aten.detach.default: lambda lw, x: x,
    aten.as_strided.default: lambda lw, x, size, stride, storage_offset=None: as_strided(x, size, stride, storage_offset),
})


def _split_sizes(view: View, sizes, dim: int) -> list:
    dim = dim % view.rank
    if isinstance(sizes, int):
        sizes = [min(sizes, view.shape[dim] - at) for at in range(0, view.shape[dim], sizes)] or [0]
    parts, at = [], 0
    for size in sizes:
        parts.append(slice_view(view, dim, at, at + size))
        at += size
    return parts


LOWERINGS.update({
    aten.split.Tensor: lambda lw, x, size, dim=0: _split_sizes(x, size, dim),
    aten.split_with_sizes.default: lambda lw, x, sizes, dim=0: _split_sizes(x, sizes, dim),
    aten.unbind.int: lambda lw, x, dim=0: [select(x, dim, i) for i in range(x.shape[dim % x.rank])],
})


# Python arithmetic on sizes, which symbolic shapes leave in the graph.
SIZE_OPS = {
    operator.add: operator.add, operator.sub: operator.sub, operator.mul: operator.mul,
    operator.floordiv: operator.floordiv, operator.truediv: operator.truediv, operator.mod: operator.mod,
    operator.neg: operator.neg, operator.eq: operator.eq, operator.ne: operator.ne, operator.lt: operator.lt,
    operator.le: operator.le, operator.gt: operator.gt, operator.ge: operator.ge,
    torch.sym_float: float, torch.sym_int: int, torch.sym_max: max, torch.sym_min: min, math.ceil: math.ceil,
    math.floor: math.floor,
}
