"""pto tensors sent to other processes, by their memory, as torch sends CUDA tensors.

``torch.multiprocessing`` (Queues, Pipes, DataLoader workers) pickles a pto tensor as
an inter-process handle of the device allocation holding its storage
(``ptoIpcGetMemHandle``): the receiver maps the same memory, so writes on either side
are seen by the other, as with CUDA IPC. Before the handle leaves, all work this
process queued on the tensor's device has run (a device synchronize, where CUDA records
an event on the current stream): the receiver reads what was written.

The sender keeps the storage alive while a receiver may still use it, as torch's
``CudaIPCSentData`` does: each send carries a counter in shared CPU memory, which the
receiver sets to its pid once it has opened the memory and to 0 when its storage is
gone. A storage whose receivers are done, or have exited, is let go at the next send or
at ``torch.pto.ipc_collect()``.

As with CUDA, the receiver must not be forked from a process whose device had started
(the runtime refuses such a child): use the 'spawn' or 'forkserver' start method, also
for ``DataLoader(..., multiprocessing_context="spawn")`` workers that make pto tensors.
Storages themselves are not sent, as torch refuses CUDA storages: send a tensor.

A ``multiprocessing`` Queue pickles in a feeder thread, where a failure is only
printed, the item dropped and the receiver left waiting for ever. So ``Queue.put`` of
an item holding a pto tensor pickles it at once, on the caller's thread: a failure
(a driver that cannot share memory) raises there, and the device work the item's
tensors wait for is that queued before ``put``.
"""

import multiprocessing.queues
import os
import threading
from multiprocessing.reduction import ForkingPickler

import torch
from torch.multiprocessing import reductions

from pypto_torch import _C

# A send's counter: sent and not yet opened; otherwise the receiver's pid, or 0 (released).
_IN_FLIGHT = -1
_RELEASED = 0

# What this process sent and keeps alive: (storage, its send's counter). Sends and
# collections come from any thread (a Pipe's sender, a Queue's put).
_sent: list[tuple[torch.UntypedStorage, torch.Tensor]] = []
_sent_lock = threading.Lock()


def _receiver_done(counter: torch.Tensor) -> bool:
    state = int(counter.item())
    if state == _RELEASED:
        return True
    if state == _IN_FLIGHT:
        return False
    try:
        os.kill(state, 0)
    except ProcessLookupError:
        return True  # the receiver exited: its mapping went with it
    except PermissionError:
        return False  # alive, under another user
    return False


def ipc_collect() -> None:
    """Lets go of the storages sent to processes that no longer use them (torch.cuda.ipc_collect)."""
    with _sent_lock:
        _sent[:] = [entry for entry in _sent if not _receiver_done(entry[1])]


def _rebuild_pto_tensor(tensor_cls, size, stride, storage_offset, dtype, requires_grad, device, handle,
                        storage_offset_bytes, storage_nbytes, counter):
    if handle is None:
        storage = torch.UntypedStorage(0, device=torch.device("pto", device))
    else:
        key = (handle, storage_offset_bytes)
        storage = reductions.storage_from_cache(torch.UntypedStorage, key)
        if storage is None:
            storage = _C._open_shared_storage(device, handle, storage_offset_bytes, storage_nbytes,
                                              counter).untyped_storage()
            reductions.shared_cache[key] = reductions.StorageWeakRef(storage)
        else:
            counter.fill_(_RELEASED)  # this process holds the storage already, by an earlier send
    typed = torch.storage.TypedStorage(wrap_storage=storage, dtype=dtype, _internal=True)
    tensor = torch._utils._rebuild_tensor(typed, storage_offset, size, stride)
    if tensor_cls == torch.nn.parameter.Parameter:
        # As torch's rebuild: an integer Parameter must get requires_grad=False in its constructor.
        return torch.nn.parameter.Parameter(tensor, requires_grad=requires_grad)
    tensor.requires_grad = requires_grad
    return tensor


def _share(storage: torch.UntypedStorage, device: int):
    """(handle, offset of the storage in its allocation, a counter) for one send; all None when empty."""
    if storage.nbytes() == 0:
        return None, None, None
    storage_bytes = torch.empty(0, dtype=torch.uint8, device=torch.device("pto", device)).set_(storage)
    handle, offset = _C._share_storage(storage_bytes)
    counter = torch.full((1,), _IN_FLIGHT, dtype=torch.int32).share_memory_()
    ipc_collect()
    with _sent_lock:
        _sent.append((storage, counter))
    return handle, offset, counter


def _reduce_pto_tensor(tensor: torch.Tensor):
    if tensor.requires_grad and not tensor.is_leaf:
        return reductions.reduce_tensor(tensor)  # torch's own refusal
    storage = tensor.untyped_storage()
    device = tensor.device.index
    handle, offset, counter = _share(storage, device)
    return (_rebuild_pto_tensor, (type(tensor), tensor.size(), tensor.stride(), tensor.storage_offset(),
                                  tensor.dtype, tensor.requires_grad, device, handle, offset, storage.nbytes(),
                                  counter))


def _reduce_tensor(tensor: torch.Tensor):
    if tensor.device.type == "pto":
        return _reduce_pto_tensor(tensor)
    return reductions.reduce_tensor(tensor)


def _reduce_storage(storage: torch.UntypedStorage):
    if storage.device.type == "pto":
        raise RuntimeError("Cannot pickle pto storage; try pickling a pto tensor instead")
    return reductions.reduce_storage(storage)


# How deep put() looks into lists, tuples and dicts for a pto tensor (or storage).
_SEARCH_DEPTH = 4


def _holds_pto_tensor(value, depth: int = _SEARCH_DEPTH) -> bool:
    if isinstance(value, (torch.Tensor, torch.UntypedStorage, torch.TypedStorage)):
        return value.device.type == "pto"
    if depth == 0:
        return False
    if isinstance(value, dict):
        return any(_holds_pto_tensor(v, depth - 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_pto_tensor(v, depth - 1) for v in value)
    return False


class _Pickled:
    """An item Queue.put pickled already; the feeder thread sends its bytes."""

    def __init__(self, payload: bytes):
        self.payload = payload

    def __reduce__(self):
        return (ForkingPickler.loads, (self.payload,))


def _pickling_put(put):
    def pickled_put(self, obj, *args, **kwargs):
        if _holds_pto_tensor(obj):
            obj = _Pickled(bytes(ForkingPickler.dumps(obj)))
        return put(self, obj, *args, **kwargs)

    return pickled_put


def register() -> None:
    """Installs the pto reductions (torch's own stay underneath, for other devices)."""
    ForkingPickler.register(torch.Tensor, _reduce_tensor)
    ForkingPickler.register(torch.nn.parameter.Parameter, _reduce_tensor)
    ForkingPickler.register(torch.UntypedStorage, _reduce_storage)
    for queue in (multiprocessing.queues.Queue, multiprocessing.queues.JoinableQueue):  # each has its put
        queue.put = _pickling_put(queue.put)
