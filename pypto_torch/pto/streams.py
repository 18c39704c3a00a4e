"""Streams and events of the pto devices, as ``torch.cuda.Stream``/``Event`` are."""

from typing import Any

import torch

from pypto_torch import _C


def _device(device: Any) -> torch.device:
    from pypto_torch.pto import _device_index

    return torch.device("pto", _device_index(device))


class Stream(torch.Stream):
    """A pto stream: an in-order queue executed by its own worker, from the device's pool."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs):
        if "stream_id" in kwargs:  # rebuilding a known stream (see _wrap)
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=_device(device), priority=priority)

    def __repr__(self) -> str:
        return f"<torch.pto.Stream device={self.device} id={self.stream_id}>"


class ExternalStream(Stream):
    """A stream the runtime made outside torch (``ptoStreamCreate``, by another library),
    as ``torch.cuda.ExternalStream``: ``stream_ptr`` is its handle as an int, ``device``
    the pto device it was made on (default: the current one). torch orders work on it
    and never destroys it: its maker keeps it alive while torch uses it."""

    def __new__(cls, stream_ptr: int, device: Any = None):
        index = _device(device).index
        return super().__new__(cls, stream_id=_C._external_stream_id(stream_ptr, index), device_index=index,
                               device_type=current_stream(index).device_type)


def get_stream_from_external(data_ptr: int, device: Any = None) -> ExternalStream:
    """The stream another library made with the runtime, by its handle (as torch.cuda's)."""
    return ExternalStream(data_ptr, device)


class Event:
    """A pto event: ``torch.pto.Event(enable_timing=True)`` is a ``torch.Event`` on pto.

    It makes plain ``torch.Event`` objects, since torch's event methods accept no
    subclass. pto events always record their completion time.
    """

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                device: Any = None) -> torch.Event:
        return torch.Event(device=_device(device), enable_timing=enable_timing, blocking=blocking,
                           interprocess=interprocess)


def _wrap(stream: torch.Stream) -> Stream:
    # torch.Stream's constructor called directly, without Stream.__new__'s Python frame.
    return torch.Stream.__new__(Stream, stream_id=stream.stream_id, device_index=stream.device_index,
                                device_type=stream.device_type)


def current_stream(device: Any = None) -> Stream:
    if device is None:
        # The common call, straight to the current device's stream: ~2.5 us, where the
        # general path below (a torch.device built and torch.accelerator's checks of it) took ~11.
        return _wrap(torch._C._accelerator_getStream(_C._current_device()))
    return _wrap(torch.accelerator.current_stream(_device(device)))


def default_stream(device: Any = None) -> Stream:
    index = _device(device).index
    # The device type is every pto stream's: the current one's gives it at the least cost.
    return torch.Stream.__new__(Stream, stream_id=0, device_index=index, device_type=current_stream().device_type)


def set_stream(stream: torch.Stream) -> None:
    torch.accelerator.set_stream(stream)


class stream:
    """Context manager that makes `stream` current on its device (None: no-op); as
    torch.cuda.stream, the current device is the stream's inside and is restored after."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream
        self.previous: torch.Stream | None = None
        self.previous_on_current_device: torch.Stream | None = None

    def __enter__(self):
        if self.stream is not None:
            self.previous_on_current_device = torch.accelerator.current_stream()
            self.previous = torch.accelerator.current_stream(self.stream.device)
            torch.accelerator.set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc_info):
        if self.previous is not None:
            torch.accelerator.set_stream(self.previous)
            # Setting a stream makes its device current: the caller's device comes back last.
            torch.accelerator.set_stream(self.previous_on_current_device)
        return False
