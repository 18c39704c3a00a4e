"""``pypto_torch.explain(fn, *example_inputs)``: what the pypto backend makes of a
function, without running it: the captured aten graph, the final PTO program, which
nodes were lowered and which run eagerly (and why), its stages (how many fuse several
instructions into one tile loop), and the workspace its temporaries need."""
from __future__ import annotations

import dataclasses

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from pypto_torch.compile.backend import decompositions
from pypto_torch.compile.graph_runner import build_plan


@dataclasses.dataclass
class Explanation:
    graph: torch.fx.GraphModule
    program: str
    lowered_nodes: list
    fallback_nodes: list   # (node name, why it runs eagerly)
    fused_stages: int
    workspace_bytes: int
    stages: int
    instructions: int

    def __repr__(self) -> str:
        lines = [
            "pypto compile report",
            f"  aten nodes lowered to PTO : {len(self.lowered_nodes)}",
            f"  nodes run eagerly        : {len(self.fallback_nodes)}",
        ]
        lines += [f"    {name}: {why}" for name, why in self.fallback_nodes]
        lines += [
            f"  PTO instructions         : {self.instructions}",
            f"  stages                   : {self.stages}, of which fused: {self.fused_stages}",
            f"  workspace of temporaries : {self.workspace_bytes} bytes",
            "  program (PTO-AS):",
        ]
        lines += ["    " + line for line in self.program.splitlines()]
        return "\n".join(lines)


def explain(fn, *example_inputs) -> Explanation:
    """Traces `fn` (a function or module) to a functional aten graph as the backend
    sees it (inference: no gradients), and lowers and compiles it for the inputs'
    shapes. Nothing runs on the device."""
    inputs = list(example_inputs)

    def traced(*args):  # exactly the inputs given: make_fx counts a function's parameters
        return fn(*args)
    if isinstance(fn, torch.nn.Module):
        # Parameters and buffers become inputs, as Dynamo lifts them.
        state = {**dict(fn.named_parameters()), **dict(fn.named_buffers())}
        names = list(state)
        inputs = list(state.values()) + inputs

        def traced(*args):
            return torch.func.functional_call(fn, dict(zip(names, args[:len(names)])), args[len(names):])
    with torch.no_grad():
        graph = make_fx(torch.func.functionalize(traced, remove="mutations"),
                        decomposition_table=decompositions(), tracing_mode="fake")(*inputs)
    plan = build_plan(graph, [t.detach() if isinstance(t, torch.Tensor) else t for t in inputs])
    programs = plan.programs
    return Explanation(
        graph=graph,
        program="\n".join(step.program.text for step in programs),
        lowered_nodes=list(plan.lowered_nodes),
        fallback_nodes=list(plan.fallback_nodes),
        fused_stages=sum(step.program.fused_stages for step in programs),
        workspace_bytes=max((step.program.workspace_bytes for step in programs), default=0),
        stages=sum(step.program.stages for step in programs),
        instructions=sum(step.program.instructions for step in programs),
    )
