"""What Inductor, torch.compile's default backend, finds for the pto device.

Inductor asks a PrivateUse1 device's module for its code generators
(``torch.pto.Scheduling``, ``PythonWrapperCodegen``, ``CppWrapperCodegen``).
Inductor writes Triton or C++ kernels that touch memory directly, and PTO code
reaches the device only through the runtime, so pto has none: these stand-ins
fail the first time Inductor consults them, before it lowers anything, with an
error that names the backend that compiles for pto.
"""

MESSAGE = ('torch.compile\'s default backend (Inductor) cannot generate code for the pto device: '
           'use torch.compile(model, backend="pypto"), which compiles the graph into PTO programs')


class _NoCodegen(type):
    def __getattr__(cls, name: str):
        raise RuntimeError(MESSAGE)


class Scheduling(metaclass=_NoCodegen):
    def __init__(self, *args, **kwargs):
        raise RuntimeError(MESSAGE)


PythonWrapperCodegen = Scheduling
CppWrapperCodegen = Scheduling
WrapperFxCodegen = Scheduling
