"""What Inductor's generated wrapper calls on pto: a kernel that builds its PTO program
from its loop bodies' traces (trace.py) at the sizes of the call, once per set of
sizes, and launches it on the current stream over the tensors the wrapper passes (the
buffers the kernel reads and writes). The wrapper never touches device memory: it
allocates tensors and launches programs through the runtime."""
from __future__ import annotations

import torch
from torch._dynamo.utils import counters
from torch._inductor.utils import sympy_index_symbol

from pypto_torch import _C
from pypto_torch.compile.inductor.eager import EagerLowerer
from pypto_torch.compile.inductor.tiles import BufferSet, TileOps
from pypto_torch.compile.inductor.trace import expression, replay
from pypto_torch.compile.lowering import Lowerer
from pypto_torch.compile.program_builder import Segment, Unsupported


class PTOKernel:
    """One Inductor kernel. `nodes`: per node, its iteration sizes (text), how many of
    them are reduced, and its body's trace; `layouts`: each buffer's dtype name and
    storage size (text); `arguments`: the buffers the call passes, in order; `sizes`:
    the size symbols the call passes by name. With an `eager_reason` (what PTO cannot
    express), each call runs the bodies as aten calls instead (eager.py)."""

    def __init__(self, nodes: list, layouts: dict, arguments: list, sizes: list, eager_reason: str | None = None):
        self.nodes = nodes
        self.layouts = layouts
        self.arguments = arguments
        self.sizes = sizes
        self.eager_reason = eager_reason
        self.programs: dict[tuple, tuple] = {}
        if eager_reason is not None:  # counted as the wrapper loads, from a compile or Inductor's cache
            counters["pto_inductor"]["eager_kernels"] += 1
            counters["pto_inductor"][f"eager: {eager_reason}"] += 1

    def source(self, sizes: dict) -> str:
        """The PTO-AS of the program at `sizes` (symbol name -> int)."""
        return self._build(sizes)[0]

    def __call__(self, *tensors: torch.Tensor, **sizes: int) -> None:
        if self.eager_reason is not None:
            self.run_eagerly(tensors, sizes)
            return
        key = tuple(sizes[name] for name in self.sizes)
        if key not in self.programs:
            source, temporaries = self._build(sizes)
            self.programs[key] = (_C._BoundProgram(source, False, True), [None] * temporaries)
        program, padding = self.programs[key]
        device = next((t.device.index for t in tensors if t.device.type == "pto"), None)
        program.run([*tensors, *padding], torch.pto.current_device() if device is None else device)

    def run_eagerly(self, tensors, sizes: dict) -> None:
        """The bodies as aten calls over `tensors` (meta tensors: a check that they can run)."""
        device = tensors[0].device if tensors else torch.device("pto")
        buffers = self._buffers(sizes, device)
        lowerer = EagerLowerer(device)
        for name, (dtype, numel) in buffers.layouts.items():
            given = tensors[self.arguments.index(name)] if name in self.arguments else None
            lowerer.bind(buffers.storage(name), given if given is not None else
                         torch.empty(numel, dtype=dtype, device=device))
        self._replay(lowerer, buffers, sizes)

    def _buffers(self, sizes: dict, device: torch.device) -> BufferSet:
        return BufferSet(device, {name: (getattr(torch, dtype), int(expression(numel, sizes)))
                                  for name, (dtype, numel) in self.layouts.items()})

    def _replay(self, lowerer, buffers: BufferSet, sizes: dict) -> None:
        for shape_text, reduced, calls in self.nodes:
            shape = tuple(int(expression(n, sizes)) for n in shape_text)
            variables = [sympy_index_symbol(f"i{d}") for d in range(len(shape))]
            replay(calls, TileOps(lowerer, buffers, shape, variables, reduced), sizes)

    def _build(self, sizes: dict) -> tuple[str, int]:
        buffers = self._buffers(sizes, torch.device("pto"))
        segment = Segment()
        self._replay(Lowerer(segment, buffers.device), buffers, sizes)
        return _program_text(segment, [buffers.storage(name) for name in self.arguments])


def _program_text(segment: Segment, arguments: list) -> tuple[str, int]:
    """The segment's PTO-AS with `arguments` as buffers 0..n-1 (in that order), then its
    temporaries; and how many temporaries there are."""
    order = arguments + [s for s in segment.storages if s not in arguments]
    renumber = {segment.buffers[s]: i for i, s in enumerate(order) if s in segment.buffers}
    instructions = [(mnemonic, [(renumber[buffer], *rest) for buffer, *rest in operands], immediates)
                    for mnemonic, operands, immediates in segment.constants + segment.instructions]
    if not instructions:
        raise Unsupported("a kernel with no instruction")
    kinds = [("input" if i < len(arguments) else "temp", segment.extents.get(s, 0) * s.dtype.itemsize)
             for i, s in enumerate(order)]
    return _C._pto_as(kinds, instructions), len(order) - len(arguments)


def current_stream_id(device: int) -> int:
    """The current stream of `device`, as Inductor's wrapper names it (get_raw_stream)."""
    return torch.pto.current_stream(device).stream_id
