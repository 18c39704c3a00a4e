"""The ``pypto`` torch.compile backend: Dynamo's graph -> AOTAutograd -> PTO programs.

AOTAutograd gives functional aten graphs for the forward and, when gradients are
needed, the backward; both go through the same lowering (``CompiledGraph``). The
decompositions are PyTorch's core-aten set, less the ops PTO lowers whole because
they have a recipe (csrc/recipes: softmax and its gradient, the activations and
their gradients, CPU flash attention ...: ``KEPT_WHOLE``). A graph compiled in an earlier process
is loaded from the compile cache on disk instead (disk_cache.py).
"""
from __future__ import annotations

import math
import os

import torch
import torch.nn.functional as F
from torch._decomp import core_aten_decompositions, get_decompositions
from torch._dynamo.backends.common import aot_autograd
from torch._dynamo.utils import counters
from torch._functorch.aot_autograd import make_boxed_func

from pypto_torch.compile import disk_cache, lowering
from pypto_torch.compile.graph_replay import GraphedFunction, forward_layout, kept_saved_tensors
from pypto_torch.compile.graph_runner import CompiledGraph

aten = torch.ops.aten

# The ops kept out of decomposition: every op with a recipe (the lowering runs it
# whole, as the eager kernel does), rms_norm apart: its recipe's rstd, which the
# backward reads, is computed in the input's dtype where aten's is float32 for
# float16/bfloat16, so graphs take it decomposed (patterns.py fuses the output back).
KEPT_WHOLE = tuple(op for op in lowering.RECIPE_OPS if op is not aten._fused_rms_norm.default)


def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """F.scaled_dot_product_attention kept whole, as one fused attention program (the
    lowering of the CPU flash op), where it is plain attention; otherwise as torch runs
    it. Dynamo's graph calls this in its place (see keep_attention_whole)."""
    # The CPU flash op has no gradient for the mask (T5's learnt position bias is one).
    if (dropout_p != 0.0 or enable_gqa or query.dim() != 4 or key.shape[:-2] != query.shape[:-2]
            or (attn_mask is not None and (attn_mask.dim() > 4 or attn_mask.requires_grad))):
        return F.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale=scale,
                                              enable_gqa=enable_gqa)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        # The flash op takes additive masks only; this is how scaled_dot_product_attention
        # itself turns a boolean one (True: take part) into one.
        attn_mask = torch.zeros(attn_mask.shape, dtype=query.dtype, device=attn_mask.device).masked_fill(
            attn_mask.logical_not(), float("-inf"))
    return aten._scaled_dot_product_flash_attention_for_cpu(query, key, value, 0.0, is_causal, attn_mask=attn_mask,
                                                            scale=scale)[0]


def keep_attention_whole(gm: torch.fx.GraphModule) -> None:
    """Points Dynamo's scaled_dot_product_attention calls at `attention`: AOTAutograd
    would otherwise decompose them (into the math with its -inf row guards) before any
    decomposition table is asked."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is F.scaled_dot_product_attention:
            node.target = attention
    gm.recompile()


def _attention_backward(grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, attn_mask=None,
                        scale=None):
    """The attention's gradients from the saved logsumexp, in aten ops: the weights
    are recomputed as exp(scores - logsumexp), so no (L, S) matrix is saved."""
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    compute = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    q, k, v, d_out, o = (t.to(compute) for t in (query, key, value, grad_out, out))
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    if is_causal:
        keep = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    weights = torch.exp(scores - logsumexp.unsqueeze(-1))
    d_value = torch.matmul(weights.transpose(-1, -2), d_out)
    d_weights = torch.matmul(d_out, v.transpose(-1, -2))
    d_scores = weights * (d_weights - (d_out * o).sum(-1, keepdim=True))
    d_query = torch.matmul(d_scores, k) * scale
    d_key = torch.matmul(d_scores.transpose(-1, -2), q) * scale
    return d_query.to(query.dtype), d_key.to(key.dtype), d_value.to(value.dtype)


def decompositions() -> dict:
    table = dict(core_aten_decompositions())
    table[aten._scaled_dot_product_flash_attention_for_cpu_backward.default] = _attention_backward
    for op in KEPT_WHOLE:
        table.pop(op, None)
    # Batch norm as its arithmetic (mean, var, scale, shift): rows of PTO instructions.
    table.update(get_decompositions([
        aten._native_batch_norm_legit_functional, aten._native_batch_norm_legit_no_training,
        aten._native_batch_norm_legit, aten.native_batch_norm_backward,
    ]))
    return table


def make_backend(fuse: bool = True, on_graph=None):
    """A `pypto` backend; fuse=False keeps every instruction a stage of its own;
    on_graph(compiled_graph) is told of each graph it compiles (pypto.kernel checks
    they became one program). mode="reduce-overhead" replays each compiled function
    from a captured PTOGraph (graph_replay.py); other modes are ignored, as any
    AOTAutograd backend ignores them."""
    recording: list | None = None   # the graphs of the compile being stored to disk

    def lowered(gm: torch.fx.GraphModule) -> CompiledGraph:
        if recording is None:
            graph = CompiledGraph(gm, fuse=fuse)
        else:
            graph = disk_cache.RecordedGraph(gm, fuse=fuse)
            recording.append(graph)
        if on_graph is not None:
            on_graph(graph)
        return graph

    def compile_graph(gm: torch.fx.GraphModule, example_inputs):
        return make_boxed_func(lowered(gm))

    # The table is built at the first miss (a tenth of a second): a warm start needs none.
    aot = aot_autograd(fw_compiler=compile_graph, bw_compiler=compile_graph, inference_compiler=compile_graph,
                       decompositions=decompositions, keep_inference_input_mutations=True)

    def cached(gm: torch.fx.GraphModule, example_inputs, **kwargs):
        """`aot`, through the disk cache (disk_cache.py): a stored graph where one matches,
        else a compile that stores its plan at its first call where it can."""
        nonlocal recording
        debug = os.environ.get("PTO_COMPILE_DEBUG", "0") not in ("", "0")
        key = None
        if disk_cache.config.enabled and on_graph is None:
            key = disk_cache.graph_key(gm, example_inputs, {**kwargs, "fuse": fuse, "debug": debug})
            if key is None:
                counters["pypto"]["cache_bypass"] += 1
        if key is None:
            return aot(gm, example_inputs, **kwargs)
        stored = disk_cache.load(key, gm, debug, fuse)
        if stored is not None:
            counters["pypto"]["cache_hit"] += 1
            return stored.as_call()
        counters["pypto"]["cache_miss"] += 1
        recording = []
        try:
            compiled = aot(gm, example_inputs, **kwargs)
            graphs = recording
        finally:
            recording = None
        return disk_cache.StoringOnFirstCall(compiled, key, graphs, _mutates_input_metadata()).as_call()

    def replaying(gm: torch.fx.GraphModule, example_inputs, **kwargs):
        kept: set[int] = set()   # addresses a backward may take from a graphed forward

        def forward(name):
            def compile_forward(fw: torch.fx.GraphModule, fw_inputs):
                static, saved_from = forward_layout()
                return make_boxed_func(GraphedFunction(name, lowered(fw), fw, kept, lambda args: static, saved_from))
            return compile_forward

        def compile_backward(bw: torch.fx.GraphModule, bw_inputs):
            return make_boxed_func(GraphedFunction("backward", lowered(bw), bw, kept, kept_saved_tensors(bw, kept)))

        return aot_autograd(fw_compiler=forward("forward"), bw_compiler=compile_backward,
                            inference_compiler=forward("inference graph"), decompositions=decompositions(),
                            keep_inference_input_mutations=True)(gm, example_inputs, **kwargs)

    def backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
        keep_attention_whole(gm)
        if kwargs.get("mode") == "reduce-overhead":
            kwargs.pop("mode")
            return replaying(gm, example_inputs, **kwargs)
        return cached(gm, example_inputs, **kwargs)
    return backend


def _mutates_input_metadata() -> bool:
    """Whether the graph AOTAutograd just compiled changes an input's shape or strides
    (its wrapper does that after the call; True where it cannot tell)."""
    context = torch._guards.TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None)
    return metadata is None or any(info.mutates_metadata for info in metadata.input_info)


_default_backend = None


def pypto_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """torch.compile(model, backend="pypto")."""
    global _default_backend
    if _default_backend is None:
        _default_backend = make_backend()
    return _default_backend(gm, example_inputs, **kwargs)
