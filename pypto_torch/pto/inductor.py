"""What Inductor, torch.compile's default backend, finds for the pto device.

Inductor looks up a PrivateUse1 device's code generators on its module
(``torch.pto.Scheduling``, ``PythonWrapperCodegen``, ``CppWrapperCodegen``,
``WrapperFxCodegen``) when it first compiles, and registers what it finds. The first
lookup registers pto's backend itself (pypto_torch.compile.inductor.register), with what
the lookup cannot carry (the device's cache-key pass, the device op overrides); pto
has no C++ or FX wrapper to offer, so Inductor then keeps that registration. Resolving
the names on first lookup keeps Inductor (seconds to import) out of ``import
pypto_torch``.
"""
import importlib

CODEGEN_NAMES = ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen")


def codegen(name: str):
    inductor = importlib.import_module("pypto_torch.compile.inductor")
    inductor.register()
    if name == "Scheduling":
        return inductor.PTOScheduling
    if name == "PythonWrapperCodegen":
        return inductor.PTOWrapperCodegen
    raise AttributeError(f"torch.pto has no {name}: pto's Inductor kernels are launched from a Python wrapper")
