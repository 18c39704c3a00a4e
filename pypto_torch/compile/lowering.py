"""The lowering table: each aten op the pto compiler handles, as PTO instructions.

A lowering receives a ``Lowerer`` and the node's arguments, with tensors as
``View``s and symbolic sizes already concrete, and returns the node's value
(views; a tuple of them for ops with several outputs). It raises ``Unsupported``
when the case at hand has no PTO form: that node then runs as an eager torch call
between programs. Views, reshapes, transposes and broadcasts emit nothing: they
are strides over the same buffer, as in the ISA.
"""
from __future__ import annotations

import math
import operator

import torch

from pypto_torch import _C
from pypto_torch.compile.program_builder import PTO_DTYPE_NAMES, Storage, Unsupported, View, contiguous_strides

aten = torch.ops.aten

ACCEPTED_DTYPES = {row["mnemonic"]: set(row["dtypes"]) for row in _C._isa_table()}


def accepts(mnemonic: str, dtype: torch.dtype) -> bool:
    return PTO_DTYPE_NAMES.get(dtype) in ACCEPTED_DTYPES[mnemonic]


class Lowerer:
    """What a lowering works with: the segment being built and the node's meta result."""

    def __init__(self, segment, device: torch.device):
        self.segment = segment
        self.device = device
        self.meta = None  # the node's result on the meta device: concrete shapes and dtypes

    # -- new buffers and instructions ------------------------------------------------
    def new(self, dtype: torch.dtype, shape) -> View:
        shape = tuple(int(n) for n in shape)
        return View(Storage(dtype, self.device), shape, contiguous_strides(shape))

    def new_result(self) -> View:
        """A new buffer with the node's result dtype, shape and strides."""
        return self.like_meta(self.meta)

    def like_meta(self, meta: torch.Tensor) -> View:
        """A new buffer with the layout aten gives the result (strides included): the
        graph's later views were traced on those strides (an elementwise op on a
        transposed tensor is transposed too, and a view of it may be no view otherwise)."""
        shape, strides = tuple(meta.shape), tuple(meta.stride())
        if any(s < 0 for s in strides):
            raise Unsupported("negative result strides")
        return View(Storage(meta.dtype, self.device), shape, strides)

    def emit(self, mnemonic: str, out: View, *inputs: View, **immediates) -> View:
        checked = () if mnemonic == "tcvt" else inputs or (out,)  # fills: the output's dtype
        for view in checked:
            if not accepts(mnemonic, view.dtype):
                raise Unsupported(f"{mnemonic} does not take {view.dtype}")
        return self.segment.emit(mnemonic, out, *inputs, **immediates)

    def scalar(self, value, dtype: torch.dtype) -> View:
        """A one-element buffer holding `value`, filled once at the program's start."""
        key = (repr(value), dtype)
        if key not in self.segment.constant_views:
            view = View(Storage(dtype, self.device), (), ())
            self.segment.emit("texpands", view, constant=True, value=value)
            self.segment.constant_views[key] = view
        return self.segment.constant_views[key]

    # -- conversions of operands --------------------------------------------------------
    def cast(self, view: View, dtype: torch.dtype) -> View:
        if view.dtype == dtype:
            return view
        out = self.new(dtype, view.shape)
        return self.emit("tcvt", out, view)

    def contiguous(self, view: View) -> View:
        if view.is_contiguous():
            return view
        return self.emit("tmov", self.new(view.dtype, view.shape), view)

    def operand(self, value, dtype: torch.dtype, shape) -> View:
        """A tensor or Python scalar as an input of `dtype` broadcast to `shape`."""
        view = value if isinstance(value, View) else self.scalar(value, dtype)
        return expand(self.cast(view, dtype), shape)


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


def register(*ops):
    def decorate(fn):
        for op in ops:
            LOWERINGS[op] = fn
        return fn
    return decorate


def _promoted(*args) -> torch.dtype:
    metas = [torch.empty((), dtype=a.dtype, device="meta").expand(a.shape) if isinstance(a, View) else a for a in args]
    return torch.result_type(*metas) if len(metas) > 1 else metas[0].dtype


def _elementwise(mnemonic: str, compute_from_output: bool = True):
    def lower(lw: Lowerer, *args):
        dtype = lw.meta.dtype if compute_from_output else _promoted(*args)
        return lw.emit(mnemonic, lw.new_result(), *(lw.operand(a, dtype, lw.meta.shape) for a in args))
    return lower


# -- elementwise ops: the aten -> PTO table ------------------------------------------------
# The eager kernels register the same rows (csrc/torch/aten/aten_instructions.def):
# each row is an aten op, the instruction it runs as, its promotion and its form.
ATEN_INSTRUCTIONS = _C._aten_instructions()
_MNEMONICS = {(row["op"], row["argument"], row["value"]): row["mnemonic"] for row in ATEN_INSTRUCTIONS}


def instruction(op: str, **variant) -> str:
    """The mnemonic aten `op` runs as, eager and compiled; `variant` names a variant row
    by its argument's value: instruction("gelu", approximate="tanh")."""
    argument, value = next(iter(variant.items()), ("", ""))
    return _MNEMONICS[(op, argument, value)]


# The overloads each form lowers as its row's one instruction (a .Scalar overload is its
# .Tensor one with a wrapped number, as aten computes it). Rows of the other forms
# (BinaryAlpha, Custom) have lowerings of their own, below.
_LOWERED_OVERLOADS = {
    "Unary": ("default",), "UnaryNoOut": ("default",), "Binary": ("Tensor", "Scalar"),
    "BinaryTensorOut": ("Tensor", "Scalar"), "BinaryDefault": ("default",), "Compare": ("Tensor", "Scalar"),
    "Gradient": ("default",),
}
for _row in ATEN_INSTRUCTIONS:
    _packet = getattr(aten, _row["op"])
    for _overload in _LOWERED_OVERLOADS.get(_row["form"], ()):
        if _overload in _packet.overloads():
            LOWERINGS[getattr(_packet, _overload)] = _elementwise(
                _row["mnemonic"], compute_from_output=_row["promotion"] != "compare")


@register(aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar)
def _add_sub(lw: Lowerer, a, b, alpha=1):
    mnemonic = instruction("add") if lw.op in (aten.add.Tensor, aten.add.Scalar) else instruction("sub")
    if lw.meta.dtype == torch.bool:
        raise Unsupported("boolean add")
    dtype = lw.meta.dtype
    return lw.emit(mnemonic, lw.new_result(), lw.operand(a, dtype, lw.meta.shape), lw.operand(b, dtype, lw.meta.shape),
                   alpha=alpha)


@register(aten.rsub.Tensor, aten.rsub.Scalar)
def _rsub(lw: Lowerer, a, b, alpha=1):
    dtype = lw.meta.dtype
    return lw.emit(instruction("sub"), lw.new_result(), lw.operand(b, dtype, lw.meta.shape),
                   lw.operand(a, dtype, lw.meta.shape), alpha=alpha)


@register(aten.div.Tensor_mode)
def _div_mode(lw: Lowerer, a, b, rounding_mode=None):
    mnemonic = instruction("div", rounding_mode=rounding_mode) if rounding_mode else instruction("div")
    return _elementwise(mnemonic)(lw, a, b)


LOWERINGS[aten.pow.Tensor_Tensor] = _elementwise(instruction("pow"))


@register(aten.pow.Tensor_Scalar)
def _pow_scalar(lw: Lowerer, a, exponent):
    dtype, shape = lw.meta.dtype, lw.meta.shape
    x = lw.operand(a, dtype, shape)
    if exponent == 2:
        return lw.emit(instruction("mul"), lw.new_result(), x, x)
    if exponent == 3:  # gelu's tanh form (GPT-2) cubes: two products, not a pow
        square = lw.emit(instruction("mul"), lw.new(dtype, shape), x, x)
        return lw.emit(instruction("mul"), lw.new_result(), square, x)
    if exponent == 1:
        return lw.emit("tmov", lw.new_result(), x)
    if exponent == 0.5:
        return lw.emit(instruction("sqrt"), lw.new_result(), x)
    if exponent == -1:
        return lw.emit(instruction("reciprocal"), lw.new_result(), x)
    return lw.emit(instruction("pow"), lw.new_result(), x, lw.operand(exponent, dtype, shape))


# The logical ops are the bitwise ones on truth values: their bool result casts the
# operands to bool first, as the eager composites compute them.
LOWERINGS[aten.logical_and.default] = _elementwise(instruction("bitwise_and"))
LOWERINGS[aten.logical_or.default] = _elementwise(instruction("bitwise_or"))


@register(aten.logical_not.default)
def _logical_not(lw: Lowerer, a):
    zero = lw.operand(0, a.dtype, a.shape)
    return lw.emit(instruction("eq"), lw.new_result(), a, zero)


@register(aten.where.self, aten.where.ScalarOther, aten.where.ScalarSelf, aten.where.Scalar)
def _where(lw: Lowerer, condition, a, b):
    dtype, shape = lw.meta.dtype, lw.meta.shape
    return lw.emit(instruction("where"), lw.new_result(), lw.operand(condition, torch.bool, shape),
                   lw.operand(a, dtype, shape), lw.operand(b, dtype, shape))


@register(aten.clamp.default, aten.clamp.Tensor)
def _clamp(lw: Lowerer, x, low=None, high=None):
    dtype, shape = lw.meta.dtype, lw.meta.shape
    out = lw.operand(x, dtype, shape)
    if low is not None:
        out = lw.emit(instruction("maximum"), lw.new_result() if high is None else lw.new(dtype, shape), out,
                      lw.operand(low, dtype, shape))
    if high is not None:
        out = lw.emit(instruction("minimum"), lw.new_result(), out, lw.operand(high, dtype, shape))
    return out if (low is not None or high is not None) else lw.emit("tmov", lw.new_result(), out)


@register(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _masked_fill(lw: Lowerer, x, mask, value):
    dtype, shape = lw.meta.dtype, lw.meta.shape
    return lw.emit(instruction("where"), lw.new_result(), lw.operand(mask, torch.bool, shape),
                   lw.operand(value, dtype, shape), lw.operand(x, dtype, shape))


@register(aten.gelu.default)
def _gelu(lw: Lowerer, x, approximate="none"):
    mnemonic = instruction("gelu", approximate="tanh") if approximate == "tanh" else instruction("gelu")
    return lw.emit(mnemonic, lw.new_result(), x)


@register(aten.gelu_backward.default)
def _gelu_backward(lw: Lowerer, grad, x, approximate="none"):
    tanh = approximate == "tanh"
    mnemonic = instruction("gelu_backward", approximate="tanh") if tanh else instruction("gelu_backward")
    return lw.emit(mnemonic, lw.new_result(), expand(grad, x.shape), x)


@register(aten.threshold_backward.default)
def _threshold_backward(lw: Lowerer, grad, x, threshold):
    """grad where x > threshold, else 0: the threshold is the instruction's immediate."""
    shape = lw.meta.shape
    return lw.emit(instruction("threshold_backward"), lw.new_result(), expand(grad, shape), expand(x, shape),
                   threshold=threshold)


# -- moves, copies, fills ------------------------------------------------------------------
@register(aten.clone.default)
def _clone(lw: Lowerer, x, memory_format=None):
    return lw.emit("tmov", lw.new_result(), x)


@register(aten._to_copy.default)
def _to_copy(lw: Lowerer, x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None):
    if device is not None and torch.device(device).type != lw.device.type:
        raise Unsupported(f"a copy to {device}")
    out = lw.new_result()
    return lw.emit("tcvt" if out.dtype != x.dtype else "tmov", out, x)


@register(aten.copy.default)
def _copy(lw: Lowerer, destination, source, non_blocking=False):
    out = lw.new_result()
    return lw.emit("tcvt" if out.dtype != source.dtype else "tmov", out, lw.operand(source, source.dtype, out.shape))


@register(aten.copy_.default)
def _copy_in_place(lw: Lowerer, destination, source, non_blocking=False):
    lw.emit("tcvt" if destination.dtype != source.dtype else "tmov", destination,
            lw.operand(source, source.dtype, destination.shape))
    return destination


@register(aten.full.default, aten.scalar_tensor.default, aten.zeros.default, aten.ones.default,
          aten.empty.memory_format, aten.new_zeros.default, aten.new_ones.default, aten.new_full.default,
          aten.full_like.default, aten.zeros_like.default, aten.ones_like.default, aten.empty_like.default,
          aten.new_empty.default, aten.empty_strided.default)
def _fill(lw: Lowerer, *args, **kwargs):
    value = {aten.zeros.default: 0, aten.new_zeros.default: 0, aten.zeros_like.default: 0, aten.ones.default: 1,
             aten.new_ones.default: 1, aten.ones_like.default: 1}.get(lw.op)
    if value is None:
        if lw.op in (aten.full.default, aten.full_like.default, aten.new_full.default):
            value = args[1] if len(args) > 1 else kwargs["fill_value"]
        elif lw.op == aten.scalar_tensor.default:
            value = args[0]
        else:
            value = 0  # empty: any contents will do
    return lw.emit("texpands", lw.new_result(), value=value)


@register(aten.arange.start_step, aten.arange.default, aten.arange.start)
def _arange(lw: Lowerer, *args, **kwargs):
    numbers = [a for a in args if isinstance(a, (int, float))]
    start, step = (0, 1) if lw.op == aten.arange.default else (numbers[0], numbers[2] if len(numbers) > 2 else 1)
    return lw.emit("tiota", lw.new_result(), start=start, step=step)


# -- views ------------------------------------------------------------------------------------
@register(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def _view(lw: Lowerer, x, shape):
    return reshape(lw, x, shape)


LOWERINGS.update({
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
    aten.lift_fresh_copy.default: lambda lw, x: lw.emit("tmov", lw.new_result(), x),
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


@register(aten.cat.default)
def _cat(lw: Lowerer, tensors, dim=0):
    out = lw.new_result()
    dim = dim % out.rank
    at = 0
    for part in tensors:
        if part.numel() == 0 and part.rank == 1:
            continue
        lw.emit("tmov" if part.dtype == out.dtype else "tcvt", slice_view(out, dim, at, at + part.shape[dim]), part)
        at += part.shape[dim]
    return out


# -- reductions ----------------------------------------------------------------------------
def _reduce_dims(view: View, dims) -> list:
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(view.rank))
    dims = [dims] if isinstance(dims, int) else dims
    return sorted({d % max(view.rank, 1) for d in dims})


def reduce(lw: Lowerer, mnemonic: str, x: View, dims, keepdim: bool, dtype: torch.dtype, **immediates):
    """A reduction over `dims`: its output is a buffer of the kept shape, viewed at x's
    shape with stride 0 along the reduced dimensions (the ISA's rule)."""
    dims = _reduce_dims(x, dims)
    kept = tuple(1 if d in dims else n for d, n in enumerate(x.shape))
    out = lw.new(dtype, kept)
    wide = View(out.storage, x.shape, tuple(0 if d in dims else s for d, s in enumerate(out.strides)))
    lw.emit(mnemonic, wide, lw.cast(x, dtype) if mnemonic not in ("targmax", "targmin") else x, **immediates)
    return out if keepdim else squeeze(out, dims)


@register(aten.sum.dim_IntList, aten.sum.default)
def _sum(lw: Lowerer, x, dims=None, keepdim=False, dtype=None):
    return reduce(lw, "tsum", x, dims, keepdim, lw.meta.dtype, scale=1)


@register(aten.mean.dim, aten.mean.default)
def _mean(lw: Lowerer, x, dims=None, keepdim=False, dtype=None):
    count = math.prod(x.shape[d] for d in _reduce_dims(x, dims))
    return reduce(lw, "tsum", x, dims, keepdim, lw.meta.dtype, scale=1.0 / max(count, 1))


@register(aten.amax.default, aten.amin.default)
def _amax(lw: Lowerer, x, dims=(), keepdim=False):
    return reduce(lw, "tamax" if lw.op == aten.amax.default else "tamin", x, dims, keepdim, x.dtype)


@register(aten.any.dim, aten.any.dims, aten.any.default, aten.all.dim, aten.all.dims, aten.all.default)
def _any_all(lw: Lowerer, x, dims=None, keepdim=False):
    mnemonic = "tany" if lw.op in (aten.any.dim, aten.any.dims, aten.any.default) else "tall"
    return reduce(lw, mnemonic, lw.cast(x, torch.bool), dims, keepdim, torch.bool)


@register(aten.max.dim, aten.min.dim)
def _max_dim(lw: Lowerer, x, dim, keepdim=False):
    largest = lw.op == aten.max.dim
    values = reduce(lw, "tamax" if largest else "tamin", x, dim, keepdim, x.dtype)
    indices = reduce(lw, "targmax" if largest else "targmin", x, dim, keepdim, torch.int64)
    return values, indices


@register(aten.argmax.default, aten.argmin.default)
def _argmax(lw: Lowerer, x, dim=None, keepdim=False):
    if dim is None:
        x = reshape(lw, x, (x.numel(),))
        dim = 0
    return reduce(lw, "targmax" if lw.op == aten.argmax.default else "targmin", x, dim, keepdim, torch.int64)


@register(aten.var_mean.correction, aten.var.correction)
def _var_mean(lw: Lowerer, x, dims=None, correction=None, keepdim=False):
    dims = _reduce_dims(x, dims)
    count = math.prod(x.shape[d] for d in dims)
    correction = 1 if correction is None else correction
    mean = reduce(lw, "tsum", x, dims, True, x.dtype, scale=1.0 / max(count, 1))
    centred = lw.emit(instruction("sub"), lw.new(x.dtype, x.shape), x, expand(mean, x.shape), alpha=1)
    square = lw.emit(instruction("mul"), lw.new(x.dtype, x.shape), centred, centred)
    var = reduce(lw, "tsum", square, dims, keepdim, x.dtype, scale=1.0 / max(count - correction, 0) if count > correction else math.inf)
    if lw.op == aten.var.correction:
        return var
    return var, (mean if keepdim else squeeze(mean, dims))


# -- row ops ----------------------------------------------------------------------------------
def _last_dim(view: View, dim: int) -> View:
    """The view with `dim` moved last (row ops work along the last dimension)."""
    dim = dim % view.rank
    return permute(view, [d for d in range(view.rank) if d != dim] + [dim])


def _row_op(mnemonic: str):
    def lower(lw: Lowerer, x, dim, half_to_float=False, *rest):
        if x.rank == 0:
            raise Unsupported("a row op on a scalar")
        out = lw.new_result()
        lw.emit(mnemonic, _last_dim(out, dim), lw.cast(_last_dim(x, dim), out.dtype))
        return out
    return lower


LOWERINGS[aten._softmax.default] = _row_op("tsoftmax")
LOWERINGS[aten._log_softmax.default] = _row_op("tlogsoftmax")


def _row_grad(mnemonic: str):
    def lower(lw: Lowerer, grad, output, dim, input_dtype):
        out = lw.new_result()
        lw.emit(mnemonic, _last_dim(out, dim), lw.cast(_last_dim(grad, dim), out.dtype),
                lw.cast(_last_dim(output, dim), out.dtype))
        return out
    return lower


LOWERINGS[aten._softmax_backward_data.default] = _row_grad("tsoftmaxgrad")
LOWERINGS[aten._log_softmax_backward_data.default] = _row_grad("tlogsoftmaxgrad")


def _fused_layer_norm(lw: Lowerer, x, normalized_shape, weight, bias, eps):
    """One tlayernorm over the last dimension; the statistics the backward reads come
    from a tsum and a trowrstd, which dead code elimination drops when nothing reads
    them. None where it does not apply: several normalised dimensions, or a weight or
    bias of another dtype than x's (aten computes those in float32)."""
    if len(normalized_shape) != 1 or x.rank == 0 or math.prod(x.shape) == 0 or not accepts("tlayernorm", x.dtype):
        return None
    if any(p is not None and p.dtype != x.dtype for p in (weight, bias)):
        return None
    count = x.shape[-1]
    scale = lw.operand(1.0 if weight is None else weight, x.dtype, x.shape)
    shift = lw.operand(0.0 if bias is None else bias, x.dtype, x.shape)
    out = lw.emit("tlayernorm", lw.new(x.dtype, x.shape), x, scale, shift, eps=eps)
    mean = reduce(lw, "tsum", x, [x.rank - 1], True, x.dtype, scale=1.0 / count)
    rstd = lw.new(x.dtype, mean.shape)
    lw.emit("trowrstd", expand(rstd, x.shape), x, eps=eps)
    return out, mean, rstd


@register(aten.native_layer_norm.default)
def _layer_norm(lw: Lowerer, x, normalized_shape, weight, bias, eps):
    """One tlayernorm where it applies; else mean, centre, variance, rstd, scale and
    shift: one row kernel after fusion."""
    fused = _fused_layer_norm(lw, x, normalized_shape, weight, bias, eps)
    if fused is not None:
        return fused
    dims = list(range(x.rank - len(normalized_shape), x.rank))
    compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    xc = lw.cast(x, compute)
    count = math.prod(normalized_shape)
    mean = reduce(lw, "tsum", xc, dims, True, compute, scale=1.0 / max(count, 1))
    centred = lw.emit(instruction("sub"), lw.new(compute, x.shape), xc, expand(mean, x.shape), alpha=1)
    square = lw.emit(instruction("mul"), lw.new(compute, x.shape), centred, centred)
    var = reduce(lw, "tsum", square, dims, True, compute, scale=1.0 / max(count, 1))
    shifted = lw.emit(instruction("add"), lw.new(compute, var.shape), var, lw.operand(eps, compute, var.shape),
                      alpha=1)
    rstd = lw.emit(instruction("rsqrt"), lw.new(compute, var.shape), shifted)
    out = lw.emit(instruction("mul"), lw.new(compute, x.shape), centred, expand(rstd, x.shape))
    if weight is not None:
        out = lw.emit(instruction("mul"), lw.new(compute, x.shape), out, lw.operand(weight, compute, x.shape))
    if bias is not None:
        out = lw.emit(instruction("add"), lw.new(compute, x.shape), out, lw.operand(bias, compute, x.shape), alpha=1)
    return lw.cast(out, x.dtype), mean, rstd


@register(aten._fused_rms_norm.default)
def _rms_norm(lw: Lowerer, x, normalized_shape, weight=None, eps=None):
    """One trmsnorm for the output; the rstd beside it (read by nothing that
    patterns.rewrite_rms_norm makes) as mean(x * x) + eps, rsqrt."""
    if len(normalized_shape) != 1 or x.rank == 0 or not accepts("trmsnorm", x.dtype):
        raise Unsupported("rms_norm over several dims or of this dtype")
    eps = torch.finfo(x.dtype).eps if eps is None else eps
    scale = lw.operand(1.0 if weight is None else weight, x.dtype, x.shape)
    out = lw.emit("trmsnorm", lw.new(x.dtype, x.shape), x, scale, eps=eps)
    square = lw.emit(instruction("mul"), lw.new(x.dtype, x.shape), x, x)
    mean = reduce(lw, "tsum", square, [x.rank - 1], True, x.dtype, scale=1.0 / x.shape[-1])
    shifted = lw.emit(instruction("add"), lw.new(x.dtype, mean.shape), mean, lw.operand(eps, x.dtype, mean.shape),
                      alpha=1)
    return out, lw.emit(instruction("rsqrt"), lw.new(x.dtype, mean.shape), shifted)


# -- matrix products -------------------------------------------------------------------------
def matmul(lw: Lowerer, a: View, b: View, dtype: torch.dtype) -> View:
    shape = a.shape[:-1] + b.shape[-1:]
    out = lw.new(dtype, shape)
    return lw.emit("tmatmul", out, lw.cast(a, dtype), lw.cast(b, dtype), alpha=1, beta=0)


@register(aten.mm.default, aten.bmm.default)
def _mm(lw: Lowerer, a, b):
    return matmul(lw, a, b, lw.meta.dtype)


@register(aten.addmm.default, aten.baddbmm.default)
def _addmm(lw: Lowerer, bias, a, b, beta=1, alpha=1):
    """beta * bias + alpha * a @ b as aten computes it: the bias is moved into the output
    and the GEMM accumulates onto it (tmatmul's beta), so float16/bfloat16 results are
    rounded once, as eager's are. Fusion puts the move in the GEMM's tiles."""
    dtype = lw.meta.dtype
    shape = a.shape[:-1] + b.shape[-1:]
    out = lw.new(dtype, shape)
    if beta != 0:
        lw.emit("tmov", out, lw.operand(bias, dtype, shape))
    return lw.emit("tmatmul", out, lw.cast(a, dtype), lw.cast(b, dtype), alpha=alpha, beta=beta)


@register(aten._scaled_dot_product_flash_attention_for_cpu.default)
def _attention(lw: Lowerer, q, k, v, dropout_p=0.0, is_causal=False, attn_mask=None, scale=None):
    """Attention as one program: scores = scale * q @ k^T (masked), their row softmax,
    then @ v; it also returns the rows' logsumexp, which the backward reads."""
    if dropout_p != 0.0:
        raise Unsupported("attention with dropout")
    out_meta, lse_meta = lw.meta[0], lw.meta[1]
    compute = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    batch = q.shape[:-2]
    scores_shape = batch + (q.shape[-2], k.shape[-2])
    scores = lw.new(q.dtype, scores_shape)
    lw.emit("tmatmul", scores, q, expand(transpose(k, -1, -2), batch + (k.shape[-1], k.shape[-2])), alpha=scale, beta=0)
    scores = lw.cast(scores, compute)
    if is_causal:
        ones = lw.emit("texpands", lw.new(torch.bool, scores_shape[-2:]), value=1)
        keep = lw.emit("ttril", lw.new(torch.bool, scores_shape[-2:]), ones, diagonal=0)
        scores = lw.emit(instruction("where"), lw.new(compute, scores_shape), expand(keep, scores_shape), scores,
                         lw.operand(-math.inf, compute, scores_shape))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = lw.emit(instruction("where"), lw.new(compute, scores_shape), expand(attn_mask, scores_shape),
                             scores, lw.operand(-math.inf, compute, scores_shape))
        else:
            scores = lw.emit(instruction("add"), lw.new(compute, scores_shape), scores,
                             lw.operand(attn_mask, compute, scores_shape), alpha=1)
    weights = lw.emit("tsoftmax", lw.new(compute, scores_shape), scores)
    # The product goes straight into the result's layout (heads inside rows: the transpose
    # back to (batch, sequence, heads * head_dim) that follows is then a view).
    out = lw.like_meta(out_meta)
    lw.emit("tmatmul", out, lw.cast(weights, q.dtype), lw.cast(v, q.dtype), alpha=1, beta=0)
    # The rows' logsumexp (read by the backward only: dead code in inference) as max +
    # log(sum(exp(score - max))): a masked column's -inf takes no part (a score minus its
    # log-softmax would be -inf - -inf where a sliding window masks that column).
    row_max = reduce(lw, "tamax", scores, [-1], True, compute)
    shifted = lw.emit(instruction("sub"), lw.new(compute, scores_shape), scores, expand(row_max, scores_shape), alpha=1)
    total = reduce(lw, "tsum", lw.emit(instruction("exp"), lw.new(compute, scores_shape), shifted), [-1], True, compute,
                   scale=1)
    lse = lw.like_meta(lse_meta)
    log_total = lw.emit(instruction("log"), lw.new(compute, total.shape), total)
    lw.emit(instruction("add"), unsqueeze(lse, -1), log_total, row_max, alpha=1)
    return out, lse


@register(aten.embedding.default)
def _embedding(lw: Lowerer, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """Rows of the table: a tgather along dim 0 with the indices repeated over a row."""
    rows = reshape(lw, indices, (indices.numel(), 1))
    out = lw.new(weight.dtype, (indices.numel(), weight.shape[1]))
    lw.emit("tgather", out, weight, expand(lw.cast(rows, torch.int64), out.shape), axis=0, wrap=0)
    return reshape(lw, out, tuple(indices.shape) + (weight.shape[1],))


@register(aten.gather.default)
def _gather(lw: Lowerer, x, dim, index, sparse_grad=False):
    """torch.gather is tgather (cross entropy's pick of each target's score)."""
    if x.rank == 0:
        raise Unsupported("a gather from a scalar")
    return lw.emit("tgather", lw.new_result(), x, lw.cast(index, torch.int64), axis=dim % x.rank, wrap=0)


@register(aten.scatter.value, aten.scatter.src)
def _scatter(lw: Lowerer, x, dim, index, source):
    """x moved into the result, then the source's elements written where the index points
    (cross entropy's backward): tscatter's source has the index's shape."""
    if x.rank == 0:
        raise Unsupported("a scatter into a scalar")
    out = lw.emit("tmov", lw.new_result(), x)
    if isinstance(source, View):
        source = View(source.storage, index.shape, source.strides[:index.rank], source.offset)
    lw.emit("tscatter", out, lw.operand(source, out.dtype, index.shape), lw.cast(index, torch.int64),
            axis=dim % x.rank, wrap=0)
    return out


@register(aten.slice_scatter.default)
def _slice_scatter(lw: Lowerer, x, source, dim=0, start=None, end=None, step=1):
    """x moved into the result, then the source into its slice (the backward of a slice:
    rotary embeddings' halves)."""
    out = lw.emit("tmov", lw.new_result(), x)
    lw.emit("tmov" if source.dtype == out.dtype else "tcvt", slice_view(out, dim, start, end, step), source)
    return out


@register(aten.constant_pad_nd.default)
def _constant_pad(lw: Lowerer, x, pad, value=0):
    """The fill, then x into the middle (the causal-LM loss pads its shifted labels)."""
    if any(n < 0 for n in pad):
        raise Unsupported("a pad that crops")
    out = lw.emit("texpands", lw.new_result(), value=value)
    middle = out
    for i, before in enumerate(pad[::2]):
        dim = out.rank - 1 - i
        middle = slice_view(middle, dim, before, before + x.shape[dim])
    lw.emit("tmov" if x.dtype == out.dtype else "tcvt", middle, x)
    return out


# Python arithmetic on sizes, which symbolic shapes leave in the graph.
SIZE_OPS = {
    operator.add: operator.add, operator.sub: operator.sub, operator.mul: operator.mul,
    operator.floordiv: operator.floordiv, operator.truediv: operator.truediv, operator.mod: operator.mod,
    operator.neg: operator.neg, operator.eq: operator.eq, operator.ne: operator.ne, operator.lt: operator.lt,
    operator.le: operator.le, operator.gt: operator.gt, operator.ge: operator.ge,
    torch.sym_float: float, torch.sym_int: int, torch.sym_max: max, torch.sym_min: min, math.ceil: math.ceil,
    math.floor: math.floor,
}
