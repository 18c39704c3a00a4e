"""The seed-style softmax of issue 5, exactly as written there, then the same code on the
CPU (pypto.Context(device_type="cpu")) on the same data, checked to give the same numbers.

Run: python examples/seed_softmax.py   (writes trace.html in the current directory)
"""

import pypto_torch as pypto
import numpy as np

x = pypto.randn(1024, 1024)            # lives on the PTO device
print(x.shape, x.device)               # ... pto:0
y = pypto.exp(x); z = pypto.log(x + 1e-6); w = x + y - z * 0.5
c = pypto.matmul(pypto.randn(512, 256), pypto.randn(256, 512))
s = pypto.reduce_sum(x, axis=1); m = pypto.reduce_max(x, axis=0)

def softmax_pypto(x, axis=-1):
    x_max = pypto.reduce_max(x, axis=axis, keepdims=True)
    e = pypto.exp(x - x_max)
    return e / pypto.reduce_sum(e, axis=axis, keepdims=True)

@pypto.kernel                          # compiled into one PTO program (one tsoftmax)
def fused_softmax(x):
    return softmax_pypto(x)

with pypto.Profiler() as prof:
    out = fused_softmax(x); pypto.synchronize()
print(prof.report())
prof.visualize("trace.html")

# ---- The same code on the CPU, on the same data: debug on the CPU, accelerate on the device.
import torch  # noqa: E402

a, b = pypto.randn(512, 256), pypto.randn(256, 512)
c = pypto.matmul(a, b)
on_device = {"y": y, "z": z, "w": w, "c": c, "s": s, "m": m, "out": out, "eager softmax": softmax_pypto(x)}

with pypto.Context(device_type="cpu"):
    x_cpu, a_cpu, b_cpu = pypto.from_torch(x), pypto.from_torch(a), pypto.from_torch(b)  # copies to the CPU
    y = pypto.exp(x_cpu); z = pypto.log(x_cpu + 1e-6); w = x_cpu + y - z * 0.5
    c = pypto.matmul(a_cpu, b_cpu)
    s = pypto.reduce_sum(x_cpu, axis=1); m = pypto.reduce_max(x_cpu, axis=0)
    out = fused_softmax(x_cpu)
    on_cpu = {"y": y, "z": z, "w": w, "c": c, "s": s, "m": m, "out": out, "eager softmax": softmax_pypto(x_cpu)}

for name, value in on_device.items():
    assert value.device.type == "pto" and on_cpu[name].device.type == "cpu", name
    atol = 1e-4 if name == "c" else 1e-5  # a 256-long dot product: the GEMMs sum in different orders
    torch.testing.assert_close(pypto.to_numpy(value), pypto.to_numpy(on_cpu[name]), equal_nan=True,
                               rtol=1e-5, atol=atol, msg=lambda text: f"{name}: {text}")
torch.testing.assert_close(pypto.to_numpy(on_device["out"]), torch.softmax(x.cpu(), -1).numpy())
print("the same numbers on pto and on the CPU:", ", ".join(on_device))
