"""pto tensors and other processes.

pto device memory cannot be handed to another process yet (no IPC handles), so
sending a pto tensor through ``torch.multiprocessing`` must fail where the user
sends it. A ``multiprocessing`` Queue pickles in a feeder thread: there a failure
is only printed, the item is dropped and the consumer waits for ever. So the
Queue's ``put`` checks its item first, and pickling a pto tensor (a Pipe, a
SimpleQueue, ``Queue.put`` of a tensor inside some other object) raises the same
clear error instead of torch's "_share_fd_: only available on CPU".
"""

import multiprocessing.queues
from multiprocessing.reduction import ForkingPickler

import torch
from torch.multiprocessing import reductions

_CANNOT_SHARE = (
    "a pto tensor cannot be sent to another process: pto device memory has no "
    "inter-process handles yet. Send tensor.cpu() and move it to pto in the receiver."
)

# How deep put() looks into lists, tuples and dicts for a pto tensor.
_SEARCH_DEPTH = 4


def _holds_pto_tensor(value, depth: int = _SEARCH_DEPTH) -> bool:
    if isinstance(value, torch.Tensor):
        return value.device.type == "pto"
    if depth == 0:
        return False
    if isinstance(value, dict):
        return any(_holds_pto_tensor(v, depth - 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_pto_tensor(v, depth - 1) for v in value)
    return False


def _reducer(torch_reduce):
    def reduce(tensor):
        if tensor.device.type == "pto":
            raise RuntimeError(_CANNOT_SHARE)
        return torch_reduce(tensor)

    return reduce


def _checked_put(put):
    def checked(self, obj, *args, **kwargs):
        if _holds_pto_tensor(obj):
            raise RuntimeError(_CANNOT_SHARE)
        return put(self, obj, *args, **kwargs)

    return checked


def register() -> None:
    """Installs the checks (torch's own reducers stay underneath, for other devices)."""
    ForkingPickler.register(torch.Tensor, _reducer(reductions.reduce_tensor))
    ForkingPickler.register(torch.nn.parameter.Parameter, _reducer(reductions.reduce_tensor))
    multiprocessing.queues.Queue.put = _checked_put(multiprocessing.queues.Queue.put)
