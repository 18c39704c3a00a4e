"""Inductor's Python wrapper for pto: torch's own, with the Inductor program loader imported
and the device's guard and stream calls (the device op overrides)."""
from __future__ import annotations

from torch._inductor.codegen.common import DeviceOpOverrides
from torch._inductor.codegen.wrapper import PythonWrapperCodegen


class PTOWrapperCodegen(PythonWrapperCodegen):
    @staticmethod
    def create(is_subgraph: bool, subgraph_name: str | None, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            raise NotImplementedError("pto's Inductor backend has no subgraph wrappers (control flow) yet")
        return PTOWrapperCodegen()

    def write_header(self) -> None:
        super().write_header()
        self.imports.writeline("from pypto_torch.compile.inductor.launch import InductorProgram")


class RefusedWrapperCodegen:
    """The C++ and FX wrappers (cpp_wrapper, AOTInductor): pto's programs are launched
    from Python."""
    supports_caching = False

    @staticmethod
    def create(*args, **kwargs):
        raise RuntimeError("pto's Inductor backend generates a Python wrapper only: "
                           "torch._inductor.config.cpp_wrapper (and AOTInductor) is not available for pto")


class PTODeviceOpOverrides(DeviceOpOverrides):
    def import_get_raw_stream_as(self, name: str) -> str:
        return f"from pypto_torch.compile.inductor.launch import current_stream_id as {name}"

    def set_device(self, device_idx: int) -> str:
        return f"torch.pto.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.pto.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.pto.device({device_idx})"
