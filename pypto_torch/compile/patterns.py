"""Rewrites of an aten graph before it is lowered: a composite that a model writes out
op by op becomes the one aten op that PTO has an instruction for. The instruction makes
one pass over its tile where the chain makes one per op, each through a tile-sized
temporary (after a GEMM, that temporary is a band of the GEMM's output rows).
"""
from __future__ import annotations

import math
import operator

import torch

aten = torch.ops.aten

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _same_float32(value, expected: float) -> bool:
    """Whether a literal of the graph is `expected` as float32 holds it (the constant the
    instruction's kernel computes with)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return torch.tensor(value, dtype=torch.float32).item() == torch.tensor(expected, dtype=torch.float32).item()


def _scaled(node, factor: float):
    """The tensor that `node` multiplies by the literal `factor` (either operand order), or None."""
    if not (isinstance(node, torch.fx.Node) and node.target is aten.mul.Tensor and len(node.args) == 2):
        return None
    a, b = node.args
    if isinstance(a, torch.fx.Node) and _same_float32(b, factor):
        return a
    if isinstance(b, torch.fx.Node) and _same_float32(a, factor):
        return b
    return None


def _plus(node, literal: float | None = None):
    """The operands of an add with alpha 1: (tensor, tensor), or, with `literal`, the
    tensor that `node` adds `literal` to; None when `node` is no such add."""
    if not (isinstance(node, torch.fx.Node) and node.target is aten.add.Tensor and len(node.args) == 2
            and node.kwargs.get("alpha", 1) == 1):
        return None
    a, b = node.args
    if literal is None:
        return (a, b) if isinstance(a, torch.fx.Node) and isinstance(b, torch.fx.Node) else None
    if isinstance(a, torch.fx.Node) and _same_float32(b, literal):
        return a
    if isinstance(b, torch.fx.Node) and _same_float32(a, literal):
        return b
    return None


def _cubed(node):
    """x, where `node` is pow(x, 3)."""
    if (isinstance(node, torch.fx.Node) and node.target is aten.pow.Tensor_Scalar
            and isinstance(node.args[0], torch.fx.Node) and _same_float32(node.args[1], 3.0)):
        return node.args[0]
    return None


def _tanh_gelu(node) -> tuple | None:
    """(x, the pattern's nodes but x) where `node` is
    0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3))), the tanh form of GELU
    (GPT-2's "gelu_new", written out by Hugging Face's NewGELUActivation), else None."""
    if not (isinstance(node, torch.fx.Node) and node.target is aten.mul.Tensor and len(node.args) == 2):
        return None
    for half, one_plus in (node.args, node.args[::-1]):
        x = _scaled(half, 0.5)
        tanh = _plus(one_plus, 1.0)
        if x is None or tanh is None or tanh.target is not aten.tanh.default:
            continue
        inner = tanh.args[0]
        sum_node = _scaled(inner, _SQRT_2_OVER_PI)
        terms = _plus(sum_node)
        if terms is None:
            continue
        for linear, cubic in (terms, terms[::-1]):
            cube = _scaled(cubic, 0.044715)
            if linear is x and _cubed(cube) is x:
                return x, [node, half, one_plus, tanh, inner, sum_node, cubic, cube]
    return None


def _read_elsewhere(nodes: list) -> bool:
    """Whether a node outside a matched pattern reads one of its intermediate values
    (nodes[0] is the pattern's result, the rest what it is computed from)."""
    inside = set(nodes)
    return any(user not in inside for part in nodes[1:] for user in part.users)


def _replace(gm: torch.fx.GraphModule, nodes: list, replacement: torch.fx.Node) -> None:
    """Gives the pattern's users (of nodes[0]) `replacement`, inserted before it, and
    erases the pattern's nodes."""
    replacement.meta.update(nodes[0].meta)
    nodes[0].replace_all_uses_with(replacement)
    for part in nodes:  # users before what they read
        gm.graph.erase_node(part)


def rewrite_tanh_gelu(gm: torch.fx.GraphModule) -> int:
    """Replaces each written-out tanh GELU whose intermediate values nothing else reads
    (a training forward saves some for its backward: those stay as they are) with
    aten.gelu(x, approximate="tanh"). Returns how many were replaced."""
    replaced = 0
    for node in list(gm.graph.nodes):
        match = _tanh_gelu(node)
        if match is None:
            continue
        x, nodes = match
        val = x.meta.get("val")
        if isinstance(val, torch.Tensor) and not val.is_floating_point():
            continue
        if _read_elsewhere(nodes):
            continue
        with gm.graph.inserting_before(node):
            gelu = gm.graph.call_function(aten.gelu.default, (x,), {"approximate": "tanh"})
        _replace(gm, nodes, gelu)
        replaced += 1
    if replaced:
        gm.recompile()
    return replaced


def _single_dim(dims, rank: int) -> int | None:
    """The one dimension a reduction's `dims` argument names (normalised), else None."""
    dims = [dims] if isinstance(dims, int) else list(dims or [])
    return dims[0] % rank if len(dims) == 1 and rank > 0 else None


def _softmax(node) -> tuple | None:
    """(x, dim, the pattern's nodes) where `node` is
    exp(x - amax(x, dim, keepdim=True)) / sum(that exp, dim, keepdim=True), a softmax
    written out op by op, else None."""
    if not (isinstance(node, torch.fx.Node) and node.target is aten.div.Tensor and len(node.args) == 2):
        return None
    exp, total = node.args
    if not (isinstance(exp, torch.fx.Node) and exp.target is aten.exp.default and isinstance(total, torch.fx.Node)
            and total.target is aten.sum.dim_IntList and total.args[0] is exp and total.args[2:3] == (True,)
            and not total.kwargs):
        return None
    shifted = exp.args[0]
    if not (isinstance(shifted, torch.fx.Node) and shifted.target is aten.sub.Tensor and len(shifted.args) == 2
            and shifted.kwargs.get("alpha", 1) == 1):
        return None
    x, row_max = shifted.args
    if not (isinstance(row_max, torch.fx.Node) and row_max.target is aten.amax.default and row_max.args[0] is x
            and row_max.args[2:3] == (True,) and not row_max.kwargs):
        return None
    val = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
    if not (isinstance(val, torch.Tensor) and val.is_floating_point()):
        return None
    dim = _single_dim(row_max.args[1], val.dim())
    if dim is None or dim != _single_dim(total.args[1], val.dim()):
        return None
    return x, dim, [node, total, exp, shifted, row_max]


def rewrite_softmax(gm: torch.fx.GraphModule) -> int:
    """Replaces each written-out softmax whose intermediate values nothing else reads
    with aten._softmax(x, dim, False): one tsoftmax, a fused pass per row statistic,
    where the chain makes one per op. Returns how many were replaced."""
    replaced = 0
    for node in list(gm.graph.nodes):
        match = _softmax(node)
        if match is None:
            continue
        x, dim, nodes = match
        if _read_elsewhere(nodes):
            continue
        with gm.graph.inserting_before(node):
            softmax = gm.graph.call_function(aten._softmax.default, (x, dim, False))
        _replace(gm, nodes, softmax)
        replaced += 1
    if replaced:
        gm.recompile()
    return replaced


def _rms_core(node) -> tuple | None:
    """(x, eps, the pattern's nodes) where `node` is x * rsqrt(mean(x ** 2, -1, keepdim=True)
    + eps) (either operand order), an RMS norm without its weight, else None."""
    if not (isinstance(node, torch.fx.Node) and node.target is aten.mul.Tensor and len(node.args) == 2):
        return None
    for x, rsqrt in (node.args, node.args[::-1]):
        if not (isinstance(x, torch.fx.Node) and isinstance(rsqrt, torch.fx.Node)
                and rsqrt.target is aten.rsqrt.default):
            continue
        shifted = rsqrt.args[0]
        if not (isinstance(shifted, torch.fx.Node) and shifted.target is aten.add.Tensor
                and len(shifted.args) == 2 and shifted.kwargs.get("alpha", 1) == 1):
            continue
        mean, eps = shifted.args
        if not (isinstance(mean, torch.fx.Node) and mean.target is aten.mean.dim and mean.args[2:3] == (True,)
                and not mean.kwargs and isinstance(eps, (int, float)) and not isinstance(eps, bool)):
            continue
        square = mean.args[0]
        if not (isinstance(square, torch.fx.Node) and square.target is aten.pow.Tensor_Scalar
                and square.args[0] is x and _same_float32(square.args[1], 2.0)):
            continue
        val = x.meta.get("val")
        if not (isinstance(val, torch.Tensor) and val.dtype in (torch.float32, torch.float64) and val.dim() > 0):
            continue
        if _single_dim(mean.args[1], val.dim()) != val.dim() - 1:
            continue
        return x, float(eps), [node, rsqrt, shifted, mean, square]
    return None


def rewrite_rms_norm(gm: torch.fx.GraphModule) -> int:
    """Replaces each written-out RMS norm over the last dimension, x * rsqrt(mean(x ** 2)
    + eps), times a weight of the row's length where one follows, whose intermediate
    values nothing else reads, with aten._fused_rms_norm: one trmsnorm, a pass for the
    row's mean square and one normalising it. float32/float64 only (a float16/bfloat16
    norm is written with conversions around it). Returns how many were replaced."""
    replaced = 0
    for node in list(gm.graph.nodes):
        match = _rms_core(node)
        if match is None:
            continue
        x, eps, nodes = match
        x_val = x.meta["val"]
        weight, last = None, node
        (user,) = node.users if len(node.users) == 1 else (None,)
        if user is not None and user.target is aten.mul.Tensor and len(user.args) == 2:
            other = user.args[1] if user.args[0] is node else user.args[0]
            other_val = other.meta.get("val") if isinstance(other, torch.fx.Node) else None
            if (isinstance(other_val, torch.Tensor) and other_val.dtype == x_val.dtype
                    and tuple(other_val.shape) == (x_val.shape[-1],)):
                weight, last = other, user
                nodes = [user] + nodes
        if _read_elsewhere(nodes):
            continue
        args = (x, [int(x_val.shape[-1])], weight, eps)
        with gm.graph.inserting_before(last):
            fused = gm.graph.call_function(aten._fused_rms_norm.default, args)
            result = gm.graph.call_function(operator.getitem, (fused, 0))
        fused.meta["val"] = aten._fused_rms_norm.default(x_val, [int(x_val.shape[-1])],
                                                         None if weight is None else weight.meta["val"], eps)
        _replace(gm, nodes, result)
        replaced += 1
    if replaced:
        gm.recompile()
    return replaced
