"""``mode="reduce-overhead"``: each compiled function replays a captured PTOGraph.

As the cudagraphs backend does on CUDA (``torch/_dynamo/backends/cudagraphs.py``),
AOTAutograd's compiled forward and backward are graphed one by one. The first
call of an input signature (shapes, strides, dtypes, devices, scalar values) runs
the function as usual: the warm-up, which lowers it and settles lazy state. The
second captures it with ``torch.pto.graph`` into a ``PTOGraph`` whose inputs are
static tensors, and replays it; every later call copies its inputs into the static
tensors and replays. Inputs whose memory the graph may keep are not copied while
their address is the captured one: the forward's parameters and buffers (and
other static addresses Dynamo marked, such as optimizer state), and the saved
tensors the backward gets from a graphed forward. Every other input is copied, so
a caller's tensor is never written to.

The results are the graph's static outputs, as on CUDA: the next replay of the
same graph overwrites them, so clone what must outlive it. All graphs of one
Dynamo graph share one memory pool.

Work a capture refuses (an op running on the CPU, a host read or synchronize,
random numbers) and inputs the function mutates that are not static make that
function run without graphs from then on, after one warning saying why.
"""
from __future__ import annotations

import warnings

import torch
import torch.fx
from torch._dynamo.backends.cudagraphs import find_input_mutations

from pypto_torch.compile.graph_runner import _signature


class Captured:
    """One signature's graph: its static inputs and outputs, and which inputs each
    call copies in."""

    def __init__(self, graph, inputs: list, outputs: list, copied: list):
        self.graph = graph
        self.inputs = inputs
        self.outputs = outputs
        self.copied = copied

    def run(self, args) -> list:
        for i in self.copied:
            self.inputs[i].copy_(args[i])
        self.graph.replay()
        return list(self.outputs)


class GraphPool:
    """What the graphs of one Dynamo graph share: the memory pool, and the addresses
    of the tensors their graphs keep (static inputs and outputs), which a backward
    takes without copying."""

    def __init__(self):
        self.handle = torch.pto.graph_pool_handle()
        self.kept: set[int] = set()


class GraphedFunction:
    """`compiled` (called with the inputs unpacked), replayed from a PTOGraph per
    signature. `static(args)` names the inputs the graph uses where they are, not
    copied; their addresses are part of the signature, so that a moved parameter
    gets a graph of its own instead of being written over."""

    def __init__(self, name: str, compiled, gm: torch.fx.GraphModule, pool: GraphPool, static):
        self.name = name
        self.compiled = compiled
        self.gm = gm
        self.pool = pool
        self.static = static
        self.graphs: dict = {}      # signature -> Captured, or None once warmed up
        self.disabled = False

    def __call__(self, *args):
        if self.disabled:
            return self.compiled(*args)
        static = self.static(args)
        key = (_signature(args), tuple(args[i].data_ptr() for i in sorted(static)))
        if key not in self.graphs:
            self.graphs[key] = None
            return self.compiled(*args)
        if self.graphs[key] is None:
            try:
                self.graphs[key] = self.capture(args, static)
            except RuntimeError as error:
                self.disable(str(error).splitlines()[0])
                return self.compiled(*args)
        return self.graphs[key].run(args)

    def capture(self, args, static: set[int]) -> Captured:
        mutated = sorted(find_input_mutations(self.gm.graph) - static)
        if mutated:
            names = [node.name for node in self.gm.graph.find_nodes(op="placeholder")]
            raise RuntimeError("it writes to inputs a replay would only see as copies: "
                               + ", ".join(names[i] for i in mutated))
        copied = [i for i, arg in enumerate(args) if isinstance(arg, torch.Tensor) and i not in static]
        inputs = list(args)
        for i in copied:
            inputs[i] = torch.empty_strided(args[i].shape, args[i].stride(), dtype=args[i].dtype,
                                            device=args[i].device).copy_(args[i])
        graph = torch.pto.PTOGraph()
        with torch.pto.graph(graph, pool=self.pool.handle):
            outputs = list(self.compiled(*inputs))
        for tensor in inputs + outputs:
            if isinstance(tensor, torch.Tensor):
                self.pool.kept.add(tensor.data_ptr())
        return Captured(graph, inputs, outputs, copied)

    def disable(self, why: str) -> None:
        self.disabled = True
        self.graphs.clear()
        warnings.warn(f"pypto mode='reduce-overhead': the {self.name} runs without graph replay: {why}",
                      stacklevel=2)


def forward_static() -> set[int]:
    """The compiling forward's inputs at static addresses: parameters, buffers and what
    Dynamo marked static, such as optimizer state (AOTAutograd's static_input_indices,
    which Inductor's cudagraphs read too)."""
    context = torch._guards.TracingContext.try_get()
    return set(context.fw_metadata.static_input_indices) if context and context.fw_metadata else set()


def kept_saved_tensors(gm: torch.fx.GraphModule, pool: GraphPool):
    """`static` for a backward: its saved tensors (the inputs not named tangents, as
    torch's count_tangents reads them) that a graph of the pool keeps."""
    saved = [i for i, node in enumerate(gm.graph.find_nodes(op="placeholder")) if "tangents" not in node.name]

    def static(args) -> set[int]:
        return {i for i in saved if isinstance(args[i], torch.Tensor) and args[i].data_ptr() in pool.kept}
    return static
