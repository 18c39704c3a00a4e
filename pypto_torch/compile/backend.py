"""The ``pypto`` torch.compile backend: Dynamo's graph -> AOTAutograd -> PTO programs.

AOTAutograd gives functional aten graphs for the forward and, when gradients are
needed, the backward; both go through the same lowering (``CompiledGraph``). The
decompositions are PyTorch's core-aten set, less the ops PTO lowers whole because
it has instructions for them (softmax, log_softmax and their gradients, gelu,
silu, the activation gradients, CPU flash attention; layer_norm and addmm are
not decomposed by that set to begin with).
"""
from __future__ import annotations

import torch
from torch._decomp import core_aten_decompositions, get_decompositions
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

from pypto_torch.compile.graph_runner import CompiledGraph

aten = torch.ops.aten

KEPT_WHOLE = (
    aten.silu.default, aten.silu_backward.default, aten.gelu_backward.default, aten._softmax_backward_data.default,
    aten._log_softmax_backward_data.default, aten.sigmoid_backward.default, aten.tanh_backward.default,
    aten.threshold_backward.default,
    # Its decomposition drops the logsumexp that the (eager) backward reads.
    aten._scaled_dot_product_flash_attention_for_cpu.default,
)


def decompositions() -> dict:
    table = dict(core_aten_decompositions())
    for op in KEPT_WHOLE:
        table.pop(op, None)
    # Batch norm as its arithmetic (mean, var, scale, shift): rows of PTO instructions.
    table.update(get_decompositions([
        aten._native_batch_norm_legit_functional, aten._native_batch_norm_legit_no_training,
        aten._native_batch_norm_legit, aten.native_batch_norm_backward,
    ]))
    return table


def _compile_graph(gm: torch.fx.GraphModule, example_inputs):
    return make_boxed_func(CompiledGraph(gm))


_aot = None


def pypto_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """torch.compile(model, backend="pypto")."""
    global _aot
    if _aot is None:
        _aot = aot_autograd(fw_compiler=_compile_graph, bw_compiler=_compile_graph,
                            inference_compiler=_compile_graph, decompositions=decompositions(),
                            keep_inference_input_mutations=True)
    return _aot(gm, example_inputs, **kwargs)
