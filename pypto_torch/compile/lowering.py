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
def _meta_of(view: View) -> torch.Tensor:
    """The view as a meta tensor: its shape, strides and offset over a storage of no size."""
    return torch.empty(0, dtype=view.dtype, device="meta").as_strided(view.shape, view.strides, view.offset)


def _view(lw: Lowerer, x: View, *args, **kwargs):
    """A view op: torch's meta kernel, run on x's geometry, says the result's shape,
    strides and offset over x's buffer; nothing is emitted. Where it copies (a reshape
    no strides express), the result is x made contiguous first, as aten's reshape does."""
    base = _meta_of(x)
    result = lw.op(base, *args, **kwargs)
    metas = result if isinstance(result, (list, tuple)) else [result]
    views = []
    for meta in metas:
        if meta.untyped_storage()._cdata != base.untyped_storage()._cdata:
            copy = lw.contiguous(x)
            views.append(View(copy.storage, tuple(meta.shape), tuple(meta.stride()), 0))
        else:
            views.append(View(x.storage, tuple(meta.shape), tuple(meta.stride()), meta.storage_offset()))
    return views if isinstance(result, (list, tuple)) else views[0]


VIEW_OPS = (
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.permute.default, aten.transpose.int,
    aten.t.default, aten.expand.default, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims,
    aten.squeeze.default, aten.slice.Tensor, aten.select.int, aten.alias.default, aten.detach.default,
    aten.as_strided.default, aten.split.Tensor, aten.split_with_sizes.default, aten.unbind.int,
)
LOWERINGS.update({op: _view for op in VIEW_OPS})


# Python arithmetic on sizes, which symbolic shapes leave in the graph.
SIZE_OPS = {
    operator.add: operator.add, operator.sub: operator.sub, operator.mul: operator.mul,
    operator.floordiv: operator.floordiv, operator.truediv: operator.truediv, operator.mod: operator.mod,
    operator.neg: operator.neg, operator.eq: operator.eq, operator.ne: operator.ne, operator.lt: operator.lt,
    operator.le: operator.le, operator.gt: operator.gt, operator.ge: operator.ge,
    torch.sym_float: float, torch.sym_int: int, torch.sym_max: max, torch.sym_min: min, math.ceil: math.ceil,
    math.floor: math.floor,
}
