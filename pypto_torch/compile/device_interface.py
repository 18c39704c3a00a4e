"""Dynamo's view of the pto device (``torch._dynamo.device_interface``): how it asks
for the current device and stream, synchronises, and sees what the device is."""
from __future__ import annotations

import torch
from torch._dynamo.device_interface import DeviceInterface


class PtoInterface(DeviceInterface):
    device = torch.pto.device
    Event = torch.Event
    Stream = torch.Stream

    class Worker:
        @staticmethod
        def set_device(device: int) -> None:
            torch.pto.set_device(device)

        @staticmethod
        def current_device() -> int:
            return torch.pto.current_device()

        @staticmethod
        def get_device_properties(device=None):
            return torch.pto.get_device_properties(device)

    current_device = staticmethod(torch.pto.current_device)
    set_device = staticmethod(torch.pto.set_device)
    device_count = staticmethod(torch.pto.device_count)
    is_available = staticmethod(torch.pto.is_available)
    stream = staticmethod(torch.pto.stream)
    current_stream = staticmethod(torch.pto.current_stream)
    set_stream = staticmethod(torch.pto.set_stream)
    synchronize = staticmethod(torch.pto.synchronize)

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        return PtoInterface.exchange_device(device)

    @staticmethod
    def exchange_device(device: int) -> int:
        previous = torch.pto.current_device()
        if device >= 0 and device != previous:
            torch.pto.set_device(device)
        return previous

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        torch.pto.set_stream(torch.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type))

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return torch.pto.current_stream(device_idx).stream_id

    @staticmethod
    def get_compute_capability(device=None):
        major, minor = torch.pto.get_device_capability(device)
        return f"pto{major}.{minor}"

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return torch.pto.is_bf16_supported(including_emulation)

    @staticmethod
    def memory_allocated(device=None) -> int:
        return torch.pto.memory_allocated(device)
