"""Writing PTO programs from Python: ``@kernel`` compiles a function into ONE fused
PTO program (through the pypto torch.compile backend), ``asm`` runs a program
written by hand in PTO-AS, the project's virtual ISA."""
from __future__ import annotations

import functools
import re

import torch

from pypto_torch import _C


class CompileError(RuntimeError):
    """A @pypto.kernel function that cannot become one PTO program, or a PTO-AS
    program that does not verify; the message names the offending line."""


_USER_FRAME = re.compile(r'File "([^"]+)", line (\d+)(?:, in \S+)?\n\s*(.*)')


def _offending_line(text: str) -> str:
    """'file:line: code' of the innermost user frame a Dynamo message or FX stack shows."""
    frames = _USER_FRAME.findall(text or "")
    if not frames:
        return "unknown line"
    path, line, code = frames[-1]
    return f"{path}:{line}: {code.strip()}"


class Kernel:
    """A function compiled into one PTO program per input shape (or one for all
    shapes with dynamic_shape=True); called like the function."""

    def __init__(self, fn, fuse: bool = True, dynamic_shape: bool = False):
        from pypto_torch.compile.backend import make_backend

        functools.update_wrapper(self, fn)
        self.fn = fn
        self.graphs: list = []  # the CompiledGraphs the backend made for this function
        backend = make_backend(fuse=fuse, on_graph=self.graphs.append)
        # Not dynamic=False: Dynamo would then trace a graph per shape and, with
        # fullgraph, raise at its recompile limit (the 9th shape). Its automatic
        # dynamic shapes trace one graph for all shapes after the second, and the
        # backend still plans one program per concrete shape.
        self._compiled = torch.compile(fn, backend=backend, fullgraph=True, dynamic=True if dynamic_shape else None)

    def __call__(self, *args, **kwargs):
        seen = len(self.graphs)
        try:
            result = self._compiled(*args, **kwargs)
        except (torch._dynamo.exc.Unsupported, torch._dynamo.exc.UserError) as error:
            reason = str(error).strip().splitlines()[0]
            raise CompileError(f"pypto.kernel {self.__name__}: cannot be compiled as one PTO program: {reason} "
                               f"(at {_offending_line(str(error))})") from None
        for graph in self.graphs[seen:]:
            for key, plan in graph.plans.items():
                self._check_one_program(graph, plan, graph.unplanned.get(key))
        return result

    def _check_one_program(self, graph, plan, unplanned) -> None:
        """Raises CompileError unless the plan is one program: the whole graph ran eagerly
        (`unplanned` says why), or a node had no PTO form."""
        if plan is not None and not plan.fallback_nodes and len(plan.programs) <= 1:
            return
        nodes = {node.name: node for node in graph.gm.graph.nodes}
        if plan is None:
            name, why = unplanned
        else:
            name, why = plan.fallback_nodes[0] if plan.fallback_nodes else (None, "several programs")
        where = _offending_line(nodes[name].meta.get("stack_trace", "")) if name in nodes else "unknown line"
        raise CompileError(f"pypto.kernel {self.__name__}: cannot be compiled as one PTO program: "
                           f"{name} has no PTO form ({why}) (at {where})")


def kernel(fn=None, *, fuse: bool = True, dynamic_shape: bool = False):
    """@pypto.kernel or @pypto.kernel(fuse=..., dynamic_shape=...): compile `fn` into one
    fused PTO program. fuse=False keeps every instruction its own stage; programs are
    cached per input shape unless dynamic_shape=True."""
    if fn is None:
        return lambda f: Kernel(f, fuse=fuse, dynamic_shape=dynamic_shape)
    return Kernel(fn, fuse=fuse, dynamic_shape=dynamic_shape)


jit = kernel


def _line_of_instruction(text: str, index: int) -> int:
    """The line of PTO-AS `text` holding instruction `index` (0-based)."""
    count = -1
    for number, line in enumerate(text.splitlines(), start=1):
        code = line.split("#", 1)[0].strip()
        if code and not code.startswith("buffer"):
            count += 1
            if count == index:
                return number
    return 0


@functools.lru_cache(maxsize=64)
def _assemble(text: str):
    try:
        return _C._BoundProgram(text)
    except ValueError as error:
        message = str(error)
        found = re.search(r"instruction (\d+) \((.*)\)$", message)
        if found:
            line = _line_of_instruction(text, int(found.group(1)))
            message = f"PTO-AS line {line}: {found.group(2)}"
        raise CompileError(message) from None


def asm(text: str, *tensors: torch.Tensor):
    """Runs a PTO-AS program written by hand: the tensors are bound, in order, to the
    buffers it declares as input or output (temporaries get a workspace). Returns the
    output buffers' tensors (one tensor, or a tuple). Errors name the line."""
    program = _assemble(text)
    kinds = program.buffer_kinds
    bound = [kind for kind in kinds if kind != "temp"]
    if len(tensors) != len(bound):
        raise TypeError(f"pypto.asm: the program binds {len(bound)} tensors (its input and output buffers), "
                        f"got {len(tensors)}")
    given = iter(tensors)
    buffers = [None if kind == "temp" else next(given) for kind in kinds]
    for number, (tensor, kind) in enumerate(zip(buffers, kinds)):
        if kind == "output" and tensor.requires_grad and torch.is_grad_enabled():
            # The program writes the tensor in place, where autograd cannot follow.
            raise RuntimeError(f"pypto.asm: output buffer %{number} is a tensor that requires grad; a program "
                               "writes it in place, which autograd cannot track: pass a tensor that does not "
                               "require grad, or run under torch.no_grad()")
    devices = {t.device for t in tensors if t.device.type == "pto"}
    if len(devices) > 1:
        raise RuntimeError(f"pypto.asm: tensors on several devices: {sorted(map(str, devices))}")
    device = devices.pop().index if devices else torch.pto.current_device()
    program.run(buffers, device)
    if any(t.device.type == "cpu" for t in tensors):
        torch.pto.synchronize(device)
    outputs = [b for b, kind in zip(buffers, kinds) if kind == "output"]
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def asm_kernel(fn):
    """@pypto.asm_kernel: `fn(*tensors)` returns the PTO-AS text for those tensors; the
    decorated function assembles it (once per text) and runs it on them."""
    @functools.wraps(fn)
    def run(*tensors):
        return asm(fn(*tensors), *tensors)
    return run
