"""Rewrites of an aten graph before it is lowered: a composite that a model writes out
op by op becomes the one aten op that PTO has an instruction for. The instruction makes
one pass over its tile where the chain makes one per op, each through a tile-sized
temporary (after a GEMM, that temporary is a band of the GEMM's output rows).

Each composite is a pattern for torch.fx's subgraph rewriter, one for each order a model
may write the tensor operands of its commutative ops in (a Python scalar is always the
second operand of an aten op). The rewriter replaces only a match whose intermediate
values nothing outside it reads: a training forward saves some for its backward, and
those stay as they are. A pattern's scalars are placeholders, so that its filter can
accept the literal a model writes wherever float32 holds it as the pattern's constant
(the constant the instruction's kernel computes with).

The pypto backend rewrites its whole graph (graph_runner.py); Inductor's pass for pto
(compile/inductor) names the device type, so that only pto's composites become the ops pto
keeps whole, and Inductor's code for the CPU's stays its own.
"""
from __future__ import annotations

import functools
import itertools
import math

import torch
from torch.fx import subgraph_rewriter, symbolic_trace

aten = torch.ops.aten

# The tanh GELU's constants, in the order its pattern's scalar placeholders take them.
_TANH_GELU_CONSTANTS = (3.0, 0.044715, math.sqrt(2.0 / math.pi), 1.0, 0.5)


def _same_float32(value, expected: float) -> bool:
    """Whether a literal of the graph is `expected` as float32 holds it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return torch.tensor(value, dtype=torch.float32).item() == torch.tensor(expected, dtype=torch.float32).item()


def _ordered(op, a, b, swap: bool):
    """op(a, b), or op(b, a) when `swap`: the two orders of a commutative op's operands."""
    return op(b, a) if swap else op(a, b)


def _single_dim(dims, rank: int) -> int | None:
    """The one dimension a reduction's `dims` argument names (normalised), else None."""
    dims = [dims] if isinstance(dims, int) else list(dims or [])
    return dims[0] % rank if len(dims) == 1 and rank > 0 else None


def _on_device(node, device_type: str | None) -> bool:
    """Whether the tensor `node` computes lives on a device of `device_type` (any, for None)."""
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return device_type is None or (isinstance(val, torch.Tensor) and val.device.type == device_type)


def _rewrite(gm: torch.fx.GraphModule, patterns: list, replacement, accepts, device_type: str | None) -> int:
    """Replaces the matches of each pattern that `accepts(placeholder values)`, whose first
    placeholder (the composite's input) is on `device_type` where one is named, with the
    graph `replacement(placeholder values)` makes, giving each new node its value on the
    graph's fake tensors (which the next pattern's filter may read). Returns how many were
    replaced."""
    def matched(match, *_):
        inputs = match.placeholder_nodes
        return _on_device(inputs[0], device_type) and accepts(*inputs)

    replaced = 0
    for pattern in patterns:
        matches = subgraph_rewriter.replace_pattern_with_filters(
            gm, pattern, match_filters=[matched],
            replacement_callback=lambda match, *_: replacement(*match.placeholder_nodes))
        for node in (node for match in matches for node in match.replacements):
            args, kwargs = torch.fx.map_arg((node.args, node.kwargs), lambda arg: arg.meta["val"])
            node.meta["val"] = node.target(*args, **kwargs)
        replaced += len(matches)
    return replaced


def _tanh_gelu_pattern(swap_product: bool, swap_sum: bool) -> torch.fx.GraphModule:
    """0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3))), the tanh form of GELU
    (GPT-2's "gelu_new", written out by Hugging Face's NewGELUActivation)."""
    def tanh_gelu(x, three, cubic, sqrt_2_over_pi, one, half):
        inner = _ordered(aten.add.Tensor, x, aten.mul.Tensor(aten.pow.Tensor_Scalar(x, three), cubic), swap_sum)
        one_plus = aten.add.Tensor(aten.tanh.default(aten.mul.Tensor(inner, sqrt_2_over_pi)), one)
        return _ordered(aten.mul.Tensor, aten.mul.Tensor(x, half), one_plus, swap_product)
    return symbolic_trace(tanh_gelu)


def _tanh_gelu(x, three, cubic, sqrt_2_over_pi, one, half):
    return aten.gelu.default(x, approximate="tanh")


_TANH_GELU_REPLACEMENT = symbolic_trace(_tanh_gelu).graph


def _is_tanh_gelu(x, *constants) -> bool:
    """The GELU's constants, of an x that is no integer tensor (aten.gelu takes floats only)."""
    val = x.meta.get("val")
    floating = not isinstance(val, torch.Tensor) or val.is_floating_point()
    return floating and all(map(_same_float32, constants, _TANH_GELU_CONSTANTS))


_TANH_GELU_PATTERNS = [_tanh_gelu_pattern(*swaps) for swaps in itertools.product((False, True), repeat=2)]


def rewrite_tanh_gelu(gm: torch.fx.GraphModule, device_type: str | None = None) -> int:
    """Replaces each written-out tanh GELU with aten.gelu(x, approximate="tanh"). Returns
    how many were replaced."""
    return _rewrite(gm, _TANH_GELU_PATTERNS, lambda *_: _TANH_GELU_REPLACEMENT, _is_tanh_gelu, device_type)


def _softmax(x, max_dims, sum_dims):
    """exp(x - amax(x, dim, keepdim=True)) / sum(that exp, dim, keepdim=True)."""
    exp = aten.exp.default(aten.sub.Tensor(x, aten.amax.default(x, max_dims, True)))
    return aten.div.Tensor(exp, aten.sum.dim_IntList(exp, sum_dims, True))


def _softmax_replacement(x, max_dims, sum_dims) -> torch.fx.Graph:
    return _softmax_graph(_single_dim(max_dims, x.meta["val"].dim()))


# Cached: a model's layers share their replacements' constants, and a trace costs milliseconds.
@functools.lru_cache(maxsize=64)
def _softmax_graph(dim: int) -> torch.fx.Graph:
    def softmax(x, max_dims, sum_dims):
        return aten._softmax.default(x, dim, False)
    return symbolic_trace(softmax).graph


def _is_softmax(x, max_dims, sum_dims) -> bool:
    val = x.meta.get("val")
    if not (isinstance(val, torch.Tensor) and val.is_floating_point()):
        return False
    dim = _single_dim(max_dims, val.dim())
    return dim is not None and dim == _single_dim(sum_dims, val.dim())


_SOFTMAX_PATTERNS = [symbolic_trace(_softmax)]


def rewrite_softmax(gm: torch.fx.GraphModule, device_type: str | None = None) -> int:
    """Replaces each softmax written out op by op over one dimension with
    aten._softmax(x, dim, False): one tsoftmax, a fused pass per row statistic, where the
    chain makes one per op. Returns how many were replaced."""
    return _rewrite(gm, _SOFTMAX_PATTERNS, _softmax_replacement, _is_softmax, device_type)


def _rms_norm_pattern(swap_norm: bool, swap_weight: bool | None) -> torch.fx.GraphModule:
    """x * rsqrt(mean(x ** 2, dims, keepdim=True) + eps), times a weight unless
    `swap_weight` is None."""
    def rms_norm(x, two, dims, eps):
        mean_square = aten.mean.dim(aten.pow.Tensor_Scalar(x, two), dims, True)
        return _ordered(aten.mul.Tensor, x, aten.rsqrt.default(aten.add.Tensor(mean_square, eps)), swap_norm)

    def weighted_rms_norm(x, two, dims, eps, weight):
        return _ordered(aten.mul.Tensor, rms_norm(x, two, dims, eps), weight, swap_weight)
    return symbolic_trace(rms_norm if swap_weight is None else weighted_rms_norm)


def _rms_norm_replacement(x, two, dims, eps, *weight) -> torch.fx.Graph:
    return _rms_norm_graph(int(x.meta["val"].shape[-1]), float(eps), bool(weight))


@functools.lru_cache(maxsize=64)  # as _softmax_graph
def _rms_norm_graph(length: int, epsilon: float, weighted: bool) -> torch.fx.Graph:
    normalized_shape = [length]

    def fused_rms_norm(x, two, dims, eps, weight):
        return aten._fused_rms_norm.default(x, normalized_shape, weight, epsilon)[0]

    def fused_rms_norm_without_weight(x, two, dims, eps):
        return aten._fused_rms_norm.default(x, normalized_shape, None, epsilon)[0]
    return symbolic_trace(fused_rms_norm if weighted else fused_rms_norm_without_weight).graph


def _is_rms_norm(x, two, dims, eps, *weight) -> bool:
    """Over the last dimension, float32/float64 only (a float16/bfloat16 norm is written
    with conversions around it), a weight of the row's length and x's dtype."""
    val = x.meta.get("val")
    if not (isinstance(val, torch.Tensor) and val.dtype in (torch.float32, torch.float64) and val.dim() > 0
            and _same_float32(two, 2.0) and isinstance(eps, (int, float)) and not isinstance(eps, bool)
            and _single_dim(dims, val.dim()) == val.dim() - 1):
        return False
    weight_val = weight[0].meta.get("val") if weight and isinstance(weight[0], torch.fx.Node) else None
    return not weight or (isinstance(weight_val, torch.Tensor) and weight_val.dtype == val.dtype
                          and tuple(weight_val.shape) == (val.shape[-1],))


# The weighted patterns first: a norm whose weight they take is not left to the unweighted ones.
_RMS_NORM_PATTERNS = [_rms_norm_pattern(swap_norm, swap_weight)
                      for swap_weight in (False, True, None) for swap_norm in (False, True)]


def rewrite_rms_norm(gm: torch.fx.GraphModule, device_type: str | None = None) -> int:
    """Replaces each written-out RMS norm over the last dimension, times a weight of the
    row's length where one follows, with aten._fused_rms_norm: one trmsnorm, a pass for
    the row's mean square and one normalising it. Returns how many were replaced."""
    return _rewrite(gm, _RMS_NORM_PATTERNS, _rms_norm_replacement, _is_rms_norm, device_type)


def rewrite_composites(gm: torch.fx.GraphModule, device_type: str | None = None) -> None:
    """Every rewrite above, in the order the backends apply them: the tanh GELU, the
    softmax and the RMS norm, of tensors on `device_type` where one is named."""
    rewrite_tanh_gelu(gm, device_type)
    rewrite_softmax(gm, device_type)
    rewrite_rms_norm(gm, device_type)
