"""The seed-style softmax three ways, side by side in one run: @pypto.kernel (one fused
PTO program), the same Python function run eagerly on pto (five instructions, five
passes over memory), and torch.softmax on the CPU (PyTorch's own fused kernel).

    python benchmarks/bench_pypto.py [--quick]
"""
import sys

import torch

import pypto_torch as pypto
from _timing import Aims, OtherLoad, best_time, context_header, table


def softmax_pypto(x, axis=-1):
    x_max = pypto.reduce_max(x, axis=axis, keepdims=True)
    e = pypto.exp(x - x_max)
    return e / pypto.reduce_sum(e, axis=axis, keepdims=True)


@pypto.kernel
def fused_softmax(x):
    return softmax_pypto(x)


def on_device(fn, x):
    def run():
        fn(x)
        pypto.synchronize()
    return run


def main() -> None:
    quick = "--quick" in sys.argv
    pypto.set_fallback_mode("silent")
    context_header("pypto softmax: @pypto.kernel vs eager pypto vs torch.softmax", quick)
    load = OtherLoad()
    aims = Aims("bench_pypto")
    rows = []
    for n, reps, warmup in ((1024, 5 if quick else 50, 30), (4096, 3 if quick else 10, 3)):
        x = pypto.randn(n, n)
        x_cpu = torch.from_numpy(pypto.to_numpy(x))
        torch.testing.assert_close(fused_softmax(x), softmax_pypto(x))
        # Untimed calls first: the device's first few dozen calls on new buffers are slower.
        kernel_s = best_time(on_device(fused_softmax, x), reps, warmup)
        eager_s = best_time(on_device(softmax_pypto, x), reps, warmup)
        cpu_s = best_time(lambda: torch.softmax(x_cpu, -1), reps, warmup)
        rows.append([f"{n}x{n} float32", f"{kernel_s * 1e3:.2f}", f"{eager_s * 1e3:.2f}", f"{cpu_s * 1e3:.2f}",
                     f"{kernel_s / cpu_s:.2f}",
                     aims.aim(round(kernel_s / cpu_s, 2) <= 1.0,
                              f"@pypto.kernel softmax {n}x{n}: time over torch.softmax's {kernel_s / cpu_s:.2f} "
                              f"(aim <= 1)"),
                     f"{eager_s / kernel_s:.2f}"])
    table("Time per call, ms (best of 50 at 1024, of 10 at 4096; pto calls waited for)",
          ["shape", "@pypto.kernel", "eager pypto", "torch.softmax CPU", "kernel/torch", "<=1", "eager/kernel"], rows)
    print(load.describe())


if __name__ == "__main__":
    main()
