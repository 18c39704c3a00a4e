"""Inductor's scheduling for pto: each fused node group becomes one PTO program.

Inductor decides what to fuse; pto accepts any fusion of its nodes, because a program
here is a program of whole-tile instructions (tiles.py) that the pto compiler then
fuses into tiled stages and memory-plans, as it does for ``backend="pypto"``. A buffer
that only the program's own nodes read stays inside it as a temporary. The wrapper
defines the program from its nodes' traces (trace.py) and calls it with the buffers it
reads and writes and the size symbols it depends on.
"""
from __future__ import annotations

import sympy
import torch
from torch._inductor.scheduler import BaseScheduling, FusedSchedulerNode, SchedulerNode
from torch._inductor.utils import sympy_index_symbol
from torch._inductor.virtualized import V

from pypto_torch.compile.inductor.launch import InductorProgram
from pypto_torch.compile.inductor.trace import RecordingOps, expression
from pypto_torch.compile.program_builder import Unsupported


class PTOScheduling(BaseScheduling):
    def group_fn(self, sizes):
        return tuple(V.graph.sizevars.simplify(sympy.Mul(*s)) for s in sizes)

    def can_fuse_vertical(self, node1, node2) -> bool:
        return _fusible(node1) and _fusible(node2)

    def can_fuse_horizontal(self, node1, node2) -> bool:
        return _fusible(node1) and _fusible(node2)

    def codegen_node(self, node: FusedSchedulerNode | SchedulerNode) -> None:
        nodes = node.get_nodes()
        names = {n.get_name() for n in nodes}
        recorded, used, written, symbols = [], [], [], set()
        for n in nodes:
            n.mark_run()
            recorded.append(_record(n, used, symbols))
            written.extend(buffer.get_name() for buffer in n.get_outputs())
        inside = {name for name in written
                  if self.scheduler.can_buffer_be_removed_through_fusion(name, names)
                  and name not in V.graph.get_output_names()}
        V.graph.removed_buffers |= inside
        layouts = {}
        for name in used:
            numel = V.graph.sizevars.simplify(V.graph.get_buffer(name).get_layout().storage_size())
            symbols |= sympy.sympify(numel).free_symbols
            layouts[name] = (str(V.graph.get_dtype(name)).removeprefix("torch."), sympy.srepr(numel))
        arguments = [name for name in used if name not in inside]
        hints = {s.name: V.graph.sizevars.optimization_hint(s) for s in sorted(symbols, key=str)}
        symbols = list(hints)
        program = InductorProgram(recorded, layouts, arguments, symbols)
        wrapper = V.graph.wrapper_code
        program_name = f"pto_program_{wrapper.next_kernel_suffix()}"
        at = f" at {hints}" if hints else ""
        try:  # built now, at the size hints: what PTO cannot express is known at compile time
            shown = f"# {program_name}'s PTO program{at}:\n" + "\n".join(f"# {line}" for line in program.source(hints).splitlines())
            eager_reason = None
        except Unsupported as error:
            eager_reason = str(error)
            _check_eagerly(program, hints)
            shown = f"# {program_name} runs as aten calls: {eager_reason}"
        wrapper.header.splice(f"\n{shown}\n{program_name} = InductorProgram({recorded!r}, {layouts!r}, {arguments!r}, "
                              f"{symbols!r}, {eager_reason!r})")
        call = [*arguments, *(f"{name}={name}" for name in symbols)]
        wrapper.writeline(f"{program_name}({', '.join(call)})")
        self.free_buffers_in_scheduler()

    def codegen_sync(self) -> None:
        V.graph.wrapper_code.writeline("torch.pto.synchronize()")

    def ready_to_flush(self) -> bool:
        return False

    def flush(self) -> None:
        pass

    def benchmark_fused_nodes(self, nodes):
        raise NotImplementedError("pto's Inductor programs are not benchmarked one by one")


def _check_eagerly(program: InductorProgram, hints: dict) -> None:
    """Replays the program's eager form over meta tensors: what it cannot run either fails
    the compile (with Unsupported's reason), not a call."""
    meta = [torch.empty(int(expression(program.layouts[name][1], hints)), dtype=getattr(torch, program.layouts[name][0]),
                        device="meta") for name in program.arguments]
    program.run_eagerly(meta, hints)


def _fusible(node) -> bool:
    return isinstance(node, (SchedulerNode, FusedSchedulerNode)) and not node.is_template()


def _record(node: SchedulerNode, used: list, symbols: set) -> tuple:
    """(iteration sizes as text, reduced dims, the body's trace) of one node; the
    buffers it names are appended to `used`, the size symbols it depends on added to
    `symbols`."""
    sizes, reduction_sizes = node.get_ranges()
    shape = tuple(V.graph.sizevars.simplify(n) for n in (*sizes, *reduction_sizes))
    variables = [sympy_index_symbol(f"i{d}") for d in range(len(shape))]
    renames = V.graph.scheduler.mutation_real_name
    recording = RecordingOps(lambda name: renames.get(name, name))
    with V.set_ops_handler(recording):
        node._body(variables[:len(sizes)], variables[len(sizes):])
    for name in recording.buffer_names:
        if name not in used:
            used.append(name)
    for n in shape:
        symbols |= sympy.sympify(n).free_symbols
    symbols |= {s for s in recording.symbols if s not in variables and not s.name.startswith("indirect")}
    return tuple(sympy.srepr(n) for n in shape), len(reduction_sizes), tuple(recording.calls)
