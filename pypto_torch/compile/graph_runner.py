"""Running an aten graph as PTO programs: specialised per input signature.

``CompiledGraph`` lowers the graph node by node with the shapes of the inputs it
is called with (symbolic sizes become the call's numbers), so that one graph
serves every shape: each new signature is lowered once and cached. Lowered nodes
gather into a segment; a node with no lowering closes the segment (its program
becomes a step), runs as an eager torch call (another step), and a new segment
starts after it. At run time the steps bind tensors to the programs' buffers by
pointer: graph inputs, parameters, eager results, and the programs' outputs,
allocated from the caching allocator in the layout the graph returns.
"""
from __future__ import annotations

import dataclasses
import os

import torch
import torch.fx
import torch.utils._pytree as pytree

from pypto_torch import _C
from pypto_torch.compile import lowering
from pypto_torch.compile.patterns import rewrite_composites
from pypto_torch.compile.program_builder import ProgramStep, Segment, Storage, Unsupported, View


@dataclasses.dataclass(frozen=True)
class SlotView:
    """A tensor at run time: a view of the tensor in slot `slot`."""
    slot: int
    shape: tuple
    strides: tuple
    offset: int


@dataclasses.dataclass(frozen=True)
class Relaid:
    """An eager op's argument in the layout the graph promised it (kernels such as the
    attention backward read their saved inputs assuming the forward's strides)."""
    view: SlotView
    strides: tuple


@dataclasses.dataclass
class EagerStep:
    node: str
    target: object
    args: tuple
    kwargs: dict
    outputs: object      # the result's structure, with the slot of each tensor in it
    layouts: dict        # slot -> (shape, strides) the later programs were lowered for


@dataclasses.dataclass
class Plan:
    steps: list
    slot_count: int
    constants: dict             # slot -> tensor (parameters and buffers the graph reads)
    outputs: list
    lowered_nodes: list
    fallback_nodes: list        # (node name, why)
    host_bound: bool            # a program reads or writes CPU memory: wait for it

    @property
    def programs(self) -> list:
        return [step for step in self.steps if isinstance(step, ProgramStep)]

    def run(self, args) -> list:
        slots = list(args) + [None] * (self.slot_count - len(args))
        for slot, tensor in self.constants.items():
            slots[slot] = tensor
        for step in self.steps:
            if isinstance(step, ProgramStep):
                self._run_program(step, slots)
            else:
                self._run_eager(step, slots)
        return [_materialise(value, slots) for value in self.outputs]

    def _run_program(self, step: ProgramStep, slots: list) -> None:
        tensors, device = [], None
        for binding in step.bindings:
            if binding is None:
                tensors.append(None)
                continue
            if binding.allocate is not None:
                slots[binding.slot] = torch.empty_strided(*binding.allocate[:2], dtype=binding.allocate[2],
                                                          device=binding.allocate[3])
            tensor = slots[binding.slot]
            if device is None and tensor.device.type == "pto":
                device = tensor.device.index
            tensors.append(tensor)
        device = torch.pto.current_device() if device is None else device
        step.program.run(tensors, device)
        if self.host_bound:
            torch.pto.synchronize(device)

    def _run_eager(self, step: EagerStep, slots: list) -> None:
        args = pytree.tree_map(lambda v: _materialise(v, slots), step.args)
        kwargs = pytree.tree_map(lambda v: _materialise(v, slots), step.kwargs)
        result = step.target(*args, **kwargs)
        for slot, value in zip(pytree.tree_leaves(step.outputs), pytree.tree_leaves(result)):
            if slot is None:
                continue
            strides = step.layouts[slot][1]
            if isinstance(value, torch.Tensor) and tuple(value.stride()) != strides and value.numel() > 1:
                value = _relaid(value, strides)
            slots[slot] = value


def _relaid(tensor: torch.Tensor, strides: tuple) -> torch.Tensor:
    """A copy of `tensor` with these strides."""
    return torch.empty_strided(tensor.shape, strides, dtype=tensor.dtype, device=tensor.device).copy_(tensor)


def _materialise(value, slots):
    if isinstance(value, Relaid):
        return _relaid(_materialise(value.view, slots), value.strides)
    if not isinstance(value, SlotView):
        return value
    base = slots[value.slot]
    if (value.offset == 0 and tuple(base.shape) == value.shape and tuple(base.stride()) == value.strides):
        return base
    return torch.as_strided(base, value.shape, value.strides, base.storage_offset() + value.offset)


def native_runner(plan: Plan | None, signature: tuple):
    """The plan as one native call (csrc/torch/plan_runner.h), which also checks that its
    inputs have `signature`'s layouts; None for a plan it cannot run: one with eager
    steps or host memory, non-tensor inputs, or results that are not views of its slots."""
    if (plan is None or plan.host_bound or not all(isinstance(step, ProgramStep) for step in plan.steps)
            or not all(isinstance(value, SlotView) for value in plan.outputs)
            or not all(isinstance(entry[0], tuple) for entry in signature)):
        return None
    steps = [(step.program, [None if binding is None else (binding.slot, binding.allocate)
                             for binding in step.bindings]) for step in plan.steps]
    return _C._PlanRunner([(list(shape), list(strides), dtype, device) for shape, strides, dtype, device in signature],
                          plan.slot_count, list(plan.constants.items()), steps,
                          [(value.slot, list(value.shape), list(value.strides), value.offset) for value in plan.outputs])


def _signature(args) -> tuple:
    return tuple((tuple(a.shape), tuple(a.stride()), a.dtype, a.device) if isinstance(a, torch.Tensor)
                 else (type(a), a) for a in args)


class CompiledGraph:
    """A callable running `gm` as PTO programs, lowered once per input signature."""

    def __init__(self, gm: torch.fx.GraphModule, fuse: bool = True):
        self.gm = gm
        self.fuse = fuse
        self.plans: dict = {}
        self.unplanned: dict = {}  # signature -> (node, why) of graphs that run eagerly as a whole
        self.runner = None  # native_runner of the plan of the last call's signature
        self.debug = os.environ.get("PTO_COMPILE_DEBUG", "0") not in ("", "0")

    def plan_for(self, args) -> Plan | None:
        """The plan for these inputs' signature; None when the graph must run eagerly
        as a whole (a result whose shape depends on data the lowering cannot see)."""
        key = _signature(args)
        if key not in self.plans:
            try:
                self.plans[key] = build_plan(self.gm, args, self.debug, self.fuse)
            except Unsupported as error:
                self.plans[key] = None
                self.unplanned[key] = (error.node, str(error))
        return self.plans[key]

    def __call__(self, *args):
        # The last signature's plan runs natively; its runner refuses other layouts.
        if self.runner is not None:
            results = self.runner.run(args)
            if results is not None:
                return results
        plan = self.plan_for(args)
        self.runner = native_runner(plan, _signature(args))
        return self.gm(*args) if plan is None else plan.run(args)


def _meta(value):
    if isinstance(value, View):
        return torch.empty_strided(value.shape, value.strides, dtype=value.dtype, device="meta")
    if isinstance(value, (torch.device, str)) and str(value) not in ("meta",):
        try:
            torch.device(value)
            return torch.device("meta")
        except (RuntimeError, TypeError):
            return value
    return value


def _concrete_strides(arg) -> tuple | None:
    """The strides the graph's metadata gives a node's tensor, if they are numbers."""
    value = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    if not isinstance(value, torch.Tensor) or value.numel() <= 1:
        return None
    strides = tuple(value.stride())
    return strides if all(isinstance(s, int) for s in strides) else None


def _node_device(node: torch.fx.Node, default: torch.device) -> torch.device:
    value = node.meta.get("val")
    for leaf in pytree.tree_leaves(value):
        if isinstance(leaf, torch.Tensor):
            return leaf.device
    return default


def _slot_view(value):
    """A value as a run-time step reads it: views of caller memory become SlotViews."""
    return SlotView(value.storage.slot, value.shape, value.strides, value.offset) if isinstance(value, View) else value


def _eager_step(node: torch.fx.Node, node_args, node_kwargs, meta, device: torch.device, next_slot) -> tuple:
    """The step running `node` as a torch call, and its value for the nodes after it:
    each tensor of the result in a slot of its own, laid out as its meta result."""
    layouts = {}

    def output_slot(leaf):
        if not isinstance(leaf, torch.Tensor):
            return None
        slot = next_slot()
        layouts[slot] = (tuple(leaf.shape), tuple(leaf.stride()))
        return slot

    out_slots = pytree.tree_map(output_slot, meta)
    args = pytree.tree_map(_slot_view, node_args)
    for index, arg in enumerate(node.args):
        promised = _concrete_strides(arg)
        if isinstance(args[index], SlotView) and promised not in (None, args[index].strides):
            args = args[:index] + (Relaid(args[index], promised),) + args[index + 1:]
    step = EagerStep(node.name, node.target, args, pytree.tree_map(_slot_view, node_kwargs), out_slots, layouts)
    values = [leaf if slot is None else View(Storage(leaf.dtype, device, slot=slot), *layouts[slot])
              for leaf, slot in zip(pytree.tree_leaves(meta), pytree.tree_leaves(out_slots))]
    return step, pytree.tree_unflatten(values, pytree.tree_structure(meta))


def build_plan(gm: torch.fx.GraphModule, args, debug: bool = False, fuse: bool = True) -> Plan:
    rewrite_composites(gm)
    nodes = list(gm.graph.nodes)
    position = {node: i for i, node in enumerate(nodes)}
    last_use = {node: max([position[user] for user in node.users], default=position[node]) for node in nodes}
    slot_count = len(args)
    constants, steps, lowered, fallbacks = {}, [], [], []
    env: dict = {}
    host_bound = False

    def next_slot() -> int:
        nonlocal slot_count
        slot_count += 1
        return slot_count - 1

    def tensor_value(tensor: torch.Tensor, slot: int) -> View:
        return View(Storage(tensor.dtype, tensor.device, slot=slot), tuple(tensor.shape), tuple(tensor.stride()))

    def resolved(value):
        return pytree.tree_map(lambda n: env[n] if isinstance(n, torch.fx.Node) else n, value)

    def live_views(at: int, extra) -> dict:
        """Storage -> its views that nodes from `at` on (or `extra`) still read."""
        still_read = [value for node, value in env.items() if last_use[node] >= at] + list(extra)
        views: dict = {}
        for leaf in pytree.tree_leaves(still_read):
            if isinstance(leaf, View):
                views.setdefault(leaf.storage, []).append(leaf)
        return views

    segment = Segment()

    def close(at: int, extra) -> None:
        nonlocal segment, host_bound
        if segment:
            steps.append(segment.close(live_views(at, extra), next_slot, debug, fuse))
            host_bound = host_bound or any(s.device.type == "cpu" for s in segment.storages if s.slot is not None)
        segment = Segment()

    default_device = next((a.device for a in args if isinstance(a, torch.Tensor) and a.device.type == "pto"),
                          torch.device("pto", torch.pto.current_device()))
    arg_index = 0
    for node in nodes:
        if node.op == "placeholder":
            value = args[arg_index]
            env[node] = tensor_value(value, arg_index) if isinstance(value, torch.Tensor) else value
            arg_index += 1
            continue
        if node.op == "get_attr":
            tensor = getattr(gm, node.target)
            slot = next_slot()
            constants[slot] = tensor
            env[node] = tensor_value(tensor, slot)
            continue
        if node.op == "output":
            result = resolved(node.args[0])
            close(position[node], pytree.tree_leaves(result))
            outputs = [_slot_view(v) for v in (result if isinstance(result, (list, tuple)) else [result])]
            return Plan(steps, slot_count, constants, outputs, lowered, fallbacks, host_bound)
        target = node.target
        node_args, node_kwargs = resolved(node.args), resolved(node.kwargs)
        if target in lowering.SIZE_OPS:
            env[node] = lowering.SIZE_OPS[target](*node_args)
            continue
        if target is torch.ops.aten.sym_size.int:
            env[node] = node_args[0].shape[node_args[1]]
            continue
        if target is torch.ops.aten.sym_stride.int:
            env[node] = node_args[0].strides[node_args[1]]
            continue
        if target is torch.ops.aten.sym_numel.default:
            env[node] = node_args[0].numel()
            continue
        if target.__name__ == "getitem" and isinstance(node_args[0], (tuple, list)):
            env[node] = node_args[0][node_args[1]]
            continue
        meta, why = None, None
        try:
            meta = target(*pytree.tree_map(_meta, node_args), **pytree.tree_map(_meta, node_kwargs))
        except Exception as error:  # noqa: BLE001: any failure means "run it eagerly"
            why = f"no meta kernel ({type(error).__name__})"
        shape_unknown = why is not None
        fn = lowering.LOWERINGS.get(target)
        if why is None and fn is None:
            why = f"no lowering for {target}"
        device = _node_device(node, default_device)
        if why is None:
            lw = lowering.Lowerer(segment, device)
            lw.meta, lw.op = meta, target
            mark = segment.mark()
            try:
                env[node] = fn(lw, *node_args, **node_kwargs)
                lowered.append(node.name)
                continue
            except Unsupported as error:
                segment.rollback(mark)
                why = str(error)
        if shape_unknown and node.users:
            raise Unsupported(f"{why}, and its result's shape is unknown before it runs", node=node.name)
        fallbacks.append((node.name, why))
        close(position[node], pytree.tree_leaves((node_args, node_kwargs)))
        step, env[node] = _eager_step(node, node_args, node_kwargs, meta, device, next_slot)
        steps.append(step)
    raise RuntimeError("graph without an output node")
