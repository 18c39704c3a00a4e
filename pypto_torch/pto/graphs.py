"""Graph capture on pto, shaped after ``torch.cuda.graphs``: ``PTOGraph``, the
``graph`` context manager, ``graph_pool_handle`` and ``make_graphed_callables``.

The capture itself (what a stream records, what it refuses, the private memory
pool) lives in C++ (``csrc/torch/pto_graph.h`` over the runtime's
``ptoStreamBeginCapture``); this module is the torch.cuda-shaped surface over it.
"""

from typing import Any, Callable

import torch
from torch.utils import _pytree

from pypto_torch import _C


def is_current_stream_capturing() -> bool:
    """Whether the current pto stream is capturing a graph."""
    return _C._is_current_stream_capturing()


def graph_pool_handle() -> tuple[int, int]:
    """A memory pool id graphs may share: pass it as ``pool=`` to several captures."""
    return _C._graph_pool_handle()


class PTOGraph(_C._PTOGraph):
    """A captured graph of pto work (as ``torch.cuda.CUDAGraph``): ``PTOGraph(optimize=False)``.

    ``capture_begin(pool=None, capture_error_mode="global")`` / ``capture_end()``
    bracket the capture on the current (non-default) stream; ``replay()`` launches
    everything captured as one command on the current stream; ``reset()`` (or
    garbage collection) frees the graph and gives its pool back. ``program()`` is
    the captured work as one PTO program (PTO-AS); with ``optimize=True`` the
    compiler optimises that program when the capture ends and replays launch it.
    """


class graph:
    """Context manager capturing the work inside it into ``pto_graph`` (as ``torch.cuda.graph``).

    It captures on a side stream (one shared by every ``graph`` without ``stream=``),
    after synchronizing the device and emptying the cache. An exception inside
    the block ends the capture and keeps nothing of it.
    """

    default_capture_stream: torch.Stream | None = None

    def __init__(self, pto_graph: PTOGraph, pool: tuple[int, int] | None = None,
                 stream: torch.Stream | None = None, capture_error_mode: str = "global"):
        from pypto_torch.pto.streams import Stream

        if stream is None and graph.default_capture_stream is None:
            graph.default_capture_stream = Stream()
        self.pto_graph = pto_graph
        self.pool = pool
        self.capture_stream = stream if stream is not None else graph.default_capture_stream
        self.capture_error_mode = capture_error_mode
        self.stream_ctx = None

    def __enter__(self) -> None:
        from pypto_torch import pto

        pto.synchronize()
        pto.empty_cache()
        self.stream_ctx = pto.stream(self.capture_stream)
        self.stream_ctx.__enter__()
        try:
            self.pto_graph.capture_begin(pool=self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            self.stream_ctx.__exit__(None, None, None)
            raise

    def __exit__(self, exc_type, exc_value, traceback) -> bool:
        try:
            if exc_type is None:
                self.pto_graph.capture_end()
            else:
                self.pto_graph._abort_capture()
        finally:
            self.stream_ctx.__exit__(exc_type, exc_value, traceback)
        return False


def _graphed_autograd_function(fwd_graph: PTOGraph, bwd_graph: PTOGraph, module_params: tuple,
                               len_user_args: int, output_spec: Any, static_inputs: tuple,
                               static_outputs: tuple, static_grad_outputs: tuple,
                               static_grad_inputs: tuple) -> Callable:
    class Graphed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            for i in range(len_user_args):
                if static_inputs[i].data_ptr() != inputs[i].data_ptr():
                    static_inputs[i].copy_(inputs[i])
            fwd_graph.replay()
            return tuple(o.detach() for o in static_outputs)

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, *grads):
            for static, grad in zip(static_grad_outputs, grads):
                if static is not None and static.data_ptr() != grad.data_ptr():
                    static.copy_(grad)
            bwd_graph.replay()
            return tuple(g.detach() if g is not None else None for g in static_grad_inputs)

    def functionalized(*user_args):
        flat = _pytree.arg_tree_leaves(*user_args)
        return _pytree.tree_unflatten(Graphed.apply(*(tuple(flat) + module_params)), output_spec)

    return functionalized


def make_graphed_callables(callables, sample_args, num_warmup_iters: int = 3,
                           allow_unused_input: bool = False, pool: tuple[int, int] | None = None):
    """Graphed versions of callables (functions or modules), forward and backward,
    as ``torch.cuda.make_graphed_callables``: each call replays the forward graph,
    its backward replays the backward graph. Several callables share one pool and
    must then run in the order given.
    """
    from pypto_torch import pto
    from pypto_torch.pto.streams import Stream

    just_one = not isinstance(callables, tuple)
    if just_one:
        callables, sample_args = (callables,), (sample_args,)
    flat_args = []
    for func, args in zip(callables, sample_args):
        if isinstance(func, torch.nn.Module):
            if func._backward_hooks or func._forward_hooks or func._forward_pre_hooks:
                raise RuntimeError("make_graphed_callables: modules must not have hooks registered when passed")
            if any(b.requires_grad for b in func.buffers()):
                raise RuntimeError("make_graphed_callables: only parameters may be trainable, not buffers")
        leaves = tuple(_pytree.arg_tree_leaves(*args))
        if not all(isinstance(leaf, torch.Tensor) for leaf in leaves):
            raise TypeError("make_graphed_callables: sample_args must contain only tensors")
        flat_args.append(leaves)
    module_params = [tuple(f.parameters()) if isinstance(f, torch.nn.Module) else () for f in callables]
    static_inputs = [flat + params for flat, params in zip(flat_args, module_params)]
    fwd_graphs = [PTOGraph() for _ in callables]
    bwd_graphs = [PTOGraph() for _ in callables]
    mempool = graph_pool_handle() if pool is None else pool

    def grads_of(outputs, inputs, grad_outputs):
        wanting = tuple(o for o in outputs if o.requires_grad)
        if not wanting:
            return None
        return torch.autograd.grad(wanting, tuple(i for i in inputs if i.requires_grad), grad_outputs,
                                   only_inputs=True, allow_unused=allow_unused_input)

    # Warm-up on a side stream, so that lazy initialisation stays out of the captures.
    pto.synchronize()
    with pto.stream(Stream()):
        for func, args, inputs in zip(callables, sample_args, static_inputs):
            for _ in range(num_warmup_iters):
                outputs = _pytree.tree_leaves(func(*args))
                grads_of(outputs, inputs, tuple(torch.empty_like(o) for o in outputs if o.requires_grad))
    pto.synchronize()

    static_outputs, output_specs = [], []
    for func, args, fwd_graph in zip(callables, sample_args, fwd_graphs):
        with graph(fwd_graph, pool=mempool):
            outputs = func(*args)
        flat, spec = _pytree.tree_flatten(outputs)
        static_outputs.append(tuple(flat))
        output_specs.append(spec)

    # Backward graphs in reverse order, as the live backward pass will run them.
    static_grad_outputs, static_grad_inputs = [], []
    for inputs, outputs, bwd_graph in zip(reversed(static_inputs), reversed(static_outputs), reversed(bwd_graphs)):
        grad_outputs = tuple(torch.empty_like(o) if o.requires_grad else None for o in outputs)
        grad_inputs = None
        if any(o.requires_grad for o in outputs):
            with graph(bwd_graph, pool=mempool):
                grad_inputs = grads_of(outputs, inputs, tuple(g for g in grad_outputs if g is not None))
        per_input, index = [], 0
        for tensor in inputs:
            if tensor.requires_grad and grad_inputs is not None:
                per_input.append(grad_inputs[index])
                index += 1
            else:
                per_input.append(None)
        static_grad_outputs.append(grad_outputs)
        static_grad_inputs.append(tuple(per_input))
    static_grad_outputs.reverse()
    static_grad_inputs.reverse()

    graphed_callables = []
    for i, func in enumerate(callables):
        graphed = _graphed_autograd_function(fwd_graphs[i], bwd_graphs[i], module_params[i], len(flat_args[i]),
                                             output_specs[i], static_inputs[i], static_outputs[i],
                                             static_grad_outputs[i], static_grad_inputs[i])
        if isinstance(func, torch.nn.Module):
            def forward(*user_args, _func=func, _graphed=graphed, _eager=func.forward, _training=func.training):
                return _graphed(*user_args) if _func.training == _training else _eager(*user_args)

            func.forward = forward
            graphed_callables.append(func)
        else:
            graphed_callables.append(graphed)
    return graphed_callables[0] if just_one else tuple(graphed_callables)


__all__ = ["PTOGraph", "graph", "graph_pool_handle", "is_current_stream_capturing", "make_graphed_callables"]
