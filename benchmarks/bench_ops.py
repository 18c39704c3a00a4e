"""Aten ops on the pto device, side by side with the same ops on the CPU.

    python3 benchmarks/bench_ops.py [--quick]

Ten measurements, each printed as a plain-text table with a column saying whether
the aim is met (✓) or not (✗):
  1. large elementwise ops on 16M float32: time vs CPU (aim <= 1.0) and achieved
     bandwidth vs a STREAM-style copy measured in the same run (aim >= 80%, add >= 85%);
  2. reductions of a 4096x4096 float32 over rows and columns: time vs CPU (aim <= 1.0)
     and bandwidth vs that copy (aim >= 80%);
  3. matmul, float32 and bfloat16, square sizes and transformer layers' shapes: GFLOP/s
     vs CPU (aim >= 1.0);
  4. softmax and layer_norm of a 4096x4096 float32: time vs CPU (aim <= 1.0);
  5. eager overhead of small ops on 64-element tensors: us/op vs CPU (aim <= 3);
  6. random draws filling 16M float32 (normal_, uniform_, exponential_, bernoulli_, dropout, random_)
     and a multinomial: time vs CPU (aim <= 1.0; the generators differ, the work is the same);
  7. conv2d (a ResNet-style 3x3 layer), float32 and bfloat16, NCHW and channels_last,
     forward and forward + backward: time vs CPU's oneDNN (aim <= 1.0);
  8. torch's transformer inference fast paths (nn.TransformerEncoderLayer and
     nn.MultiheadAttention in eval under no_grad: aten::_transformer_encoder_layer_fwd and
     aten::_native_multi_head_attention), eager and the layer compiled: time vs CPU
     (aim <= 1.0);
  9. float16 and bfloat16 softmax and sums of a 4096x4096: time vs CPU (aim <= 1.0);
 10. activations and pointwise ops with numbers (pow with a number, clamp, lerp, nan_to_num,
     hardswish, leaky_relu, elu, softplus, log_sigmoid, the shrinks ...), fmax, logaddexp,
     activation gradients and bucketize on 4M float32, each one PTO instruction: time vs CPU
     (aim <= 1.0).

Every figure is the best of several timed repetitions after warm-up. A repetition
runs the op enough times back to back to last a few tens of milliseconds; pto
repetitions end with torch.pto.synchronize() inside the timed region; CPU and pto
repetitions alternate, each after the threads of the other have stopped spinning
(torch's OpenMP workers spin ~8 ms after each op, taking a core from whatever runs
next) and after 50 ms of the side's own untimed repetitions (after a pause the cores
run the next ~40 ms slower: _timing.settle_and_warm). A figure measured through the CPU fallback is marked
"(CPU fallback)". Tables 1, 2 and 4 time the same calls compiled by Inductor for CPU tensors
beside them (pto/Ind: pto's time over Inductor's), each compiled once, at most
Bench.INDUCTOR_COMPILING seconds of compiling a run, in a fresh Inductor cache.

Nothing runs unbounded: a side whose one call takes over Bench.CALL_CAP seconds is timed
by that call alone; a CPU GEMM without a fast path on this host (bfloat16 without AVX-512
BF16 or AMX, as on an AVX2-only host) runs as the reference up to n=SLOW_GEMM_LARGEST only;
sections that no longer fit in the time budget (_timing.Budget) are skipped. The notes
under a table say "capped: ..." for each.

The machine's cores may be shared with other processes. The column
"cores cpu / pto / other" says how many cores this process kept busy (its CPU
time / wall time, all threads) in the fastest CPU and pto repetitions, and how
many other processes kept busy meanwhile; where that was above 0.25, the
repetitions are run again (twice at most, within the time budget) and the best
of all kept.
"""

import argparse
import dataclasses
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

import pypto_torch
from _timing import (Aims, Budget, OtherLoad, best_time, context_header, cpu_gemm_slow_path, fresh_inductor_cache,
                     print_closing_summary, settle, settle_and_warm, table)

MiB = 2**20


@dataclasses.dataclass
class Pair:
    cpu: float  # seconds per call
    pto: float
    fell_back: bool  # pto went through the CPU fallback
    cpu_cores: float  # CPU time of the process / wall time, in the fastest repetition
    pto_cores: float
    other_cores: float | None  # cores other processes kept busy meanwhile (None: unknown)
    inductor: float | None = None  # seconds per call of the same op compiled by Inductor on the CPU

    def cores(self) -> str:
        other = "?" if self.other_cores is None else f"{self.other_cores:.1f}"
        return f"{self.cpu_cores:.1f} / {self.pto_cores:.1f} / {other}"


class Bench(Aims):
    """Timing with the run's settings, and the record of every aim checked."""

    BUSY = 0.25  # cores kept busy by other processes above which a measurement is repeated
    CALL_CAP = 1.0  # seconds: a side whose one call takes longer is timed by that call alone
    INDUCTOR_COMPILING = 90  # seconds of Inductor compiling per run, at most (2 cores: ~1 s an op)

    def __init__(self, quick: bool):
        super().__init__("bench_ops")
        self.quick = quick
        self.reps = 3 if quick else 5
        self.target = 0.02 if quick else 0.05  # seconds per timed repetition
        self.budget = Budget(120 if quick else 300)
        self.capped: list[str] = []  # what was timed by one call only, for the table's notes
        self.copy_gbps = float("nan")  # the copy bandwidth measured by bench_elementwise
        self.compiling = 0.0  # seconds Inductor spent compiling so far

    def inductor(self, fn, *args):
        """A call of fn(*args) compiled by Inductor for the CPU, compiled now; None once the
        run's compiling time is spent."""
        if self.compiling > self.INDUCTOR_COMPILING:
            return None
        compiled = torch.compile(fn, backend="inductor", dynamic=False)
        start = time.perf_counter()
        compiled(*args)
        self.compiling += time.perf_counter() - start
        return lambda: compiled(*args)

    def _calibrated(self, fn, device: str):
        """A run of enough back-to-back calls of fn() to last about self.target, its call count,
        and the time of one call."""
        sync = torch.pto.synchronize if device == "pto" else (lambda: None)
        fn()
        sync()  # warm-up: caches, allocator, lazily built kernels, thread pools
        settle()
        start = time.perf_counter()
        fn()
        sync()
        once = time.perf_counter() - start
        inner = max(1, min(200_000, round(self.target / max(once, 1e-9))))

        def run():
            for _ in range(inner):
                fn()
            sync()

        if inner > 1:
            run()  # warm-up of the loop itself
        return run, inner, once

    def pair(self, fn_cpu, fn_pto, reps: int | None = None, fn_inductor=None) -> Pair:
        """Seconds per call on each side (and of fn_inductor, a compiled CPU function, where
        given; fn_cpu None: pto alone, the CPU figures NaN), and how many cores the CPU and
        pto sides kept busy.

        The repetitions of the sides alternate, so that a passing load on the machine (other
        processes share its cores) weighs on every side alike. A side whose one call takes
        longer than CALL_CAP (a CPU reference without a fast path on this host) is timed by
        that call alone, so that no case runs unbounded; self.capped says so."""
        before = pypto_torch.fallback_ops()
        sides = {"pto": self._calibrated(fn_pto, "pto")}
        fell_back = pypto_torch.fallback_ops() != before
        if fn_cpu is not None:
            sides["cpu"] = self._calibrated(fn_cpu, "cpu")
        if fn_inductor is not None:
            sides["inductor"] = self._calibrated(fn_inductor, "cpu")
        best = {side: (once, float("nan")) for side, (_, _, once) in sides.items() if once > self.CALL_CAP}
        self.capped += [f"{side} {once * 1e3:.1f} ms: one call over the {self.CALL_CAP} s cap, timed once"
                        for side, (once, _) in best.items()]
        timed = {side: sides[side] for side in ("cpu", "pto", "inductor") if side in sides and side not in best}
        best.update({side: (float("inf"), 0.0) for side in timed})
        best.setdefault("cpu", (float("nan"), float("nan")))
        for _ in range(3):  # a first round, and up to two more where other processes took cores
            others = OtherLoad()
            for _ in range(reps or self.reps):
                for side, (run, inner, _) in timed.items():
                    settle_and_warm(run)  # the other side's spinning threads would take a core from this one
                    cpu_time = time.process_time()  # all threads of this process: torch's, the device's
                    wall = best_time(run, 1, warmup=0)
                    cores = (time.process_time() - cpu_time) / wall
                    best[side] = min(best[side], (wall / inner, cores))
            other = others.cores()
            # Other processes took cores meanwhile: one more round of repetitions (best of all),
            # while more than half of the time budget is left.
            if other is None or other < self.BUSY or self.budget.left() < self.budget.seconds / 2:
                break
        return Pair(best["cpu"][0], best["pto"][0], fell_back, best["cpu"][1], best["pto"][1], other,
                    best["inductor"][0] if "inductor" in best else None)


def fallback_note(fell_back: bool) -> str:
    return " (CPU fallback)" if fell_back else ""


def ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1e3:.2f}"


def inductor_columns(r: Pair) -> list[str]:
    """A row's Inductor columns: its ms per call and pto's time over it ("-": not compiled)."""
    return ["-", "-"] if r.inductor is None else [ms(r.inductor), f"{r.pto / r.inductor:.2f}"]


INDUCTOR_NOTE = (f"Inductor: the same call torch.compile(backend=\"inductor\")-d for CPU tensors, compiled once "
                 f"(at most {Bench.INDUCTOR_COMPILING} s of compiling a run; \"-\" beyond)")


# 1. Large elementwise ---------------------------------------------------------------------

# Shares of the copy bandwidth aimed at: a streaming op reads and writes as a copy does;
# add, the plainest of them, closest to it.
BANDWIDTH_AIM, ADD_BANDWIDTH_AIM = 0.8, 0.85


def bench_elementwise(b: Bench) -> None:
    n = 16 * MiB
    gelu_out = torch._C._nn.gelu  # F.gelu has no out=

    def operands(device):
        torch.manual_seed(0)
        x, y = torch.randn(n), torch.randn(n)
        return {name: t.to(device) for name, t in
                (("a", x), ("b", y), ("o", torch.empty(n)), ("t", torch.empty(n)))}

    ops = {"cpu": operands("cpu"), "pto": operands("pto")}
    torch.pto.synchronize()

    # (name, form, bytes per element of the tensors the op reads and writes, fn(tensors));
    # a * b + a is two ops, through a temporary: 24 bytes; addcmul computes it as one op
    # (on the CPU a single kernel): 12 bytes
    cases = [
        ("copy_ (STREAM copy)", "out=", 8, lambda v: v["o"].copy_(v["a"])),
        ("add  a + b", "out=", 12, lambda v: torch.add(v["a"], v["b"], out=v["o"])),
        ("add  a + b", "functional", 12, lambda v: v["a"] + v["b"]),
        ("mul+add  a * b + a (2 kernels)", "out=", 24,
         lambda v: torch.add(torch.mul(v["a"], v["b"], out=v["t"]), v["a"], out=v["o"])),
        ("mul+add  a * b + a (2 kernels)", "functional", 24, lambda v: v["a"] * v["b"] + v["a"]),
        ("addcmul  a + a * b (1 op)", "out=", 12,
         lambda v: torch.addcmul(v["a"], v["a"], v["b"], out=v["o"])),
        ("exp", "out=", 8, lambda v: torch.exp(v["a"], out=v["o"])),
        ("exp", "functional", 8, lambda v: v["a"].exp()),
        ("gelu (erf)", "out=", 8, lambda v: gelu_out(v["a"], out=v["o"])),
        ("gelu (erf)", "functional", 8, lambda v: F.gelu(v["a"])),
        ("sigmoid", "out=", 8, lambda v: torch.sigmoid(v["a"], out=v["o"])),
        ("sigmoid", "functional", 8, lambda v: v["a"].sigmoid()),
    ]
    measured = [(name, form, per_element * n, b.pair(lambda: fn(ops["cpu"]), lambda: fn(ops["pto"]),
                                                     fn_inductor=b.inductor(fn, ops["cpu"])))
                for name, form, per_element, fn in cases]
    copy = measured[0][3]
    copy_gbps = b.copy_gbps = 8 * n / min(copy.cpu, copy.pto) / 1e9  # the faster of the two copies

    rows = []
    for name, form, nbytes, r in measured:
        ratio = r.pto / r.cpu
        cpu_gbps, pto_gbps = nbytes / r.cpu / 1e9, nbytes / r.pto / 1e9
        share = pto_gbps / copy_gbps
        bandwidth_aim = ADD_BANDWIDTH_AIM if name.startswith("add ") else BANDWIDTH_AIM
        rows.append([name, form, ms(r.cpu), ms(r.pto) + fallback_note(r.fell_back), f"{ratio:.2f}",
                     b.aim(round(ratio, 2) <= 1.0, f"elementwise {name} {form}: pto/CPU time {ratio:.2f} (aim <= 1)"),
                     *inductor_columns(r), f"{cpu_gbps:.1f}", f"{pto_gbps:.1f}", f"{100 * share:.0f}%",
                     b.aim(round(share, 2) >= bandwidth_aim, f"elementwise {name} {form}: {100 * share:.0f}% "
                                                             f"of copy bandwidth (aim >= {100 * bandwidth_aim:.0f}%)"),
                     r.cores()])
    table(f"1. Elementwise on 16M float32 (64 MiB per tensor), ms per op (best of {b.reps}); "
          f"GB/s = 1e9 bytes of the tensors read and written / s",
          ["op", "form", "cpu ms", "pto ms", "pto/CPU", "<=1", "Ind ms", "pto/Ind", "cpu GB/s", "pto GB/s",
           "pto % copy", ">=80% (add 85%)", "cores cpu / pto / other"], rows, text_columns=2)
    print(f"100% copy bandwidth = {copy_gbps:.1f} GB/s, the faster of CPU copy_ ({8 * n / copy.cpu / 1e9:.1f}) "
          f"and pto copy_ ({8 * n / copy.pto / 1e9:.1f}), bytes read + written;\n"
          f"out= writes preallocated outputs (mul+add: into a preallocated temporary too), "
          f"functional allocates one per call; {INDUCTOR_NOTE}")
    del ops
    torch.pto.empty_cache()


# 2. Reductions ----------------------------------------------------------------------------

def bench_reductions(b: Bench) -> None:
    torch.manual_seed(0)
    x_cpu = torch.randn(4096, 4096)
    x_pto = x_cpu.to("pto")
    cases = [
        ("sum   dim=1 (over rows: one per row)", lambda x: x.sum(dim=1)),
        ("sum   dim=0 (over columns: one per column)", lambda x: x.sum(dim=0)),
        ("amax  dim=1 (over rows)", lambda x: x.amax(dim=1)),
        ("amax  dim=0 (over columns)", lambda x: x.amax(dim=0)),
        ("sum   all (one output, split over the cores)", lambda x: x.sum()),
        ("sum   all of a transposed view", lambda x: x.t().sum()),
    ]
    rows = []
    nbytes = x_cpu.numel() * 4
    for name, fn in cases:
        r = b.pair(lambda: fn(x_cpu), lambda: fn(x_pto), fn_inductor=b.inductor(fn, x_cpu))
        ratio = r.pto / r.cpu
        short = " ".join(name.split("(")[0].split())
        share = nbytes / r.pto / 1e9 / b.copy_gbps
        rows.append([name, ms(r.cpu), ms(r.pto) + fallback_note(r.fell_back), f"{ratio:.2f}",
                     b.aim(round(ratio, 2) <= 1.0, f"reduction {short}: pto/CPU time {ratio:.2f} (aim <= 1)"),
                     *inductor_columns(r), f"{nbytes / r.cpu / 1e9:.1f}", f"{nbytes / r.pto / 1e9:.1f}",
                     f"{100 * share:.0f}%",
                     b.aim(round(share, 2) >= 0.8,
                           f"reduction {short}: {100 * share:.0f}% of copy bandwidth (aim >= 80%)"),
                     r.cores()])
    table(f"2. Reductions of a 4096x4096 float32 (64 MiB), ms per op (best of {b.reps}); GB/s of the input read",
          ["op", "cpu ms", "pto ms", "pto/CPU", "<=1", "Ind ms", "pto/Ind", "cpu GB/s", "pto GB/s", "pto % copy",
           ">=80%", "cores cpu / pto / other"], rows)
    print(f"100% copy bandwidth = {b.copy_gbps:.1f} GB/s, measured in table 1; {INDUCTOR_NOTE}")
    del x_pto
    torch.pto.empty_cache()


# 3. Matmul --------------------------------------------------------------------------------

# The largest n at which a CPU GEMM without a fast path on this host (a few GFLOP/s) runs
# as the reference: ~2 s a call at n=1024, ~140 s at 4096.
SLOW_GEMM_LARGEST = 1024


def pto_gemm_library(dtype: torch.dtype) -> str:
    """The library tmatmul runs `dtype` in on this host (csrc/runtime/sim/kernels/matmul.cpp):
    float32 in MKL, float16 widened to float32; bfloat16 in oneDNN's brgemm kernels, which
    need AVX-512 (AMX where the CPU has it), else in MKL's bfloat16 GEMM."""
    if dtype != torch.bfloat16:
        return "MKL, widened" if dtype == torch.float16 else "MKL"
    flags = set(open("/proc/cpuinfo").read().split()) if sys.platform == "linux" else set()
    onednn = os.environ.get("ONEDNN_MAX_CPU_ISA", "ALL").upper()
    if "avx512f" not in flags or not onednn.startswith(("ALL", "AVX512", "AVX10")):
        return "MKL"
    amx = "amx_bf16" in flags and (onednn == "ALL" or "AMX" in onednn)
    return "oneDNN" + (" AMX" if amx else "")


def bench_matmul(b: Bench) -> None:
    # Squares, then transformer layers' GEMMs: (B*T) x C @ C x 4C, C = 256 and 768.
    shapes = [(n, n, n) for n in [256, 512, 1024, 2048] + ([] if b.quick else [4096])]
    shapes += [(1024, 256, 1024), (2048, 768, 3072)]
    aims = {torch.float32: 1.0, torch.bfloat16: 1.0}
    rows = []
    for dtype, aim in aims.items():
        name = str(dtype).removeprefix("torch.")
        library = pto_gemm_library(dtype)
        slow_path = cpu_gemm_slow_path(dtype)
        if slow_path:
            b.capped.append(f"{slow_path}: its reference runs up to {SLOW_GEMM_LARGEST}^3 multiply-adds only")
        for m, k, n in shapes:
            cpu_capped = slow_path is not None and m * k * n > SLOW_GEMM_LARGEST**3
            torch.manual_seed(0)
            a_cpu, b_cpu = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
            c_cpu = torch.empty(m, n, dtype=dtype)
            a_pto, b_pto, c_pto = a_cpu.to("pto"), b_cpu.to("pto"), c_cpu.to("pto")
            flop = 2 * m * k * n
            r = b.pair(None if cpu_capped else (lambda: torch.mm(a_cpu, b_cpu, out=c_cpu)),
                       lambda: torch.mm(a_pto, b_pto, out=c_pto), reps=min(b.reps, 3) if flop >= 2 * 2048**3 else b.reps)
            ratio = r.cpu / r.pto  # of the GFLOP/s
            rows.append([name, f"{m}x{k} @ {k}x{n}", library, ms(r.cpu) + (" (capped)" if cpu_capped else ""),
                         ms(r.pto) + fallback_note(r.fell_back), f"{flop / r.cpu / 1e9:.1f}",
                         f"{flop / r.pto / 1e9:.1f}", f"{ratio:.2f}",
                         b.aim(None if cpu_capped else round(ratio, 2) >= aim,
                               f"matmul {name} {m}x{k}x{n}: pto/CPU GFLOP/s {ratio:.2f} (aim >= {aim})"),
                         r.cores()])
            del a_pto, b_pto, c_pto
        rows.append([""] * 10)
    torch.pto.empty_cache()
    table(f"3. Matmul torch.mm(a, b, out=c) (best of {b.reps}, of 3 from 2 x 2048^3 flop); GFLOP/s = 2 m k n / s; "
          f"aim: pto/CPU >= 1.0; a capped CPU reference is not run",
          ["dtype", "m x k @ k x n", "pto library", "cpu ms", "pto ms", "cpu GFLOP/s", "pto GFLOP/s", "pto/CPU",
           "aim", "cores cpu / pto / other"], rows[:-1], text_columns=3)


# 4. Softmax, layer_norm -------------------------------------------------------------------

def bench_row_ops(b: Bench) -> None:
    torch.manual_seed(0)
    x_cpu = torch.randn(4096, 4096)
    w_cpu, bias_cpu = torch.randn(4096), torch.randn(4096)
    o_cpu = torch.empty_like(x_cpu)
    x_pto, w_pto, bias_pto, o_pto = (t.to("pto") for t in (x_cpu, w_cpu, bias_cpu, o_cpu))
    # A causal mask's -inf above the diagonal (attention's scores): half the exps are of -inf.
    masked_cpu = x_cpu.masked_fill(torch.ones(4096, 4096, dtype=torch.bool).triu(1), float("-inf"))
    masked_pto = masked_cpu.to("pto")
    plain = (x_cpu, w_cpu, bias_cpu, o_cpu), (x_pto, w_pto, bias_pto, o_pto)
    masked = (masked_cpu, w_cpu, bias_cpu, o_cpu), (masked_pto, w_pto, bias_pto, o_pto)
    cases = [
        ("softmax(x, -1)", lambda x, w, bias, o: torch.softmax(x, -1), plain),
        ("softmax(x, -1), x causally masked", lambda x, w, bias, o: torch.softmax(x, -1), masked),
        ("softmax(x, -1), out=", lambda x, w, bias, o: torch._softmax(x, -1, False, out=o), plain),
        ("log_softmax(x, -1)", lambda x, w, bias, o: torch.log_softmax(x, -1), plain),
        ("layer_norm(x, (4096,), w, b)", lambda x, w, bias, o: F.layer_norm(x, (4096,), w, bias), plain),
    ]
    rows = []
    nbytes = 2 * x_cpu.numel() * 4
    for name, fn, (cpu_args, pto_args) in cases:
        r = b.pair(lambda: fn(*cpu_args), lambda: fn(*pto_args), fn_inductor=b.inductor(fn, *cpu_args))
        ratio = r.pto / r.cpu
        rows.append([name, ms(r.cpu), ms(r.pto) + fallback_note(r.fell_back), f"{ratio:.2f}",
                     b.aim(round(ratio, 2) <= 1.0, f"{name}: pto/CPU time {ratio:.2f} (aim <= 1)"),
                     *inductor_columns(r), f"{nbytes / r.cpu / 1e9:.1f}", f"{nbytes / r.pto / 1e9:.1f}", r.cores()])
    table(f"4. Row ops on a 4096x4096 float32 (dim=-1), ms per op (best of {b.reps}); "
          f"GB/s = input read once + output written once",
          ["op", "cpu ms", "pto ms", "pto/CPU", "<=1", "Ind ms", "pto/Ind", "cpu GB/s", "pto GB/s",
           "cores cpu / pto / other"], rows)
    print(INDUCTOR_NOTE)
    del x_pto, w_pto, bias_pto, o_pto, masked_pto
    torch.pto.empty_cache()


# 5. Eager overhead ------------------------------------------------------------------------

def bench_small_ops(b: Bench) -> None:
    torch.manual_seed(0)
    a_cpu, b_cpu = torch.randn(64), torch.randn(64)
    a_pto, b_pto = a_cpu.to("pto"), b_cpu.to("pto")
    cases = [
        ("a.add_(b)", lambda a, b_: a.add_(b_)),
        ("a.mul(b)", lambda a, b_: a.mul(b_)),
        ("a.exp()", lambda a, b_: a.exp()),
        ("a.sum()", lambda a, b_: a.sum()),
    ]
    rows = []
    for name, fn in cases:
        r = b.pair(lambda: fn(a_cpu, b_cpu), lambda: fn(a_pto, b_pto))
        ratio = r.pto / r.cpu
        rows.append([name, f"{r.cpu * 1e6:.2f}", f"{r.pto * 1e6:.2f}" + fallback_note(r.fell_back),
                     f"{ratio:.2f}",
                     b.aim(round(ratio, 2) <= 3.0, f"small op {name}: pto/CPU time {ratio:.2f} (aim <= 3)"),
                     r.cores()])
    table(f"5. Eager overhead on 64-element float32 tensors, us per op, back-to-back calls, one synchronize "
          f"at the end (best of {b.reps})",
          ["op", "cpu us", "pto us", "pto/CPU", "<=3", "cores cpu / pto / other"], rows)


def time_ratio_table(b: Bench, title: str, what: str, cases, cpu_args: tuple, pto_args: tuple) -> None:
    """One row per (name, fn): fn(*args) timed on each side, ms and the pto/CPU time
    ratio against the aim <= 1 ("what name: ..." names a missed aim)."""
    rows = []
    for name, fn in cases:
        r = b.pair(lambda: fn(*cpu_args), lambda: fn(*pto_args))
        ratio = r.pto / r.cpu
        rows.append([name, ms(r.cpu), ms(r.pto) + fallback_note(r.fell_back), f"{ratio:.2f}",
                     b.aim(round(ratio, 2) <= 1.0, f"{what}{name.strip()}: pto/CPU time {ratio:.2f} (aim <= 1)"),
                     r.cores()])
    table(title, ["op", "cpu ms", "pto ms", "pto/CPU", "<=1", "cores cpu / pto / other"], rows)


# 6. Random draws ---------------------------------------------------------------------------

def bench_random(b: Bench) -> None:
    x_cpu = torch.empty(16 * MiB)
    x_pto = torch.empty(16 * MiB, device="pto")
    cases = [
        ("x.normal_()", lambda x: x.normal_()),
        ("x.uniform_()", lambda x: x.uniform_()),
        ("x.exponential_()", lambda x: x.exponential_()),
        ("x.bernoulli_(0.5)", lambda x: x.bernoulli_(0.5)),
        ("dropout(x, 0.5)", lambda x: F.dropout(x, 0.5)),
        ("x.random_(0, 10)", lambda x: x.random_(0, 10)),
        ("multinomial(64x1000 of |x|, 1000, True)",
         lambda x: torch.multinomial(x[:64000].view(64, 1000).abs(), 1000, True)),
    ]
    time_ratio_table(b, f"6. Random draws filling 16M float32, ms per op (best of {b.reps}); pto: Philox4x32-10, "
                        f"CPU: mt19937", "random ", cases, (x_cpu,), (x_pto,))
    del x_pto
    torch.pto.empty_cache()


# 7. Convolution --------------------------------------------------------------------------

def bench_convolution(b: Bench) -> None:
    torch.manual_seed(0)
    x, w = torch.randn(32, 64, 32, 32), torch.randn(64, 64, 3, 3)
    layouts = {"NCHW": torch.contiguous_format, "channels_last": torch.channels_last}
    # (dtype, layout) -> (x, w) on each side, both requiring grad
    cpu_args, pto_args = {}, {}
    for dtype in (torch.float32, torch.bfloat16):
        for layout, memory_format in layouts.items():
            xd, wd = x.to(dtype).contiguous(memory_format=memory_format), w.to(dtype).contiguous(memory_format=memory_format)
            cpu_args[dtype, layout] = (xd.clone().requires_grad_(), wd.clone().requires_grad_())
            pto_args[dtype, layout] = (xd.to("pto").requires_grad_(), wd.to("pto").requires_grad_())
    cases = []
    for (dtype, layout) in cpu_args:
        name = f"conv2d 32x64x32x32, 3x3, pad 1, {str(dtype).removeprefix('torch.')} {layout}"

        def forward(args, key=(dtype, layout)):
            xk, wk = args[key]
            return F.conv2d(xk.detach(), wk.detach(), padding=1)

        def forward_backward(args, key=(dtype, layout)):
            xk, wk = args[key]
            F.conv2d(xk, wk, padding=1).sum().backward()

        cases += [(name, forward), ("  forward + backward", forward_backward)]
    time_ratio_table(b, f"7. Convolution, ms per call (best of {b.reps}); pto: tconv/tconvbwdd/tconvbwdw (oneDNN "
                        f"direct kernels, the batch split over the cores; bfloat16 in its bfloat16 kernels where "
                        f"the host has them, else widened to float32), CPU: oneDNN",
                     "", cases, (cpu_args,), (pto_args,))
    del pto_args
    torch.pto.empty_cache()


# 8. Transformer inference fast paths ------------------------------------------------------

def bench_transformer_fast_paths(b: Bench) -> None:
    torch.manual_seed(0)
    d_model, heads, batch, seq = 512, 8, 8, 128
    layer_cpu = torch.nn.TransformerEncoderLayer(d_model, heads, batch_first=True, dropout=0.0).eval()
    layer_pto = torch.nn.TransformerEncoderLayer(d_model, heads, batch_first=True, dropout=0.0).eval()
    layer_pto.load_state_dict(layer_cpu.state_dict())
    layer_pto.to("pto")
    mha_cpu = torch.nn.MultiheadAttention(d_model, heads, batch_first=True).eval()
    mha_pto = torch.nn.MultiheadAttention(d_model, heads, batch_first=True).eval()
    mha_pto.load_state_dict(mha_cpu.state_dict())
    mha_pto.to("pto")
    x_cpu = torch.randn(batch, seq, d_model)
    x_pto = x_cpu.to("pto")
    compiled_pto = torch.compile(layer_pto, backend="pypto")
    cases = [
        ("TransformerEncoderLayer", lambda layer, mha, compiled, x: layer(x)),
        ("  compiled (pto: backend=\"pypto\", CPU: eager)", lambda layer, mha, compiled, x: compiled(x)),
        ("MultiheadAttention, need_weights=False", lambda layer, mha, compiled, x: mha(x, x, x, need_weights=False)),
        ("  need_weights=True (averaged)", lambda layer, mha, compiled, x: mha(x, x, x)),
    ]
    with torch.no_grad():
        time_ratio_table(b, f"8. Transformer inference fast paths (eval, no_grad), d_model {d_model}, {heads} heads, "
                            f"batch {batch}, seq {seq}, float32, ms per call (best of {b.reps})", "", cases,
                         (layer_cpu, mha_cpu, layer_cpu, x_cpu), (layer_pto, mha_pto, compiled_pto, x_pto))
    del layer_pto, mha_pto, compiled_pto, x_pto
    torch.pto.empty_cache()


# 9. Half-precision rows ------------------------------------------------------------------

def bench_half_rows(b: Bench) -> None:
    torch.manual_seed(0)
    x = torch.randn(4096, 4096)
    cases = [
        ("softmax(x, -1)", lambda x: torch.softmax(x, -1)),
        ("sum   dim=1 (over rows)", lambda x: x.sum(dim=1)),
        ("sum   dim=0 (over columns)", lambda x: x.sum(dim=0)),
    ]
    for dtype in (torch.float16, torch.bfloat16):
        name = str(dtype).removeprefix("torch.")
        x_cpu = x.to(dtype)
        x_pto = x_cpu.to("pto")
        time_ratio_table(b, f"9. {name} rows of a 4096x4096 (32 MiB), ms per op (best of {b.reps})", f"{name} ",
                         cases, (x_cpu,), (x_pto,))
        del x_pto
    torch.pto.empty_cache()


# 10. Activations and pointwise ops with numbers --------------------------------------------

def bench_pointwise_with_numbers(b: Bench) -> None:
    torch.manual_seed(0)
    n = 4 * MiB
    x_cpu, y_cpu = torch.randn(n), torch.rand(n) + 0.5  # y positive: its square root
    x_pto, y_pto = x_cpu.to("pto"), y_cpu.to("pto")
    cases = [
        ("x ** 2", lambda x, y: x ** 2),
        ("y ** 0.5", lambda x, y: y ** 0.5),
        ("clamp(x, -1, 1)", lambda x, y: x.clamp(-1, 1)),
        ("lerp(x, y, 0.3)", lambda x, y: torch.lerp(x, y, 0.3)),
        ("lerp(x, y, y)", lambda x, y: torch.lerp(x, y, y)),
        ("nan_to_num(x)", lambda x, y: torch.nan_to_num(x)),
        ("hardswish", lambda x, y: F.hardswish(x)),
        ("hardsigmoid", lambda x, y: F.hardsigmoid(x)),
        ("leaky_relu", lambda x, y: F.leaky_relu(x)),
        ("elu", lambda x, y: F.elu(x)),
        ("selu", lambda x, y: F.selu(x)),
        ("softplus", lambda x, y: F.softplus(x)),
        ("logsigmoid", lambda x, y: F.logsigmoid(x)),
        ("mish", lambda x, y: F.mish(x)),
        ("hardshrink", lambda x, y: F.hardshrink(x)),
        ("softshrink", lambda x, y: F.softshrink(x)),
        ("fmax(x, y)", lambda x, y: torch.fmax(x, y)),
        ("logaddexp(x, y)", lambda x, y: torch.logaddexp(x, y)),
        ("signbit(x)", lambda x, y: torch.signbit(x)),
        ("hardswish_backward(y, x)", lambda x, y: torch.ops.aten.hardswish_backward(y, x)),
        ("leaky_relu_backward(y, x)", lambda x, y: torch.ops.aten.leaky_relu_backward(y, x, 0.01, False)),
        ("softshrink_backward(y, x)", lambda x, y: torch.ops.aten.softshrink_backward(y, x, 0.5)),
        ("elu_backward(y, x)", lambda x, y: torch.ops.aten.elu_backward(y, 1.0, 1.0, 1.0, False, x)),
        ("softplus_backward(y, x)", lambda x, y: torch.ops.aten.softplus_backward(y, x, 1.0, 20.0)),
        ("hardtanh_backward(y, x)", lambda x, y: torch.ops.aten.hardtanh_backward(y, x, -1.0, 1.0)),
        ("mish_backward(y, x)", lambda x, y: torch.ops.aten.mish_backward(y, x)),
        ("threshold(x, 0.5, -1)", lambda x, y: F.threshold(x, 0.5, -1.0)),
        ("heaviside(x, y)", lambda x, y: torch.heaviside(x, y)),
        ("fmod(x, 1.5)", lambda x, y: torch.fmod(x, 1.5)),
        ("remainder(x, 1.5)", lambda x, y: torch.remainder(x, 1.5)),
        ("x // 1.5", lambda x, y: x // 1.5),
        ("dot(x, y)", lambda x, y: torch.dot(x, y)),
        ("bucketize(x, 4096 edges)", lambda x, y: torch.bucketize(x, torch.linspace(-3, 3, 4096, device=x.device))),
    ]
    time_ratio_table(b, f"10. Activations and pointwise ops with numbers on 4M float32 (16 MiB), ms per op "
                        f"(best of {b.reps}), functional: each one PTO instruction", "", cases,
                     (x_cpu, y_cpu), (x_pto, y_pto))
    del x_pto, y_pto
    torch.pto.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter run (no 4096 matmul, shorter repetitions)")
    args = parser.parse_args()
    pypto_torch.set_fallback_mode("silent")

    context_header("pto op benchmark", args.quick)
    print("  pto/CPU is the time ratio (below 1: pto faster), for matmul the GFLOP/s ratio (above 1: pto faster)")
    bench = Bench(args.quick)
    start = time.perf_counter()
    fallbacks_before = pypto_torch.fallback_ops()
    whole_run = OtherLoad()
    failed = []
    with fresh_inductor_cache():
        for section in (bench_elementwise, bench_reductions, bench_matmul, bench_row_ops, bench_small_ops,
                        bench_random, bench_convolution, bench_transformer_fast_paths, bench_half_rows,
                        bench_pointwise_with_numbers):
            if bench.budget.exhausted():
                print("\n" + bench.note(bench.budget.skipped(section.__name__)))
                continue
            during = OtherLoad()
            try:
                section(bench)
            except Exception as error:  # noqa: BLE001 -- one broken op must not cost the other tables
                failed.append(f"{section.__name__}: {type(error).__name__}: {(str(error).splitlines() or [''])[0]}")
                print(f"\nfailed: {failed[-1]}")
            print("".join(f"{bench.note('capped: ' + what)}\n" for what in bench.capped)
                  + f"({during.describe()} during this table)")
            bench.capped.clear()
    print_closing_summary(fallbacks_before, bench, start, whole_run)
    if failed:
        sys.exit("sections that failed:\n" + "\n".join(f"  {what}" for what in failed))


if __name__ == "__main__":
    main()
