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
same graph overwrites them, so clone what must outlive it. The saved tensors a
forward hands its backward are the exception: while those of the last replay
wait for their backward (two forwards before one backward), calls run without
the graph. Each graph has a memory pool of its own: in a shared one, a graph
captured later may keep its outputs in memory an earlier graph uses as scratch,
and replaying the earlier one would overwrite them while still in use.

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
    """One signature's graph: the static tensors each call copies its inputs into
    (input index -> tensor), its outputs, and which of them a backward keeps (the
    saved tensors). Inputs used in place are not held: the signature has their
    addresses."""

    def __init__(self, graph, copied: dict, outputs: list, saved: list, callers: set[int]):
        self.graph = graph
        self.copied = copied
        self.outputs = outputs
        # A saved parameter is not the replay's to overwrite, and others may alias it.
        self.saved = [i for i in saved if isinstance(outputs[i], torch.Tensor)
                      and outputs[i].untyped_storage().data_ptr() not in callers]
        self.own_uses = [_uses(outputs[i]) for i in self.saved]

    def in_use(self) -> bool:
        """Whether the saved tensors of the last replay still wait for their backward
        (two forwards before one backward): a replay would overwrite them. They go out
        as aliases of their own, so a holder shows in their storage's use count."""
        return any(_uses(self.outputs[i]) > own for i, own in zip(self.saved, self.own_uses))

    def run(self, args) -> list:
        for i, static in self.copied.items():
            static.copy_(args[i])
        self.graph.replay()
        outputs = list(self.outputs)
        for i in self.saved:
            outputs[i] = outputs[i].detach()
        return outputs


def _uses(tensor: torch.Tensor) -> int:
    return torch._C._storage_Use_Count(tensor.untyped_storage()._cdata)


class GraphedFunction:
    """`compiled` (called with the inputs unpacked), replayed from a PTOGraph per
    signature. `static(args)` names the inputs the graph uses where they are, not
    copied; their addresses are part of the signature, so that a moved parameter
    gets a graph of its own instead of being written over. Outputs from index
    `saved_from` on are the saved tensors of a training forward: while those of the
    last replay are still held, calls run without the graph."""

    def __init__(self, name: str, compiled, gm: torch.fx.GraphModule, kept: set[int], static,
                 saved_from: int | None = None):
        self.name = name
        self.compiled = compiled
        self.gm = gm
        self.kept = kept            # addresses of the tensors the graphs of this Dynamo graph keep
        self.static = static
        self.saved_from = saved_from
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
        elif self.graphs[key].in_use():
            return self.compiled(*args)
        return self.graphs[key].run(args)

    def capture(self, args, static: set[int]) -> Captured:
        mutated = sorted(find_input_mutations(self.gm.graph) - static)
        if mutated:
            names = [node.name for node in self.gm.graph.find_nodes(op="placeholder")]
            raise RuntimeError("it writes to inputs a replay would only see as copies: "
                               + ", ".join(names[i] for i in mutated))
        copied = {i: torch.empty_strided(arg.shape, arg.stride(), dtype=arg.dtype, device=arg.device).copy_(arg)
                  for i, arg in enumerate(args) if isinstance(arg, torch.Tensor) and i not in static}
        inputs = [copied.get(i, arg) for i, arg in enumerate(args)]
        graph = torch.pto.PTOGraph()
        with torch.pto.graph(graph):
            outputs = list(self.compiled(*inputs))
        for tensor in inputs + outputs:
            if isinstance(tensor, torch.Tensor):
                self.kept.add(tensor.data_ptr())
        saved = range(len(outputs))[self.saved_from:] if self.saved_from is not None else []
        callers = {args[i].untyped_storage().data_ptr() for i in static if isinstance(args[i], torch.Tensor)}
        return Captured(graph, copied, outputs, list(saved), callers)

    def disable(self, why: str) -> None:
        self.disabled = True
        self.graphs.clear()
        warnings.warn(f"pypto mode='reduce-overhead': the {self.name} runs without graph replay: {why}",
                      stacklevel=2)


def forward_layout() -> tuple[set[int], int]:
    """For the forward being compiled: its inputs at static addresses (parameters,
    buffers and what Dynamo marked static, such as optimizer state: AOTAutograd's
    static_input_indices, which Inductor's cudagraphs read too), and the index of
    its first saved tensor among its outputs."""
    metadata = torch._guards.TracingContext.get().fw_metadata
    return set(metadata.static_input_indices), metadata.num_forward


def kept_saved_tensors(gm: torch.fx.GraphModule, kept: set[int]):
    """`static` for a backward: its saved tensors (the inputs not named tangents, as
    torch's count_tangents reads them) at addresses a graph keeps (`kept`)."""
    saved = [i for i, node in enumerate(gm.graph.find_nodes(op="placeholder")) if "tangents" not in node.name]

    def static(args) -> set[int]:
        return {i for i in saved if isinstance(args[i], torch.Tensor) and args[i].data_ptr() in kept}
    return static
