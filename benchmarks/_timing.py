"""Helpers shared by the benchmarks: timing, plain-text tables, the header saying what a
benchmark runs on, time budgets, and the record of aims that `make bench` sums up."""

import contextlib
import importlib.metadata
import os
import platform
import re
import shutil
import tempfile
import time

import numpy as np
import torch

GiB = 2**30
YES, NO = "✓", "✗"


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


# The vector features that decide which kernels run: x86's SSE/AVX/AVX-512/AMX levels and
# the conversions bf16/fp16 GEMMs need; aarch64's NEON (asimd) and SVE.
VECTOR_FEATURES = ("sse4_2", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_bf16", "avx512_fp16",
                   "amx_tile", "amx_bf16", "asimd", "sve", "sve2", "bf16")

# What caps every side of a benchmark to one vector level on a host that has more: torch's
# own kernels, the oneDNN and MKL inside torch, and the pto kernels (oneDNN, MKL, Highway). The host's
# caches, memory and clock stay its own, so a capped run is an emulation of such a host.
ISA_CAPS = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
             "PTO_SIM_VECTOR_ISA": "avx2"},
}

# GEMM and vector-math libraries worth naming when loaded into this process (torch links
# its MKL and oneDNN statically: torch.__config__ names those).
_LIBRARIES = re.compile(r"lib(blis|dnnl|sleef|hwy)[^/]*\.so[.0-9]*$")


def _cpuinfo() -> tuple[str, set[str]]:
    """The CPU's model name and its feature flags, as /proc/cpuinfo lists them."""
    try:
        with open("/proc/cpuinfo") as info:
            lines = info.read().splitlines()
    except OSError:
        return platform.processor() or platform.machine(), set()
    model = next((l.split(":", 1)[1].strip() for l in lines if l.startswith(("model name", "Model"))),
                 platform.machine())
    flags = next((l.split(":", 1)[1].split() for l in lines if l.startswith(("flags", "Features"))), [])
    return model, set(flags)


def isa_cap() -> str | None:
    """The ISA_CAPS entry whose every variable this process's environment sets (None: no cap)."""
    return next((name for name, variables in ISA_CAPS.items()
                 if all(os.environ.get(k) == v for k, v in variables.items())), None)


def _cap_variables() -> list[str]:
    names = sorted({k for variables in ISA_CAPS.values() for k in variables})
    return [f"{k}={os.environ[k]}" for k in names if k in os.environ]


def pto_vector_isa() -> str:
    """The vector target the pto kernels run with, as the device reports it."""
    return str(getattr(torch.pto.get_device_properties(0), "vector_isa", "unknown"))


def _gemm_libraries() -> str:
    """torch's BLAS (from its build configuration), pto's MKL (linked into pypto_torch._C:
    mkl-static's version, cmake/mkl.cmake) and the GEMM and vector-math libraries this
    process has loaded (pto's oneDNN among them)."""
    config = torch.__config__.show()
    torch_side = []
    for name, pattern in (("MKL", r"Math Kernel Library Version ([\d.]+)"), ("oneDNN", r"MKL-DNN (v[\d.]+)")):
        found = re.search(pattern, config)
        if found:
            torch_side.append(f"{name} {found.group(1)}")
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if _LIBRARIES.search(line.strip())}
    except OSError:
        paths = set()
    loaded = [os.path.basename(path) for path in sorted(paths)]
    try:
        pto_mkl = f"MKL {importlib.metadata.version('mkl-static')} (static, sequential, its symbols local)"
    except importlib.metadata.PackageNotFoundError:
        pto_mkl = "MKL (static; mkl-static's version unknown)"
    return (f"torch: {', '.join(torch_side) or 'its own'}; pto: {pto_mkl}; "
            f"loaded: {', '.join(loaded) or 'none of these'}")


def cpu_gemm_slow_path(dtype: torch.dtype) -> str | None:
    """Why torch's CPU GEMM of `dtype` has no fast path on this host, None where it has one:
    its bfloat16 and float16 GEMMs are fast only with AVX-512 and the matching conversion
    or AMX instructions; without them they run a scalar path at a few GFLOP/s."""
    needs = {torch.bfloat16: ("avx512_bf16", "amx_bf16"), torch.float16: ("avx512_fp16", "amx_fp16")}.get(dtype)
    if needs is None:
        return None
    capability = torch.backends.cpu.get_cpu_capability()
    onednn = os.environ.get("ONEDNN_MAX_CPU_ISA", "ALL").upper()
    if "AVX512" in capability and set(needs) & _cpuinfo()[1] and onednn.startswith(("ALL", "AVX512", "AVX10")):
        return None
    return (f"torch's CPU {str(dtype).removeprefix('torch.')} GEMM has no fast path here "
            f"(capability {capability}, oneDNN max ISA {onednn}, needs AVX-512 with {' or '.join(needs)})")


def host_description() -> list[str]:
    """What the host is, a line each: the CPU, its vector features, the cap the environment
    sets on them."""
    model, flags = _cpuinfo()
    lines = [f"{model}, {platform.machine()}",
             f"vector features: {' '.join(f for f in VECTOR_FEATURES if f in flags) or 'none listed'}"]
    cap, variables = isa_cap(), ", ".join(_cap_variables())
    if cap:
        lines.append(f"capped to {cap.upper()} by environment ({variables}): an emulation of an {cap.upper()}-only "
                     f"host, with this host's caches, memory and clock")
    elif variables:
        lines.append(f"partly capped by environment: {variables}")
    return lines


def context_header(title: str, quick: bool) -> None:
    """Print the benchmark's title and what it runs on: versions, CPU and its vector features,
    the kernels torch and pto chose, cores, threads, the pto device."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(title + (" (--quick)" if quick else ""))
    print(f"  torch {torch.__version__}, numpy {np.__version__}, python {platform.python_version()}")
    print("\n".join(f"  {line}" for line in host_description()))
    print(f"  kernels: torch CPU capability {torch.backends.cpu.get_cpu_capability()}, "
          f"pto vector target {pto_vector_isa()}")
    print(f"  GEMM and vector libraries: {_gemm_libraries()}")
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
    workers spin for ~8 ms."""
    deadline = time.perf_counter() + max_wait
    while time.perf_counter() < deadline:
        cpu = time.process_time()
        time.sleep(step)
        if time.process_time() - cpu < 0.1 * step:
            return


# After a pause, this machine's cores run the next few tens of milliseconds of work up to twice
# slower: measured after 0.3 s idle, a 16M-float add took 15, 6.5, 6.2, 5.0, 4.3 ... ms, reaching
# its 3.4 ms after ~40 ms, on the CPU and on pto alike (the host's power management). A
# repetition timed straight after settle() would time that ramp.
RAMP_UP_SECONDS = 0.05


def settle_and_warm(run) -> None:
    """Make ready to time run(): wait until this process's threads stopped spinning
    (settle()), then bring the cores back up to speed with run() repeated untimed for
    RAMP_UP_SECONDS."""
    settle()
    ramp_end = time.perf_counter() + RAMP_UP_SECONDS
    run()
    while time.perf_counter() < ramp_end:
        run()


class Budget:
    """A benchmark script's time budget. `make bench` (benchmarks/run_all.py) gives each script
    its share of the whole run in PTO_BENCH_BUDGET_S; run alone, a script has `default` seconds.
    A script checks it between cases and skips, saying so, what no longer fits."""

    def __init__(self, default: float):
        self.seconds = float(os.environ.get("PTO_BENCH_BUDGET_S", default))
        self.start = time.perf_counter()

    def spent(self) -> float:
        return time.perf_counter() - self.start

    def left(self) -> float:
        return self.seconds - self.spent()

    def exhausted(self) -> bool:
        return self.left() <= 0

    def skipped(self, what: str) -> str:
        return f"skipped: {what} (time budget of {self.seconds:.0f} s spent)"


class Aims:
    """The record of every aim a benchmark checks. Each check gives the mark of a table row
    (judged on the figure as printed) and a line for the closing summary; under `make bench`
    the lines are appended to the file PTO_BENCH_AIMS names, for run_all.py's summary of the
    whole run. `what` says what was measured, its figure and the aim: "exp out=: pto/CPU
    time 0.95 (aim <= 1)"."""

    def __init__(self, script: str):
        self.script = script
        self.checked = 0
        self.missed: list[str] = []

    def aim(self, met: bool | None, what: str) -> str:
        """The mark of a row (None: not measured, nothing recorded)."""
        if met is None:
            return "?"
        mark = YES if met else NO
        self.checked += 1
        if not met:
            self.missed.append(what)
        self._record(mark, what)
        return mark

    def note(self, what: str) -> str:
        """Record a line the summary repeats under the aims (a capped or skipped measurement)."""
        self._record("note", what)
        return what

    def _record(self, kind: str, what: str) -> None:
        path = os.environ.get("PTO_BENCH_AIMS")
        if path:
            with open(path, "a", encoding="utf-8") as aims:
                aims.write(f"{self.script}\t{kind}\t{what}\n")


@contextlib.contextmanager
def fresh_cache(variable: str):
    """A fresh, empty folder in the environment variable `variable` (a compiler's cache folder)
    for the duration, removed after: every compile is cold, none reads an earlier run's cache."""
    folder = tempfile.mkdtemp(prefix=f"bench_{variable.lower()}_")
    before = os.environ.get(variable)
    os.environ[variable] = folder
    try:
        yield folder
    finally:
        if before is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = before
        shutil.rmtree(folder, ignore_errors=True)


def fresh_inductor_cache():
    """Inductor's caches in a fresh folder for the duration (set before its first compile)."""
    return fresh_cache("TORCHINDUCTOR_CACHE_DIR")


def fell_back_since(fallbacks_before: dict) -> dict:
    """The ops that went through the CPU fallback since `fallbacks_before`, with their call counts."""
    import pypto_torch

    return {op: calls - fallbacks_before.get(op, 0) for op, calls in pypto_torch.fallback_ops().items()
            if calls > fallbacks_before.get(op, 0)}


def print_closing_summary(fallbacks_before: dict, aims: Aims, start: float, whole_run: "OtherLoad",
                          fallback_label: str = "ops that went through the CPU fallback") -> None:
    """The tail every op benchmark prints: what fell back during the run, which aims
    were met and missed, and how long the run took under how much other load."""
    print(f"\n{fallback_label}: {fell_back_since(fallbacks_before) or 'none'}")
    print(f"aims met: {aims.checked - len(aims.missed)} of {aims.checked}; missed:")
    print("\n".join(f"  {NO} {what}" for what in aims.missed) or "  none")
    print(f"\ntotal time {time.perf_counter() - start:.1f} s; {whole_run.describe()}")
