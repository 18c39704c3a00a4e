"""torch.compile(backend="pypto") side by side with eager CPU and Inductor.

    python3 benchmarks/bench_compile.py [--quick]

The models (tests/python/compile_models.py, shared with the tests): the hand-written
softmax of the project's origin on a 512x512, a 1024x1024 and a 4096x4096 float32 (with
torch.softmax's eager time beside each), an MLP, a transformer block, and a small GPT-2 (GPT2LMHeadModel from
Hugging Face transformers, random weights, batch 8, sequence 128). Every forward runs
under torch.no_grad(), in float32. Each model runs five ways: eager on the CPU, eager on
pto, compiled with backend="pypto" on pto tensors, compiled with backend="inductor" on
the CPU, and compiled with torch.compile's default backend, Inductor, on pto tensors
("inductor pto": its kernels PTO programs, pypto_torch/compile/inductor).

Six tables; where a table has an aim, a column says whether it is met (✓) or not (✗):
  1. forward time, ms per call: pypto at least 1.3x faster than eager CPU (the softmax:
     no slower than torch.softmax, eager CPU) and at most 0.9 of Inductor's time; Inductor
     on pto within 1.1x of backend="pypto" and of Inductor on the CPU;
  2. first-call time, compiling included, of pypto and Inductor: pypto <= 1/10 of Inductor's.
     One throwaway compile per backend goes first, so that neither pays its one-time start
     (imports, Inductor's C++ header) in a model's figure; Inductor's caches point to a
     fresh folder, so that it compiles everything anew;
  3. peak pto memory of one forward above the parameters and inputs
     (torch.pto.max_memory_allocated): compiled lower than eager;
  4. where one compiled forward's time goes, per kind of stage (matmul, softmax and norms,
     other kernels, outside any kernel), pypto's program stages beside Inductor's kernels
     (benchmarks/stage_times.py);
  5. compile time, cold and warm: the MLP, the transformer block and GPT-2 compiled in a
     first process, then in a second one that finds the first one's entry in the compile
     cache on disk (pypto_torch/compile/disk_cache.py); Dynamo's own time apart from the
     backend's (AOTAutograd and the lowering; the lowering runs at the first call). Aim:
     the second process's backend time <= 1/10 of the first's. `--compile-time` prints
     this table alone. The other tables compile with the cache in a fresh folder: cold;
  6. the fixed cost of one call of a tiny compiled graph (x * 2 + 1 on 16 floats), back to
     back: the whole call (aim <= 5 us), pypto's compiled callable alone (the native plan
     runner: its checks and one launch) and Dynamo's part (the rest: its guards and frame
     handling), beside Dynamo with a backend that returns the graph's own forward.

Every time is the best of several timed repetitions after warm-up; a repetition runs the
call enough times back to back to last a few tens of milliseconds and ends with
torch.pto.synchronize() on pto. The four ways alternate within each repetition, each
after the threads of the one before have stopped spinning and 50 ms of its own untimed
repetitions (_timing.settle_and_warm).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch._dynamo

import pypto_torch
from pypto_torch.compile.backend import pypto_backend
from stage_times import KINDS, inductor_stages, pypto_stages  # noqa: E402 -- beside this file
from _timing import (Aims, Budget, OtherLoad, best_time, context_header, fresh_cache, fresh_inductor_cache,
                     print_closing_summary, settle, settle_and_warm, table)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))
from compile_models import MLP, TransformerBlock, handwritten_softmax, on_device, seeded, tiny_gpt2  # noqa: E402

MiB = 2**20
SOFTMAX_SIZES = (512, 1024, 4096)  # the hand-written softmax's n x n inputs
WAYS = ["eager CPU", "eager pto", "pypto", "inductor", "inductor pto"]
COMPILED_WAYS = ("pypto", "inductor", "inductor pto")  # inductor: on CPU tensors; inductor pto: on pto ones
ON_PTO = ("eager pto", "pypto", "inductor pto")


class Run(Aims):
    """The run's settings, and the record of every aim checked."""

    def __init__(self, quick: bool):
        super().__init__("bench_compile")
        self.reps = 3 if quick else 5
        self.target = 0.02 if quick else 0.05  # seconds per timed repetition
        self.budget = Budget(120 if quick else 240)


def synchronize(device: str) -> None:
    if device == "pto":
        torch.pto.synchronize()


class Case:
    """One model run the four ways: fn(*inputs) on the CPU and on pto, eager and compiled."""

    def __init__(self, name: str, model, inputs: tuple):
        self.name = name
        self.model = {"cpu": model, "pto": on_device(model, "pto") if isinstance(model, torch.nn.Module) else model}
        self.inputs = {"cpu": inputs, "pto": tuple(x.to("pto") for x in inputs)}
        self.compiled: dict[str, object] = {}
        self.first_call: dict[str, float] = {}
        self.held = 0  # bytes of pto memory the pypto-compiled forward keeps between calls
        self.errors: dict[str, str] = {}

    def call(self, way: str):
        """A function running the case one way (None where that way failed)."""
        if way in self.errors:
            return None
        if way in ("eager CPU", "eager pto"):
            device = way.split()[1].lower()
            fn, inputs = self.model[device], self.inputs[device]
        else:
            device = "pto" if way in ON_PTO else "cpu"
            fn, inputs = self.compiled[way], self.inputs[device]

        def run():
            with torch.no_grad():
                fn(*inputs)

        return run

    def compile(self, way: str) -> None:
        """torch.compile the model for `way`, timing the first call (compiling and one run).
        No torch._dynamo.reset() between compiles: it would drop what was compiled before."""
        device = "pto" if way in ON_PTO else "cpu"
        compiled = torch.compile(self.model[device], backend=way.split()[0])
        torch.pto.synchronize()
        before = torch.pto.memory_allocated()
        start = time.perf_counter()
        try:
            with torch.no_grad():
                compiled(*self.inputs[device])
            synchronize(device)
        except Exception as error:  # noqa: BLE001 -- reported in the tables, the other ways still run
            self.errors[way] = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            return
        self.first_call[way] = time.perf_counter() - start
        self.compiled[way] = compiled
        if way == "pypto":
            torch.pto.synchronize()
            self.held = torch.pto.memory_allocated() - before


def calibrated(fn, device: str, target: float):
    """A run of enough back-to-back calls of fn() to last about `target` seconds, and its count."""
    fn()
    synchronize(device)
    settle()
    start = time.perf_counter()
    fn()
    synchronize(device)
    once = time.perf_counter() - start
    inner = max(1, min(10_000, round(target / max(once, 1e-9))))

    def run():
        for _ in range(inner):
            fn()
        synchronize(device)

    return run, inner


def forward_times(r: Run, case: Case) -> dict[str, float]:
    """Seconds per forward, each way that ran, the ways alternating within each repetition."""
    runs = {}
    for way in WAYS:
        fn = case.call(way)
        if fn is not None:
            runs[way] = calibrated(fn, "pto" if way in ON_PTO else "cpu", r.target)
    best = {way: float("inf") for way in runs}
    for _ in range(r.reps):
        for way, (run, inner) in runs.items():
            settle_and_warm(run)
            best[way] = min(best[way], best_time(run, 1, warmup=0) / inner)
    return best


def peak_memory(case: Case, way: str) -> int | None:
    """Bytes of pto memory one forward took at its peak above what was allocated before the
    call (the parameters and inputs of every case), plus, compiled, what the compiled forward
    keeps between calls (a workspace, say) since its first call."""
    fn = case.call(way)
    if fn is None:
        return None
    torch.pto.synchronize()
    before = torch.pto.memory_allocated()
    torch.pto.reset_peak_memory_stats()
    fn()
    torch.pto.synchronize()
    return torch.pto.max_memory_allocated() - before + (case.held if way == "pypto" else 0)


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.2f}"


def cases() -> list[Case]:
    torch.manual_seed(0)
    softmaxes = [Case(f"hand-written softmax {n}x{n}", handwritten_softmax, (torch.randn(n, n),))
                 for n in SOFTMAX_SIZES]
    # GPT-2 "small" here: 2 layers, 256 wide, 4 heads, an 8192-token vocabulary (the real
    # GPT-2 small has 12 layers, 768 wide, 12 heads, 50257 tokens); batch 8, sequence 128.
    gpt2 = tiny_gpt2(n_layer=2, n_embd=256, n_head=4, vocab_size=8192, n_positions=128)
    return softmaxes + [
        Case("MLP 256-1024-1024-256, batch 1024", seeded(MLP, sizes=(256, 1024, 1024, 256)).eval(),
             (torch.randn(1024, 256),)),
        Case("transformer block 256 wide, 8 heads, batch 8 x 128", seeded(TransformerBlock, dim=256, heads=8,
                                                                          hidden=1024).eval(),
             (torch.randn(8, 128, 256),)),
        Case("GPT-2 small config, batch 8 x 128", gpt2, (torch.randint(0, 8192, (8, 128)),)),
    ]


def warm_up_backends() -> None:
    """One throwaway compile per backend: its one-time start is nobody's first call."""
    for backend, device in (("pypto", "pto"), ("inductor", "cpu"), ("inductor", "pto")):
        try:
            torch.compile(lambda a: (a * 2).sum(dim=-1), backend=backend)(torch.randn(8, 8, device=device))
            synchronize(device)
        except Exception as error:  # noqa: BLE001 -- the cases report it again
            print(f"  warm-up of backend {backend!r} failed: {type(error).__name__}: {error}".splitlines()[0])


def report(r: Run, all_cases: list[Case], softmax_eager: dict[str, dict[str, float]], times: dict[str, dict]) -> None:
    rows = []
    for case in all_cases:
        t = times[case.name]
        pypto, inductor, cpu = t.get("pypto"), t.get("inductor"), t.get("eager CPU")
        if case.name in softmax_eager:
            reference, aim_text, ratio_aim = softmax_eager[case.name]["eager CPU"], "torch.softmax", 1.0
        else:
            reference, aim_text, ratio_aim = cpu, "eager CPU", 1.3
        speedup = None if pypto is None else reference / pypto
        vs_inductor = None if pypto is None or inductor is None else pypto / inductor
        rows.append([
            case.name, ms(cpu), ms(t.get("eager pto")), ms(pypto), ms(inductor),
            "-" if speedup is None else f"{speedup:.2f} vs {aim_text}",
            r.aim(None if speedup is None else round(speedup, 2) >= ratio_aim,
                  f"{case.name}: pypto {speedup and round(speedup, 2)}x faster than {aim_text} (aim >= {ratio_aim})"),
            "-" if vs_inductor is None else f"{vs_inductor:.2f}",
            r.aim(None if vs_inductor is None else round(vs_inductor, 2) <= 0.9,
                  f"{case.name}: pypto/inductor time {vs_inductor and round(vs_inductor, 2)} (aim <= 0.9)"),
        ])
        # Inductor on pto beside backend="pypto" and beside Inductor on the CPU.
        on_pto = t.get("inductor pto")
        for other, label in ((pypto, "pypto"), (inductor, "inductor CPU")):
            ratio = None if on_pto is None or other is None else on_pto / other
            rows[-1] += ["-" if ratio is None else f"{ratio:.2f}",
                         r.aim(None if ratio is None else round(ratio, 2) <= 1.1,
                               f"{case.name}: inductor pto/{label} time {ratio and round(ratio, 2)} (aim <= 1.1)")]
        rows[-1].insert(5, ms(on_pto))
    for name, reference in softmax_eager.items():
        size = name.removeprefix("hand-written softmax ")
        rows.append([f"torch.softmax(x, -1) {size} (reference)", ms(reference["eager CPU"]),
                     ms(reference["eager pto"]), "", "", "", "", "", "", "", "", "", "", ""])
    table(f"1. Forward, float32, no_grad, ms per call (best of {r.reps}); pypto: compiled on pto tensors, "
          f"inductor: compiled on CPU tensors, inductor pto: torch.compile's default backend on pto tensors",
          ["model", "eager CPU", "eager pto", "pypto", "inductor", "inductor pto", "speedup of pypto",
           ">=1.3 (softmax >=1)", "pypto/inductor", "<=0.9", "ind. pto/pypto", "<=1.1", "ind. pto/ind. CPU", "<=1.1"],
          rows)

    rows = []
    for case in all_cases:
        pypto, inductor = case.first_call.get("pypto"), case.first_call.get("inductor")
        on_pto = case.first_call.get("inductor pto")
        ratio = None if pypto is None or inductor is None else pypto / inductor
        rows.append([case.name, "-" if pypto is None else f"{pypto:.2f}", "-" if inductor is None else f"{inductor:.2f}",
                     "-" if on_pto is None else f"{on_pto:.2f}", "-" if ratio is None else f"{ratio:.3f}",
                     r.aim(None if ratio is None else round(ratio, 3) <= 0.1,
                           f"{case.name}: pypto/inductor first-call time {ratio and round(ratio, 3)} (aim <= 0.1)")])
    table("2. First call of the compiled forward (compiling + one run), s",
          ["model", "pypto s", "inductor s", "inductor pto s", "pypto/inductor", "<=0.1"], rows)

    rows = []
    for case in all_cases:
        eager, compiled = peak_memory(case, "eager pto"), peak_memory(case, "pypto")
        rows.append([case.name, f"{eager / MiB:.1f}", "-" if compiled is None else f"{compiled / MiB:.1f}",
                     "-" if compiled is None else f"{compiled / max(eager, 1):.2f}",
                     r.aim(None if compiled is None else compiled < eager,
                           f"{case.name}: compiled peak {compiled} B, eager {eager} B (aim: lower)")])
    table("3. Peak pto memory of one forward above its parameters and inputs, MiB (torch.pto.max_memory_allocated)",
          ["model", "eager pto", "pypto", "pypto/eager", "lower"], rows)

    failed = [f"  {way} on {case.name}: {error}" for case in all_cases for way, error in case.errors.items()]
    if failed:
        print("\nfailed:\n" + "\n".join(failed))


# -- 4. Where the time goes ------------------------------------------------------------------

def stage_breakdown(r: Run, all_cases: list[Case]) -> None:
    """Table 4: each model's compiled forward split into kinds of stage, pypto beside Inductor.
    Inductor compiles each model anew, its kernels recording themselves: after a Dynamo
    reset, or Dynamo would run what it compiled for table 1."""
    measured = {}
    for case in all_cases:
        run = case.call("pypto")
        if run is None or r.budget.exhausted():
            r.note(r.budget.skipped(f"stage times of {case.name}") if run else f"{case.name}: pypto failed")
            continue
        measured[case.name] = {"pypto": pypto_stages(run)}
    torch._dynamo.reset()
    for case in all_cases:
        if case.name in measured and not r.budget.exhausted():
            measured[case.name]["inductor"] = inductor_stages(case.model["cpu"], case.inputs["cpu"])
    rows = []
    for name, ways in measured.items():
        for way, seconds in ways.items():
            rows.append([name if way == "pypto" else "", way, *(ms(seconds[kind]) for kind in KINDS),
                         ms(seconds["wall"])])
    table("4. Where one compiled forward's time goes, ms: pypto's program stages (pypto.Profiler) beside Inductor's "
          "kernels and extern calls on the CPU (torch.profiler, kernels compiled to record themselves); outside "
          "kernels = the call's wall time no stage covers (Python, guards, launches, waking threads); one profiled "
          "call, the fastest of 5",
          ["model", "way", *KINDS, "wall"], rows)


# -- 5. Compile time, cold and warm (the compile cache on disk) --------------------------------
COMPILE_TIME_CASES = {"MLP": len(SOFTMAX_SIZES), "transformer block": len(SOFTMAX_SIZES) + 1,
                      "GPT-2": len(SOFTMAX_SIZES) + 2}  # name -> index in cases()


def fresh_compile_cache():
    """pypto's compile cache in a fresh folder for the duration: every compile is cold."""
    return fresh_cache("PTO_CACHE_DIR")


def compile_time_child(index: int) -> None:
    """In a fresh interpreter: compiles case `index` with backend="pypto", calls it twice and
    prints, as JSON, Dynamo's time less the backend call's, the backend call's time, the
    lowering's (all three from torch._dynamo.utils.compilation_time_metrics), what else the
    first call took beyond a later call (the runtime's first launches) and the cache's counters."""
    from torch._dynamo.utils import compilation_time_metrics, counters

    pypto_torch.set_fallback_mode("silent")
    case = cases()[index]
    compiled = torch.compile(case.model["pto"], backend="pypto")
    calls = []
    for _ in range(2):
        start = time.perf_counter()
        with torch.no_grad():
            compiled(*case.inputs["pto"])
        torch.pto.synchronize()
        calls.append(time.perf_counter() - start)
    dynamo = sum(compilation_time_metrics.get("_compile.compile_inner", []))
    backend = sum(compilation_time_metrics.get("OutputGraph.call_user_compiler", []))
    lowering = sum(compilation_time_metrics.get("pypto.lowering", []))
    print(json.dumps({"dynamo": dynamo - backend, "backend": backend, "lowering": lowering,
                      "first_run": calls[0] - dynamo - lowering - calls[1], "counters": dict(counters["pypto"])}))


def compile_times(r: Run) -> None:
    """Table 5: each model compiled by two processes in turn over one fresh cache folder."""
    rows = []
    for name, index in COMPILE_TIME_CASES.items():
        if r.budget.exhausted():
            rows.append([name, r.budget.skipped("not measured")] + [""] * 8)
            continue
        folder = tempfile.mkdtemp(prefix="bench_pto_cache_")
        env = {**os.environ, "PTO_CACHE_DIR": folder, "PTO_COMPILE_CACHE": "1"}
        measured = []
        try:
            for _ in ("cold", "warm"):
                child = subprocess.run([sys.executable, __file__, "--compile-time-child", str(index)], env=env,
                                       capture_output=True, text=True, timeout=600)
                if child.returncode != 0:
                    raise RuntimeError(child.stderr.strip().splitlines()[-1] if child.stderr.strip() else "failed")
                measured.append(json.loads(child.stdout.strip().splitlines()[-1]))
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as error:
            rows.append([name, f"failed: {error}"] + [""] * 8)
            continue
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        backend_totals = []
        for process, m in zip(("1st (cold)", "2nd (warm)"), measured):
            backend_totals.append(m["backend"] + m["lowering"])
            cache = ", ".join(f"{k.removeprefix('cache_')} {v}" for k, v in sorted(m["counters"].items())) or "-"
            rows.append([name, process, f"{m['dynamo']:.3f}", f"{m['backend']:.3f}", f"{m['lowering']:.3f}",
                         f"{backend_totals[-1]:.3f}", f"{m['first_run']:.3f}", cache, "", ""])
        ratio = backend_totals[1] / max(backend_totals[0], 1e-9)
        rows[-1][-2:] = [f"{ratio:.3f}", r.aim(round(ratio, 3) <= 0.1,
                                               f"{name}: warm/cold backend compile time {ratio:.3f} > 0.1")]
    table("5. Compile time of a first process and of a second one using the first one's compile cache, s "
          "(no_grad forward; backend = the backend call (AOTAutograd, or the cache's load) + the lowering at "
          "the first call; first-run extra: the first call's time past Dynamo, the lowering and a later call)",
          ["model", "process", "Dynamo", "backend call", "lowering", "backend total", "first-run extra", "cache",
           "warm/cold backend", "<=0.1"], rows)


# -- 6. The fixed cost of a compiled call ------------------------------------------------------

def fixed_cost(r: Run) -> None:
    """Table 6: microseconds per call of x * 2 + 1 on 16 floats, calls back to back."""
    def tiny(x):
        return x * 2 + 1

    callables = {}

    def keep_pypto_callable(gm, example_inputs):
        callables["pypto"] = pypto_backend(gm, example_inputs)
        return callables["pypto"]

    x_pto, x_cpu = torch.randn(16, device="pto"), torch.randn(16)
    torch._dynamo.reset()
    ways = {"compiled, backend=\"pypto\"": (torch.compile(tiny, backend=keep_pypto_callable), x_pto),
            "Dynamo, a backend returning gm.forward, CPU": (torch.compile(tiny, backend=lambda gm, _: gm.forward), x_cpu),
            "eager pto, the same two ops": (tiny, x_pto)}
    for fn, x in ways.values():
        fn(x)  # compiles
    ways["pypto's callable alone"] = (callables["pypto"], x_pto)
    runs = {name: calibrated(lambda fn=fn, x=x: fn(x), "pto" if x.device.type == "pto" else "cpu", r.target)
            for name, (fn, x) in ways.items()}
    best = {name: float("inf") for name in runs}
    for _ in range(r.reps):
        for name, (run, inner) in runs.items():
            settle_and_warm(run)
            best[name] = min(best[name], best_time(run, 1, warmup=0) / inner)
    whole, ours = best["compiled, backend=\"pypto\""] * 1e6, best["pypto's callable alone"] * 1e6
    rows = [[name, f"{seconds * 1e6:.2f}", ""] for name, seconds in best.items()]
    rows[0][2] = r.aim(round(whole, 1) <= 5.0, f"tiny compiled graph: {whole:.1f} us per call (aim <= 5 us)")
    rows[3][2] = r.aim(round(ours, 1) <= 5.0, f"tiny compiled graph, pypto's callable: {ours:.1f} us (aim <= 5 us)")
    rows.append(["Dynamo's part (compiled call less pypto's callable)", f"{whole - ours:.2f}", ""])
    table(f"6. Fixed cost of a compiled call: x * 2 + 1 on 16 floats, us per call, back to back (best of {r.reps})",
          ["call", "us", "<=5"], rows)
    torch._dynamo.reset()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter repetitions")
    parser.add_argument("--compile-time", action="store_true", help="table 5 alone: cold and warm compile times")
    parser.add_argument("--compile-time-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.compile_time_child is not None:
        compile_time_child(args.compile_time_child)
        return
    pypto_torch.set_fallback_mode("silent")

    context_header("torch.compile benchmark: eager CPU, eager pto, backend=pypto, backend=inductor on CPU and on pto",
                   args.quick)
    r = Run(args.quick)
    start = time.perf_counter()
    whole_run = OtherLoad()
    fallbacks_before = pypto_torch.fallback_ops()
    if args.compile_time:
        compile_times(r)
        print_closing_summary(fallbacks_before, r, start, whole_run)
        return
    with fresh_inductor_cache(), fresh_compile_cache():
        all_cases = cases()
        warm_up_backends()
        for case in all_cases:
            for way in COMPILED_WAYS:
                if r.budget.exhausted():
                    case.errors[way] = r.note(r.budget.skipped(f"{way} on {case.name} not compiled"))
                else:
                    case.compile(way)
        softmax_eager = {}
        for case in all_cases[:len(SOFTMAX_SIZES)]:
            reference = Case("torch.softmax", lambda x: torch.softmax(x, -1), case.inputs["cpu"])
            reference.errors = {way: "not compiled" for way in COMPILED_WAYS}
            softmax_eager[case.name] = forward_times(r, reference)
        times = {case.name: forward_times(r, case) for case in all_cases}
        report(r, all_cases, softmax_eager, times)
        stage_breakdown(r, all_cases)
    compile_times(r)
    fixed_cost(r)
    print_closing_summary(fallbacks_before, r, start, whole_run,
                          "ops that went through the CPU fallback (eager pto and pypto's eager segments)")


if __name__ == "__main__":
    main()
