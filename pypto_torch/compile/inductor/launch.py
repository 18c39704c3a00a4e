"""What Inductor's generated wrapper calls on pto: an Inductor program, which builds its PTO program
from its loop bodies' traces (trace.py) at the sizes of the call, once per set of
sizes, and launches it on the current stream over the tensors the wrapper passes (the
buffers it reads and writes). The wrapper never touches device memory: it
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


class InductorProgram:
    """One Inductor program: a fused group of Inductor's nodes. `nodes`: per node, its iteration sizes (text), how many of
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
            counters["pto_inductor"]["eager_programs"] += 1
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

    def _replay(self, lowerer, buffers: BufferSet, sizes: dict, stores: list | None = None) -> None:
        for shape_text, reduced, calls in self.nodes:
            shape = tuple(int(expression(n, sizes)) for n in shape_text)
            variables = [sympy_index_symbol(f"i{d}") for d in range(len(shape))]
            replay(calls, TileOps(lowerer, buffers, shape, variables, reduced, stores), sizes)

    def _build(self, sizes: dict) -> tuple[str, int]:
        buffers = self._buffers(sizes, torch.device("pto"))
        segment, stores = Segment(), []
        self._replay(Lowerer(segment, buffers.device), buffers, sizes, stores)
        arguments = [buffers.storage(name) for name in self.arguments]
        forward_stores(segment, stores, {segment.buffers[s] for s in arguments if s in segment.buffers})
        return _program_text(segment, arguments)


def forward_stores(segment: Segment, stores: list, caller_buffers: set) -> None:
    """A store copies a computed tile into its buffer: where the tile is a temporary
    that one earlier instruction writes and only the copy reads, and nothing between
    them touches the destination buffer, that instruction writes the destination
    itself and the copy goes (one pass over the data less per stored value)."""
    instructions = segment.instructions
    uses: dict[int, int] = {}
    for _, operands, _ in segment.constants + instructions:
        for operand in operands:
            uses[operand[0]] = uses.get(operand[0], 0) + 1
    dropped = set()
    for at in stores:
        _, (destination, source), _ = instructions[at]
        if source[0] in caller_buffers or uses.get(source[0]) != 2 or destination[1] != source[1]:
            continue
        producer = next((i for i in range(at - 1, -1, -1) if instructions[i][1][0][0] == source[0]), None)
        if producer is None:
            continue
        retargeted = _retargeted(instructions[producer][1][0], source, destination)
        between = instructions[producer:at]
        if retargeted is None or any(operand[0] == destination[0] for _, operands, _ in between for operand in operands):
            continue
        mnemonic, operands, immediates = instructions[producer]
        instructions[producer] = (mnemonic, [retargeted, *operands[1:]], immediates)
        dropped.add(at)
    segment.instructions = [step for i, step in enumerate(instructions) if i not in dropped]


def _program_text(segment: Segment, arguments: list) -> tuple[str, int]:
    """The segment's PTO-AS with `arguments` as buffers 0..n-1 (in that order), then the
    temporaries an instruction still names (forward_stores leaves some unread); and how
    many temporaries there are."""
    steps = segment.constants + segment.instructions
    named = {operand[0] for _, operands, _ in steps for operand in operands}
    order = arguments + [s for s in segment.storages if s not in arguments and segment.buffers[s] in named]
    renumber = {segment.buffers[s]: i for i, s in enumerate(order) if s in segment.buffers}
    instructions = [(mnemonic, [(renumber[buffer], *rest) for buffer, *rest in operands], immediates)
                    for mnemonic, operands, immediates in steps]
    if not instructions:
        raise Unsupported("a program with no instruction")
    kinds = [("input" if i < len(arguments) else "temp", segment.extents.get(s, 0) * s.dtype.itemsize)
             for i, s in enumerate(order)]
    return _C._pto_as(kinds, instructions), len(order) - len(arguments)


def _retargeted(written: tuple, source: tuple, destination: tuple):
    """The producer's output moved onto the destination: `written` is how the producer
    writes the temporary (the very view the copy reads, or a reduction's view of it with
    stride 0 along the reduced dims of extent 1 in `source`); None where it is neither."""
    _, dtype, shape, strides, offset = written
    _, _, source_shape, source_strides, source_offset = source
    if dtype != source[1] or offset != source_offset or len(shape) != len(source_shape) or \
            tuple(destination[2]) != tuple(source_shape):
        return None
    moved = []
    for n, stride, m, source_stride, destination_stride in zip(shape, strides, source_shape, source_strides,
                                                              destination[3]):
        if n == m and stride == source_stride:
            moved.append(destination_stride)
        elif m == 1 and stride == 0:
            moved.append(0)  # a reduced dim: the reduction's output repeats along it
        else:
            return None
    return destination[0], destination[1], shape, tuple(moved), destination[4]


def current_stream_id(device: int) -> int:
    """The current stream of `device`, as Inductor's wrapper names it (get_raw_stream)."""
    return torch.pto.current_stream(device).stream_id
