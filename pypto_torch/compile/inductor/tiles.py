"""Inductor's loop bodies as PTO instructions over whole tiles.

Inductor describes each node as a loop body: per element of an iteration space, loads
at sympy indices, arithmetic through ``V.ops`` and a store (or a reduction over the
trailing dimensions). Its calls are recorded (trace.py) and replayed here once, at
concrete sizes, over the whole space: a value is a View spanning the iteration shape, a load whose index is affine in the loop
variables is a strided view of its buffer (no instruction), any other index is computed
as an int64 tile and gathered, and each operation is the recipe of the aten op it names
(csrc/recipes, through ``Lowerer.recipe``), so Inductor's programs run the instructions
eager pto runs. No PTO instruction is named here.
"""
from __future__ import annotations

import functools
import math

import sympy
import torch
from torch._inductor.ops_handler import DefaultHandler
from torch._inductor.utils import sympy_index_symbol
from torch.utils._sympy.functions import FloorDiv, Identity, ModularIndexing

from pypto_torch.compile.lowering import Lowerer
from pypto_torch.compile.program_builder import Storage, Unsupported, View, contiguous_strides

aten = torch.ops.aten

# Inductor's pointwise ops -> the aten op whose recipe computes them.
POINTWISE = {
    "add": "aten::add.Tensor", "sub": "aten::sub.Tensor", "mul": "aten::mul.Tensor",
    "truediv": "aten::div.Tensor", "div": "aten::div.Tensor", "floordiv": "aten::floor_divide",
    "remainder": "aten::remainder.Tensor", "mod": "aten::fmod.Tensor", "maximum": "aten::maximum",
    "minimum": "aten::minimum", "pow": "aten::pow.Tensor_Tensor", "atan2": "aten::atan2",
    "neg": "aten::neg", "abs": "aten::abs", "exp": "aten::exp", "exp2": "aten::exp2", "expm1": "aten::expm1",
    "log": "aten::log", "log1p": "aten::log1p", "log2": "aten::log2", "sqrt": "aten::sqrt",
    "rsqrt": "aten::rsqrt", "sin": "aten::sin", "cos": "aten::cos", "tan": "aten::tan", "tanh": "aten::tanh",
    "sigmoid": "aten::sigmoid", "erf": "aten::erf", "erfc": "aten::erfc", "log10": "aten::log10",
    "asin": "aten::asin", "acos": "aten::acos", "atan": "aten::atan", "sinh": "aten::sinh", "cosh": "aten::cosh",
    "asinh": "aten::asinh", "acosh": "aten::acosh", "atanh": "aten::atanh", "lgamma": "aten::lgamma",
    "copysign": "aten::copysign.Tensor", "hypot": "aten::hypot", "floor": "aten::floor",
    "ceil": "aten::ceil", "trunc": "aten::trunc", "round": "aten::round", "sign": "aten::sign",
    "reciprocal": "aten::reciprocal", "relu": "aten::relu",
    "eq": "aten::eq.Tensor", "ne": "aten::ne.Tensor", "lt": "aten::lt.Tensor", "le": "aten::le.Tensor",
    "gt": "aten::gt.Tensor", "ge": "aten::ge.Tensor", "logical_and": "aten::logical_and",
    "logical_or": "aten::logical_or", "logical_not": "aten::logical_not", "bitwise_and": "aten::bitwise_and.Tensor",
    "bitwise_or": "aten::bitwise_or.Tensor", "bitwise_xor": "aten::bitwise_xor.Tensor",
    "bitwise_not": "aten::bitwise_not", "bitwise_left_shift": "aten::bitwise_left_shift.Tensor",
    "bitwise_right_shift": "aten::bitwise_right_shift.Tensor", "where": "aten::where.self",
    "and_": "aten::bitwise_and.Tensor", "or_": "aten::bitwise_or.Tensor", "xor": "aten::bitwise_xor.Tensor",
    "not_": "aten::logical_not",
}
# Their schemas' tensor argument names, in order.
_ARGUMENT_NAMES = {1: ("self",), 2: ("self", "other"), 3: ("condition", "self", "other")}

# Inductor's reductions -> the aten reduction whose recipe computes them over `dim`.
REDUCTIONS = {"sum": "aten::sum.dim_IntList", "prod": "aten::prod.dim_int", "max": "aten::amax",
              "min": "aten::amin", "argmax": "aten::argmax", "argmin": "aten::argmin", "any": "aten::any.dims"}


@functools.cache
def _result_dtype(op: str, dtypes: tuple) -> torch.dtype:
    """What the aten op returns for operands of these dtypes (0-d, on the meta device)."""
    packet, _, overload = op.removeprefix("aten::").partition(".")
    overload_op = getattr(getattr(aten, packet), overload or "default")
    return overload_op(*(torch.empty((), dtype=d, device="meta") for d in dtypes)).dtype


class BufferSet:
    """The storages of one program, by Inductor buffer name: each buffer's dtype and the
    elements its storage holds (at the sizes of this build)."""

    def __init__(self, device: torch.device, layouts: dict):
        self.device = device
        self.layouts = layouts  # name -> (dtype, numel)
        self.storages: dict[str, Storage] = {}

    def storage(self, name: str) -> Storage:
        if name not in self.storages:
            self.storages[name] = Storage(self.dtype(name), self.device)
        return self.storages[name]

    def dtype(self, name: str) -> torch.dtype:
        return self.layouts[name][0]

    def numel(self, name: str) -> int:
        return self.layouts[name][1]


class TileOps(DefaultHandler):
    """The ops handler one node's loop body runs under: `shape` is its iteration space
    (pointwise dims, then reduction dims), `variables` the symbols standing for them."""

    def __init__(self, lowerer: Lowerer, buffers: BufferSet, shape: tuple, variables: list, reduced: int,
                 stores: list | None = None):
        self.lw = lowerer
        self.stores = stores  # where the program's store copies are (launch.forward_stores)
        self.buffers = buffers
        self.shape = shape
        self.variables = variables
        self.reduced = reduced           # how many trailing dims are reduced
        self.indirect: dict[sympy.Symbol, View] = {}
        self.masking = 0                 # inside ops.masked: loads may point out of bounds

    # -- values ----------------------------------------------------------------------------
    def _new(self, dtype: torch.dtype, shape=None) -> View:
        return self.lw.new(dtype, self.shape if shape is None else shape)

    def _recipe(self, op: str, arguments: list, dtype: torch.dtype, shape=None) -> View:
        out = self._new(dtype, shape)
        self.lw.recipe(op, arguments, [out])
        return out

    def _operand(self, value, dtype: torch.dtype | None = None) -> View:
        if isinstance(value, View):
            return value
        if isinstance(value, bool):
            return self.lw.scalar(value, torch.bool)
        return self.lw.scalar(value, dtype or (torch.int64 if isinstance(value, int) else torch.float32))

    def _default(self, name: str, args: tuple, kwargs: dict):
        tensors = [a for a in args if isinstance(a, View)]
        reference = tensors[0].dtype if tensors else None
        operands = [self._operand(a, reference) for a in args]
        if name not in POINTWISE or kwargs:
            if kwargs or not hasattr(self.lw, "torch_op"):
                raise Unsupported(f"Inductor's ops.{name}")
            return self.lw.torch_op(name, operands)  # the eager form (eager.py)
        op = POINTWISE[name]
        shape = torch.broadcast_shapes(*(v.shape for v in operands))
        dtype = _result_dtype(op, tuple(v.dtype for v in operands))
        arguments = list(zip(_ARGUMENT_NAMES[len(operands)], operands))
        if len(operands) == 2:  # what a comparison computes in, as the lowering tells it
            arguments.append(("common_dtype", torch.promote_types(operands[0].dtype, operands[1].dtype)))
        return self._recipe(op, arguments, dtype, shape)

    def identity(self, x):
        return x

    def fma(self, x, y, z):
        # A product and a sum, each rounded: PTO has no fused multiply-add instruction.
        return self._default("add", (self._default("mul", (x, y), {}), z), {})

    def isnan(self, x):
        return self._default("ne", (x, x), {})

    def square(self, x):
        return self._default("mul", (x, x), {})

    def constant(self, value, dtype: torch.dtype):
        return self.lw.scalar(value, dtype)

    def to_dtype(self, x, dtype: torch.dtype, src_dtype=None, use_compute_types=True):
        x = self._operand(x, dtype)
        if x.dtype == dtype:
            return x
        return self._recipe("aten::_to_copy", [("self", x), ("dtype", dtype)], dtype, x.shape)

    def masked(self, mask, body, other):
        self.masking += 1
        try:
            value = body()
        finally:
            self.masking -= 1
        return self._default("where", (mask, value, self._operand(other, value.dtype)), {})

    # -- indices ---------------------------------------------------------------------------
    def indirect_indexing(self, x, size, check=True, wrap_neg=True, symbol: str | None = None):
        x = self.to_dtype(x, torch.int64)
        if wrap_neg:
            extent = self.lw.scalar(int(size), torch.int64)
            negative = self._default("lt", (x, 0), {})
            x = self._default("where", (negative, self._default("add", (x, extent), {}), x), {})
        name = sympy_index_symbol(symbol or f"indirect{len(self.indirect)}")
        self.indirect[name] = x
        return name

    def check_bounds(self, expr, size, lower, upper):
        return None

    def _strides(self, index: sympy.Expr):
        """(strides, offset) of an index affine in the loop variables, else None."""
        index = sympy.expand(_unwrapped(index))
        strides = []
        rest = index
        for variable in self.variables:
            coefficient = index.coeff(variable)
            if not coefficient.is_Integer or coefficient < 0:
                return None
            strides.append(int(coefficient))
            rest = rest - coefficient * variable
        if rest.free_symbols or not rest.is_Integer:
            return None
        return tuple(strides), int(rest)

    def _index_tile(self, expr) -> View:
        """An int64 tile holding `expr` at every point of the iteration space."""
        if isinstance(expr, (int, sympy.Integer)):
            return self.lw.scalar(int(expr), torch.int64)
        if expr in self.indirect:
            return self.indirect[expr]
        if expr in self.variables:
            d = self.variables.index(expr)
            line = self._recipe("aten::arange.start_step", [("start", 0), ("end", self.shape[d]), ("step", 1)],
                                torch.int64, (self.shape[d],))
            strides = tuple(1 if k == d else 0 for k in range(len(self.shape)))
            return View(line.storage, self.shape, strides)
        parts = [self._index_tile(a) for a in expr.args]
        if isinstance(expr, sympy.Add):
            return functools.reduce(lambda a, b: self._default("add", (a, b), {}), parts)
        if isinstance(expr, sympy.Mul):
            return functools.reduce(lambda a, b: self._default("mul", (a, b), {}), parts)
        if isinstance(expr, FloorDiv):
            return self._default("floordiv", tuple(parts), {})
        if isinstance(expr, ModularIndexing):
            return self._default("remainder", (self._default("floordiv", tuple(parts[:2]), {}), parts[2]), {})
        if isinstance(expr, sympy.Min):
            return functools.reduce(lambda a, b: self._default("minimum", (a, b), {}), parts)
        if isinstance(expr, sympy.Max):
            return functools.reduce(lambda a, b: self._default("maximum", (a, b), {}), parts)
        if isinstance(expr, Identity):
            return parts[0]
        raise Unsupported(f"an index of the form {type(expr).__name__}: {expr}")

    def index_expr(self, expr, dtype: torch.dtype):
        return self.to_dtype(self._index_tile(expr), dtype)

    # -- memory ----------------------------------------------------------------------------
    def _view(self, name: str, index: sympy.Expr, shape: tuple) -> View | None:
        layout = self._strides(index)
        if layout is None:
            return None
        strides, offset = layout
        view = View(self.buffers.storage(name), shape, strides[:len(shape)], offset)
        if offset < 0 or view.extent() > self.buffers.numel(name):
            return None
        return view

    def _flat(self, name: str) -> View:
        return View(self.buffers.storage(name), (self.buffers.numel(name),), (1,))

    def _flat_index(self, index: sympy.Expr, numel: int) -> View:
        positions = self.lw.contiguous(self._broadcast(self._index_tile(index)))
        if self.masking:  # a masked-off position may point anywhere: keep it inside the buffer
            positions = self._recipe("aten::clamp", [("self", positions), ("min", 0), ("max", numel - 1)],
                                     torch.int64)
        return View(positions.storage, (math.prod(self.shape),), (1,))

    def _broadcast(self, view: View) -> View:
        """`view` spread over the iteration space, as torch broadcasts (no instruction)."""
        if view.shape == self.shape:
            return view
        pad = len(self.shape) - view.rank
        strides = (0,) * pad + tuple(0 if n == 1 and m != 1 else s
                                     for n, s, m in zip(view.shape, view.strides, self.shape[pad:]))
        return View(view.storage, self.shape, strides, view.offset)

    def load(self, name: str, index: sympy.Expr):
        view = None if self.masking else self._view(name, index, self.shape)
        if view is not None:
            return view
        numel = self.buffers.numel(name)
        flat = self._flat(name)
        picked = self._recipe("aten::gather", [("self", flat), ("dim", 0), ("index", self._flat_index(index, numel))],
                              flat.dtype, (math.prod(self.shape),))
        return View(picked.storage, self.shape, contiguous_strides(self.shape))

    def store(self, name: str, index: sympy.Expr, value, mode=None):
        value = self.to_dtype(value, self.buffers.dtype(name))
        if mode == "atomic_add":  # an accumulation where the index repeats: scatter_add
            flat = self._flat(name)
            values = self.lw.contiguous(self._broadcast(value))
            sources = View(values.storage, (math.prod(self.shape),), (1,))
            self.lw.recipe("aten::scatter_add", [("self", flat), ("dim", 0), ("index",
                           self._flat_index(index, flat.shape[0])), ("src", sources)], [flat])
            return
        if mode is not None:
            raise Unsupported(f"a store of mode {mode}")
        self._write(name, index, value, self.shape)

    def store_reduction(self, name: str, index: sympy.Expr, value):
        self._write(name, index, value, self.shape[:len(self.shape) - self.reduced] + (1,) * self.reduced)

    def _write(self, name: str, index: sympy.Expr, value: View, shape: tuple):
        out = self._view(name, index, shape)
        if out is None:
            raise Unsupported(f"a store to {name} at {index}")
        first = len(self.lw.segment.instructions) if self.stores is not None else 0
        self.lw.recipe("aten::copy_", [("self", out), ("src", value)], [out])
        if self.stores is not None and len(self.lw.segment.instructions) == first + 1:
            self.stores.append(first)

    # -- reductions ------------------------------------------------------------------------
    def reduction(self, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: str, value):
        dims = list(range(len(self.shape) - self.reduced, len(self.shape)))
        kept = self.shape[:len(self.shape) - self.reduced] + (1,) * self.reduced
        value = self._broadcast(self._operand(value, src_dtype))
        if reduction_type == "welford_reduce":
            count = math.prod(self.shape[d] for d in dims)
            mean = self._recipe("aten::mean.dim", [("self", value), ("dim", dims), ("keepdim", True)], dtype, kept)
            centred = self._default("sub", (value, self._broadcast(mean)), {})
            square = self._default("mul", (centred, centred), {})
            m2 = self._recipe("aten::sum.dim_IntList", [("self", square), ("dim", dims), ("keepdim", True)], dtype, kept)
            return mean, m2, self.lw.scalar(float(count), dtype)
        if reduction_type not in REDUCTIONS:
            raise Unsupported(f"a {reduction_type} reduction")
        result_dtype = torch.int64 if reduction_type in ("argmax", "argmin") else dtype
        return self._recipe(REDUCTIONS[reduction_type], [("self", value), ("dim", dims), ("keepdim", True)],
                            result_dtype, kept)


def _unwrapped(index: sympy.Expr) -> sympy.Expr:
    """The index without Identity, which Inductor wraps around terms it must not reorder."""
    return index.replace(Identity, lambda inner: inner)
