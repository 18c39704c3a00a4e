"""Helpers shared by the benchmarks: timing, plain-text tables, the machine context header."""

import os
import platform
import time

import numpy as np
import torch

GiB = 2**30


def best_time(fn, reps: int, warmup: int = 1) -> float:
    """Smallest wall time of `reps` calls of fn() (after `warmup` untimed calls)."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def table(title: str, header: list[str], rows: list[list[str]], text_columns: int = 1) -> None:
    """Print rows under header: the first `text_columns` left-aligned, the rest right-aligned."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    line = "  ".join("-" * w for w in widths)

    def fmt(cells):
        return "  ".join(str(c).ljust(w) if i < text_columns else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    print(f"\n{title}\n{line}\n{fmt(header)}\n{line}")
    for row in rows:
        print(fmt(row))
    print(line)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            lines = info.read().splitlines()
    except OSError:
        return platform.processor() or platform.machine()
    model = next((l.split(":", 1)[1].strip() for l in lines if l.startswith("model name")), platform.machine())
    flags = next((l.split(":", 1)[1].split() for l in lines if l.startswith("flags")), [])
    simd = [f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    return f"{model} ({', '.join(simd) or 'no AVX'})"


def context_header(title: str, quick: bool) -> None:
    """Print the benchmark's title and what it runs on: versions, cores, threads, the pto device."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(title + (" (--quick)" if quick else ""))
    print(f"  torch {torch.__version__}, numpy {np.__version__}, python {platform.python_version()}")
    print(f"  {_cpu_model()}, {platform.machine()}")
    load = f", load average {os.getloadavg()[0]:.2f} (1 min)" if hasattr(os, "getloadavg") else ""
    print(f"  nproc {affinity} (cpu_count {os.cpu_count()}), torch threads {torch.get_num_threads()}{load}")
    _, total = torch.pto.mem_get_info()
    print(f"  {torch.pto.get_device_name()}: {torch.pto.device_count()} device(s), "
          f"{total / GiB:.1f} GiB each; CPU fallback silenced")


class OtherLoad:
    """How many cores other processes (and the hypervisor, as steal time) kept busy since
    the start: /proc/stat's busy time of the machine less this process's own CPU time."""

    # os.times() fields counted as this process's own: its user and system time
    # (a subclass adds its reaped children's).
    OWN_TIMES = 2

    def __init__(self):
        self.start = self._snapshot()

    def _snapshot(self):
        try:
            with open("/proc/stat") as stat:
                fields = [int(v) for v in stat.readline().split()[1:9]]
        except (OSError, ValueError):
            return None
        # user nice system idle iowait irq softirq steal: all but idle and iowait are busy
        busy = (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")
        own = sum(os.times()[:self.OWN_TIMES])
        return time.perf_counter(), busy, own

    def cores(self) -> float | None:
        """Average number of cores busy with other work since the start (None where unknown)."""
        end = self._snapshot()
        if end is None or self.start is None or end[0] <= self.start[0]:
            return None
        return max(0.0, ((end[1] - self.start[1]) - (end[2] - self.start[2])) / (end[0] - self.start[0]))

    def describe(self) -> str:
        cores = self.cores()
        if cores is None:
            return "other load unknown"
        warning = " -- other work competed for the cores, figures are noisy" if cores > 0.1 else ""
        return f"other processes kept {cores:.2f} cores busy on average{warning}"


def settle(max_wait: float = 0.3, step: float = 0.005) -> None:
    """Wait (at most max_wait seconds) until this process's own threads stop spinning, so
    they take no core from the next measurement: after a parallel region torch's OpenMP
    workers spin for ~8 ms, OpenBLAS's workers after a GEMM for ~100 ms."""
    deadline = time.perf_counter() + max_wait
    while time.perf_counter() < deadline:
        cpu = time.process_time()
        time.sleep(step)
        if time.process_time() - cpu < 0.1 * step:
            return


def print_closing_summary(fallbacks_before: dict, checked: int, missed: list, start: float, whole_run: "OtherLoad",
                          fallback_label: str = "ops that went through the CPU fallback") -> None:
    """The tail every op benchmark prints: what fell back during the run, which aims
    were met and missed, and how long the run took under how much other load."""
    import pypto_torch

    fell_back = {op: calls - fallbacks_before.get(op, 0) for op, calls in pypto_torch.fallback_ops().items()
                 if calls > fallbacks_before.get(op, 0)}
    print(f"\n{fallback_label}: {fell_back or 'none'}")
    print(f"aims met: {checked - len(missed)} of {checked}; missed:")
    print("\n".join(f"  ✗ {what}" for what in missed) or "  none")
    print(f"\ntotal time {time.perf_counter() - start:.1f} s; {whole_run.describe()}")
