"""Every op of PyTorch's OpInfo database, at every dtype the CPU supports for it, every
sample: run on pto and compared with the CPU. Chunks of ops run in their own
interpreters, so a crash (a signal) or a hang is a failure naming the op, the dtype and
the sample, and the sweep goes on from the next sample.

    python3 tests/python/sweep_all_ops.py [--ops a,b] [--dtypes float32,bool] [--jobs 2] [--json out.json]
        [--markdown tables.md] [--ci | --samples N]

Each (op, dtype) pair seeds the CPU generator before its samples are made, on the CPU,
once (OpInfo reseeds before each sample too); they are then copied to pto. Both runs of
a sample start from the same seeds. The pytest test_sweep_crash_free.py runs a subset.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import torch
import torch.utils._python_dispatch
from torch.testing import assert_close

from opinfo_sweep import ONE_ULP

SEED = 0

DTYPES = [torch.complex64, torch.complex128, torch.float64, torch.float32, torch.float16, torch.bfloat16,
          torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool]

# float16/bfloat16 within one ulp (ONE_ULP: where pto rounds once and the CPU rounds an
# intermediate too); float32 within a few ulps, for sums and products accumulated in
# another order than the CPU's vectorised loops; float64 within assert_close's own
# default. Integers and bools must be equal.
TOLERANCE = {
    **ONE_ULP,
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.complex64: {"rtol": 1e-5, "atol": 1e-5},
    torch.float64: {"rtol": 1e-7, "atol": 1e-7},
    torch.complex128: {"rtol": 1e-7, "atol": 1e-7},
}
EXACT = {"rtol": 0, "atol": 0}

# Factories of uninitialised memory: their values are whatever the allocator handed
# out, so only shapes and dtypes are compared.
UNINITIALISED = {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted"}

# Ops whose tensor arguments PyTorch requires on the CPU, whatever the input's device
# (tensor_split's indices_or_sections): they stay there.
CPU_ARGUMENTS = {"tensor_split"}

HANG_SECONDS = 180  # no sample of op_db takes a tenth of this on the CPU
STARTUP_SECONDS = 120  # more for a worker's first event: importing torch, op_db and pypto_torch


def op_id(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def all_ops() -> dict:
    from torch.testing._internal.common_methods_invocations import op_db
    return {op_id(op): op for op in op_db}


def cpu_dtypes(op) -> list:
    """The sweep's dtypes the CPU supports for `op`, in DTYPES' order."""
    supported = op.supported_dtypes("cpu")
    return [dtype for dtype in DTYPES if dtype in supported]


def dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ---------------------------------------------------------------- one sample, in a worker

def copy_to(value, device):
    """`value` with every tensor copied to `device` (a copy even on the CPU: ops may write
    into their inputs), and factory kwargs (`device="cpu"`) pointed at `device`."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone() if device == "cpu" else value.detach().to(device)
    if isinstance(value, (list, tuple)) and not isinstance(value, torch.Size):
        return type(value)(copy_to(v, device) for v in value)
    if isinstance(value, dict):
        return {k: (device if k == "device" else copy_to(v, device)) for k, v in value.items()}
    return value


def leaves(value) -> list:
    """Tensors and other values of a result, flattened (tuples, lists, named tuples, dicts)."""
    if isinstance(value, (list, tuple)) and not isinstance(value, torch.Size):
        return [leaf for v in value for leaf in leaves(v)]
    if isinstance(value, dict):
        return [leaf for k in sorted(value) for leaf in leaves(value[k])]
    return [value]


def to_cpu(value):
    return value.detach().cpu() if isinstance(value, torch.Tensor) else value


def max_error(actual: torch.Tensor, expected: torch.Tensor):
    """The largest |actual - expected| where both are finite, or None when not comparable."""
    if actual.shape != expected.shape or actual.layout != torch.strided or expected.layout != torch.strided:
        return None
    wide = torch.complex128 if expected.is_complex() or actual.is_complex() else torch.float64
    a, e = actual.to(wide), expected.to(wide)
    finite = torch.isfinite(a) & torch.isfinite(e)
    return (a - e).abs()[finite].max().item() if finite.any() else 0.0


def compare(actual, expected, uninitialised=False):
    """None when `actual` (pto's result, on the CPU) matches `expected`, else (message, max error)."""
    got, want = leaves(actual), leaves(expected)
    if len(got) != len(want):
        return f"{len(got)} results, the CPU gives {len(want)}", None
    worst, message = None, None
    for a, e in zip(got, want):
        if isinstance(e, torch.Tensor) != isinstance(a, torch.Tensor):
            return f"a {type(a).__name__} where the CPU gives a {type(e).__name__}", None
        if isinstance(e, torch.Tensor):
            if uninitialised:
                if (a.shape, a.dtype) != (e.shape, e.dtype):
                    return f"{a.dtype}{list(a.shape)} where the CPU gives {e.dtype}{list(e.shape)}", None
                continue
            try:
                assert_close(a, e, equal_nan=True, **TOLERANCE.get(e.dtype, EXACT))
            except AssertionError as error:
                message = message or " ".join(str(error).split())[:300]
                err = max_error(a, e)
                worst = err if worst is None or (err is not None and err > worst) else worst
        elif isinstance(e, (int, float, complex)) and not isinstance(e, bool):
            try:
                assert_close(a, e, equal_nan=True, check_dtype=False, rtol=1e-5, atol=1e-5)
            except AssertionError as error:
                message = message or " ".join(str(error).split())[:300]
        elif a != e:
            message = message or f"{a!r} where the CPU gives {e!r}"[:300]
    return None if message is None else (message, worst)


class _SeededOps(torch.utils._python_dispatch.TorchDispatchMode):
    """Notes whether any aten op tagged nondeterministic_seeded (one that draws from a
    generator) runs."""

    seeded = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seeded |= torch.Tag.nondeterministic_seeded in func.tags
        return func(*args, **(kwargs or {}))


def draws_random_numbers(op, sample) -> bool:
    """Whether `op` draws random numbers on the CPU for `sample`: pto's Philox stream
    differs from the CPU's Mersenne Twister by design (as CUDA's does), so such results
    are not compared (test_random.py compares their statistics)."""
    cpu = copy_to([sample.input, sample.args, sample.kwargs], "cpu")
    with _SeededOps() as mode:
        op(cpu[0], *cpu[1], **cpu[2])
    return mode.seeded


# Ops whose indices may point at any of several equal elements (sort with stable=False,
# quickselect's kthvalue and median, topk, mode): the position of that output among the
# results, and of `dim` among the sample's args with its default.
TIES = {"sort": (1, 0, -1), "argsort": (0, 0, -1), "topk": (1, 1, -1),
        "kthvalue": (1, 1, -1), "median": (1, 0, None), "nanmedian": (1, 0, None), "mode": (1, 0, -1)}


def picks_equal_elements(op, sample, actual: list, expected: list) -> bool:
    """Whether pto's values equal the CPU's and its indices pick elements equal to those
    the CPU's pick: the two differ only in which of equal elements they chose."""
    index, dim_arg, dim = TIES[op.name]
    if len(actual) != len(expected) or index >= len(expected):
        return False
    values = [(a, e) for n, (a, e) in enumerate(zip(actual, expected)) if n != index]
    if compare([a for a, _ in values], [e for _, e in values]) is not None:
        return False
    dim = sample.kwargs.get("dim", sample.args[dim_arg] if len(sample.args) > dim_arg else dim)
    source = sample.input if sample.input.dim() > 0 else sample.input.view(1)
    if dim is None:
        source, dim = source.reshape(-1), 0

    def picked(indices):
        indices = indices.reshape(1) if indices.dim() == 0 else indices
        if indices.dim() < source.dim():
            indices = indices.unsqueeze(dim)
        return source.gather(dim, indices)

    try:
        return compare(picked(actual[index]), picked(expected[index])) is None
    except (RuntimeError, IndexError):
        return False


def widened(value):
    """`value` with floating tensors as float64 and complex ones as complex128."""
    if isinstance(value, torch.Tensor):
        if value.is_complex():
            return value.to(torch.complex128)
        return value.to(torch.float64) if value.is_floating_point() else value
    if isinstance(value, (list, tuple)) and not isinstance(value, torch.Size):
        return type(value)(widened(v) for v in value)
    if isinstance(value, dict):
        return {k: widened(v) for k, v in value.items()}
    return value


def no_less_accurate(op, sample, actual: list, expected: list, tolerance: dict | None = None) -> bool:
    """Whether pto's floating results, where they differ from the CPU's, are at least as
    close as the CPU's to the CPU's float64 result of the same inputs: the CPU rounded
    an intermediate where pto did not, or the other way round but no worse. Element by
    element where a tolerance (assert_close's rtol/atol; {} for its defaults) is given:
    each element outside it of the CPU's is no farther from float64 than the CPU's own
    (elements within it agree already), or else pto's largest error is no larger than the
    CPU's (where the CPU's errors are garbage, one may land nearer by chance)."""
    if not all(isinstance(e, torch.Tensor) and (e.is_floating_point() or e.is_complex()) for e in expected):
        return False
    try:
        exact = leaves(op(*[widened(v) for v in (sample.input, *sample.args)], **widened(sample.kwargs)))
    except Exception:
        return False
    if len(exact) != len(expected):
        return False
    for a, e, x in zip(actual, expected, exact):
        # NaN where the CPU's result has NaN, or only where float64's has: a NaN the CPU
        # gives for a number is an error of its own, not one pto must repeat.
        if not isinstance(x, torch.Tensor) or a.shape != e.shape or not (
                torch.equal(a.isnan(), e.isnan()) or torch.equal(a.isnan(), x.isnan())):
            return False
        if tolerance is not None and outside_no_farther(a, e, x, tolerance):
            continue
        pto_error, cpu_error = max_error(a, x), max_error(e, x)
        if pto_error is None or cpu_error is None or pto_error > cpu_error:
            return False
    return True


def outside_no_farther(actual: torch.Tensor, expected: torch.Tensor, exact: torch.Tensor, tolerance: dict) -> bool:
    """Whether every element of `actual` outside `tolerance` of `expected` is no farther
    from `exact` than `expected`'s (elements where either is not finite compare by NaN
    pattern, checked by the caller)."""
    if actual.shape != exact.shape or actual.layout != torch.strided or exact.layout != torch.strided:
        return False
    from torch.testing._comparison import default_tolerances

    rtol, atol = default_tolerances(expected) if not tolerance else (tolerance["rtol"], tolerance["atol"])
    wide = torch.complex128 if expected.is_complex() or actual.is_complex() else torch.float64
    a, e, x = actual.to(wide), expected.to(wide), exact.to(wide)
    outside = ~torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True) & torch.isfinite(a) & torch.isfinite(x)
    return bool(((a - x).abs()[outside] <= (e - x).abs()[outside]).all())


def first_line(error: BaseException) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:300]


def run_sample(op, sample, fallback_counts) -> dict:
    """Run one sample on the CPU and on pto from the same seeds; the verdict as a record."""
    cpu = copy_to([sample.input, sample.args, sample.kwargs], "cpu")
    torch.manual_seed(SEED)
    try:
        expected = op(cpu[0], *cpu[1], **cpu[2])
    except Exception as error:
        return {"status": "cpu_error", "msg": first_line(error)}
    before = fallback_counts()
    try:
        args = copy_to(sample.args, "cpu") if op.name in CPU_ARGUMENTS else copy_to(sample.args, "pto")
        pto = [copy_to(sample.input, "pto"), args, copy_to(sample.kwargs, "pto")]
        torch.manual_seed(SEED)
        torch.pto.manual_seed_all(SEED)
        actual = [to_cpu(leaf) for leaf in leaves(op(pto[0], *pto[1], **pto[2]))]
        torch.pto.synchronize()
    except Exception as error:
        return {"status": "pto_error", "msg": first_line(error)}
    after = fallback_counts()
    record = {"fallback": sorted(name for name, count in after.items() if count != before.get(name, 0))}
    verdict = compare(actual, leaves(expected), uninitialised=op.name in UNINITIALISED)
    if verdict is None:
        return {**record, "status": "pass"}
    if draws_random_numbers(op, sample):
        return {**record, "status": "random"}
    if op.name in TIES and picks_equal_elements(op, sample, actual, leaves(expected)):
        return {**record, "status": "ties"}
    message, worst = verdict
    status = "closer" if no_less_accurate(op, sample, actual, leaves(expected)) else "mismatch"
    return {**record, "status": status, "msg": message, "max_error": worst}


def inject(kind: str) -> None:
    """A crash or a hang where PTO_SWEEP_FAULT=op:dtype:index:crash|hang says, for the
    tests of the sweep's own reporting."""
    if kind == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(3600)


def work(plan: list, resume: list | None, out, limit: int | None = None) -> None:
    """Run `plan` ([op id, [dtype names]] ...), the first `limit` samples of each pair
    (all by default), writing one JSON line per event to `out`,
    each written before the step it names, so a crash leaves the step it died in last.
    `resume` ([op id, dtype name, sample index]) skips the plan up to and including it.
    Samples are made on the CPU after seeding (OpInfo reseeds before each sample too), so
    a worker resuming after a crash makes the same ones."""
    import pypto_torch

    pypto_torch.set_fallback_mode("silent")
    ops = all_ops()

    def emit(**event):
        out.write(json.dumps(event) + "\n")
        out.flush()

    fault = os.environ.get("PTO_SWEEP_FAULT", "").split(":")
    skipping = resume is not None
    for name, dtype_names in plan:
        op = ops[name]
        for dname in dtype_names:
            first = 0
            if skipping:
                if [name, dname] != resume[:2]:
                    continue
                skipping, first = False, resume[2] + 1
            emit(ev="pair", op=name, dtype=dname)
            start = time.monotonic()
            torch.manual_seed(SEED)
            try:
                samples = list(op.sample_inputs("cpu", getattr(torch, dname), requires_grad=False))
            except Exception as error:
                emit(ev="samples_error", op=name, dtype=dname, msg=first_line(error))
                continue
            emit(ev="samples", op=name, dtype=dname, n=len(samples[:limit]), of=len(samples))
            for index in range(first, len(samples[:limit])):
                emit(ev="start", op=name, dtype=dname, i=index)
                if fault and fault[:3] == [name, dname, str(index)]:
                    inject(fault[3])
                emit(ev="done", op=name, dtype=dname, i=index,
                     **run_sample(op, samples[index], pypto_torch.fallback_ops))
            emit(ev="pair_end", op=name, dtype=dname, seconds=round(time.monotonic() - start, 3))
    emit(ev="end")


# ---------------------------------------------------------------- the parent

@dataclass
class Chunk:
    plan: list
    limit: int | None = None  # samples per pair
    resume: list | None = None
    events: list = field(default_factory=list)
    failures: list = field(default_factory=list)  # crashes and hangs


def _launch(chunk: Chunk, workdir: str, hang_seconds: float):
    fd, path = tempfile.mkstemp(suffix=".jsonl", dir=workdir)
    os.close(fd)
    log = open(path + ".log", "w+")
    args = json.dumps({"plan": chunk.plan, "resume": chunk.resume, "limit": chunk.limit, "out": path})
    process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", args],
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return {"process": process, "path": path, "log": log, "size": 0, "seen": time.monotonic(),
            "hang": hang_seconds}


def _finish(chunk: Chunk, running: dict, hung: bool) -> bool:
    """Read a worker's events into `chunk`; on a crash or hang record it and set the chunk
    to resume after the sample that died. Returns whether the chunk needs another worker."""
    with open(running["path"]) as f:
        events = [json.loads(line) for line in f if line.endswith("\n")]
    running["log"].seek(0)
    tail = running["log"].read()[-2000:]
    running["log"].close()
    os.unlink(running["path"])
    os.unlink(running["path"] + ".log")
    chunk.events += events
    rc = running["process"].returncode
    if events and events[-1]["ev"] == "end" and rc == 0:
        return False
    last = next((e for e in reversed(events) if e["ev"] in ("start", "done", "pair", "samples")), None)
    kind = "hang" if hung else "crash"
    how = f"no progress for {running['hang']:.0f} s" if hung else \
        (f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}")
    if last is None:
        chunk.failures.append({"kind": kind, "op": chunk.plan[0][0], "dtype": None, "i": None, "how": how,
                               "output": tail})
        return False
    at_sample = last["ev"] in ("start", "done")  # in a sample, or tidying up after one
    chunk.failures.append({"kind": kind, "op": last["op"], "dtype": last["dtype"],
                           "i": last["i"] if at_sample else None, "how": how, "output": tail})
    chunk.resume = [last["op"], last["dtype"], last["i"] if at_sample else 1 << 30]
    return True


def run_chunks(chunks: list, jobs: int = 2, hang_seconds: float = HANG_SECONDS, progress=None) -> list:
    """Run every chunk in worker interpreters, at most `jobs` at once."""
    waiting, running = list(chunks), {}
    with tempfile.TemporaryDirectory(prefix="pto_sweep_") as workdir:
        while waiting or running:
            while waiting and len(running) < jobs:
                chunk = waiting.pop(0)
                running[id(chunk)] = (chunk, _launch(chunk, workdir, hang_seconds))
            time.sleep(0.2)
            for key, (chunk, worker) in list(running.items()):
                size = os.path.getsize(worker["path"])
                if size != worker["size"]:
                    worker["size"], worker["seen"] = size, time.monotonic()
                limit = worker["hang"] + (0 if worker["size"] else STARTUP_SECONDS)
                hung = worker["process"].poll() is None and time.monotonic() - worker["seen"] > limit
                if hung:
                    os.killpg(worker["process"].pid, signal.SIGKILL)
                    worker["process"].wait()
                if worker["process"].poll() is None:
                    continue
                del running[key]
                if _finish(chunk, worker, hung):
                    waiting.insert(0, chunk)
                elif progress:
                    progress(chunk)
    return chunks


def plan_all(ops: dict, names=None, dtypes=None) -> list:
    """[op id, [dtype names]] for the named ops (all by default), at every CPU dtype or
    those of `dtypes` the CPU supports."""
    plan = []
    for name in names or ops:
        chosen = [d for d in cpu_dtypes(ops[name]) if dtypes is None or d in dtypes]
        if chosen:
            plan.append([name, [dtype_name(d) for d in chosen]])
    return plan


# CI sweeps the first 32 samples of each of ci_plan's pairs: the few ops with hundreds
# (max_pool2d has 1440 per dtype) would otherwise take half its time.
CI_SAMPLES = 32


def ci_plan(ops: dict) -> list:
    """The pairs CI sweeps: every op at float32 (at its first CPU dtype when it has no
    float32) and one more of its CPU dtypes, chosen by the op's place in op_db so that
    each dtype comes round in turn: every op once, every dtype on many ops."""
    plan = []
    for place, name in enumerate(ops):
        supported = cpu_dtypes(ops[name])
        if not supported:
            continue
        first = torch.float32 if torch.float32 in supported else supported[0]
        others = [d for d in supported if d != first]
        chosen = [first] + ([others[place % len(others)]] if others else [])
        plan.append([name, [dtype_name(d) for d in DTYPES if d in chosen]])
    return plan


def chunked(plan: list, ops_per_chunk: int, limit: int | None = None) -> list:
    return [Chunk(plan[i:i + ops_per_chunk], limit) for i in range(0, len(plan), ops_per_chunk)]


STATUSES = ("pass", "mismatch", "closer", "pto_error", "cpu_error", "random", "ties", "crash", "hang")


def summarize(chunks: list) -> dict:
    """Counts per status, and per (op, dtype) pair its samples' statuses, the first
    message of each status and the largest error of its mismatches."""
    pairs, failures = {}, []
    for chunk in chunks:
        failures += chunk.failures
        for e in chunk.events:
            key = (e.get("op"), e.get("dtype"))
            if e["ev"] == "pair":
                pairs.setdefault(key, {"op": e["op"], "dtype": e["dtype"], "samples": 0, "seconds": 0.0,
                                       "status": {}, "fallback": set(), "max_error": None, "first": {}})
            elif e["ev"] == "samples":
                pairs[key]["samples"] = e["n"]
            elif e["ev"] == "samples_error":
                pairs[key]["first"]["samples_error"] = e["msg"]
            elif e["ev"] == "pair_end":
                pairs[key]["seconds"] += e["seconds"]
            elif e["ev"] == "done":
                pair = pairs[key]
                pair["status"][e["status"]] = pair["status"].get(e["status"], 0) + 1
                pair["fallback"].update(e.get("fallback", ()))
                if "msg" in e:
                    pair["first"].setdefault(e["status"], f"sample {e['i']}: {e['msg']}")
                if e.get("max_error") is not None:
                    pair["max_error"] = max(pair["max_error"] or 0.0, e["max_error"])
    for failure in failures:
        if failure["dtype"] is not None:
            status = pairs[(failure["op"], failure["dtype"])]["status"]
            status[failure["kind"]] = status.get(failure["kind"], 0) + 1
    rows = [{**p, "fallback": sorted(p["fallback"])} for p in pairs.values()]
    return {"ops": len({p["op"] for p in rows}), "pairs": len(rows), "samples": sum(p["samples"] for p in rows),
            "count": {status: sum(p["status"].get(status, 0) for p in rows) for status in STATUSES},
            "seconds": round(sum(p["seconds"] for p in rows), 1), "failures": failures, "pairs_detail": rows}


def with_status(summary: dict, status: str) -> list:
    return [p for p in summary["pairs_detail"] if p["status"].get(status)]


def table(summary: dict) -> str:
    c = summary["count"]
    lines = [f"ops {summary['ops']}, (op, dtype) pairs {summary['pairs']}, samples {summary['samples']}",
             f"passed {c['pass']}, mismatched {c['mismatch']} (and {c['closer']} where pto is no farther than the "
             f"CPU from float64), raised on pto only {c['pto_error']}, crashed {c['crash']}, hung {c['hang']}; "
             f"draw random numbers (not compared) {c['random']}, indices pick other equal elements {c['ties']}, "
             f"raised on the CPU too {c['cpu_error']}"]
    for status, title in (("mismatch", "Mismatched"),
                          ("closer", "Mismatched, pto no farther than the CPU from the float64 result")):
        lines += ["", f"{title} (op dtype: samples/of, max |error|, native or fallback; first message):"]
        for p in with_status(summary, status):
            where = "fallback " + ",".join(p["fallback"]) if p["fallback"] else "native"
            lines.append(f"  {p['op']} {p['dtype']}: {p['status'][status]}/{p['samples']}, "
                         f"max error {p['max_error']}, {where}; {p['first'][status]}")
    lines += ["", "Raised on pto where the CPU succeeded:"]
    for p in with_status(summary, "pto_error"):
        lines.append(f"  {p['op']} {p['dtype']}: {p['status']['pto_error']}/{p['samples']}; {p['first']['pto_error']}")
    lines += ["", "Crashed or hung:"]
    for f in summary["failures"]:
        lines.append(f"  {f['kind']}: {f['op']} {f['dtype']} sample {f['i']}: {f['how']}")
    return "\n".join(lines)


def markdown(summary: dict) -> str:
    """The summary as the tables of docs/SWEEP.md."""
    c = summary["count"]

    def cell(text) -> str:
        return str(text).replace("|", "\\|")

    lines = ["| ops | (op, dtype) pairs | samples | passed | mismatched | pto no farther from float64 "
             "| raised on pto only | crashed | hung | random (not compared) | other equal elements picked "
             "| raised on the CPU too |", "|" + "---|" * 12,
             f"| {summary['ops']} | {summary['pairs']} | {summary['samples']} | {c['pass']} | {c['mismatch']} "
             f"| {c['closer']} | {c['pto_error']} | {c['crash']} | {c['hang']} | {c['random']} | {c['ties']} "
             f"| {c['cpu_error']} |"]
    for status, title in (("mismatch", "Mismatched"),
                          ("closer", "Mismatched, pto no farther than the CPU from the float64 result")):
        lines += ["", f"### {title}", "", "| op | dtype | samples | max abs error | runs | first message |",
                  "|---|---|---|---|---|---|"]
        for p in with_status(summary, status):
            where = "fallback: " + ", ".join(p["fallback"]) if p["fallback"] else "native"
            lines.append(f"| {p['op']} | {p['dtype']} | {p['status'][status]}/{p['samples']} | "
                         f"{p['max_error']:.3g} | {cell(where)} | {cell(p['first'][status][:160])} |"
                         if p["max_error"] is not None else
                         f"| {p['op']} | {p['dtype']} | {p['status'][status]}/{p['samples']} | - | {cell(where)} | "
                         f"{cell(p['first'][status][:160])} |")
    lines += ["", "### Raised on pto where the CPU succeeded", "", "| op | dtypes | samples | first message |",
              "|---|---|---|---|"]
    by_op = {}
    for p in with_status(summary, "pto_error"):
        by_op.setdefault(p["op"], []).append(p)
    for op, rows in by_op.items():
        message = rows[0]["first"]["pto_error"].split(": ", 1)[1]
        lines.append(f"| {op} | {', '.join(r['dtype'] for r in rows)} | "
                     f"{sum(r['status']['pto_error'] for r in rows)}/{sum(r['samples'] for r in rows)} | "
                     f"{cell(message[:200])} |")
    lines += ["", "### Crashed or hung", ""]
    lines += [f"- {f['kind']}: {f['op']} {f['dtype']} sample {f['i']}: {f['how']}" for f in summary["failures"]]
    lines += ["none"] if not summary["failures"] else []
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help="comma-separated op ids (name or name.variant); default: all of op_db")
    parser.add_argument("--dtypes", help="comma-separated dtype names; default: every one the CPU supports")
    parser.add_argument("--ci", action="store_true",
                        help=f"what CI sweeps: ci_plan's pairs, their first {CI_SAMPLES} samples")
    parser.add_argument("--samples", type=int, help="only the first SAMPLES samples of each pair")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--chunk", type=int, default=10, help="ops per worker interpreter")
    parser.add_argument("--hang", type=float, default=HANG_SECONDS, help="seconds without progress that make a hang")
    parser.add_argument("--json", help="write the summary, every pair included, to this file")
    parser.add_argument("--markdown", help="write the tables of docs/SWEEP.md to this file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        job = json.loads(args.worker)
        with open(job["out"], "a") as out:
            work(job["plan"], job["resume"], out, job["limit"])
        return 0
    ops = all_ops()
    names = args.ops.split(",") if args.ops else None
    unknown = [name for name in names or () if name not in ops]
    if unknown:
        parser.error(f"not in op_db: {', '.join(unknown)}")
    dtypes = {getattr(torch, d) for d in args.dtypes.split(",")} if args.dtypes else None
    plan = plan_all(ops, names, dtypes)
    if args.ci:
        chosen = {name: set(dtype_names) for name, dtype_names in ci_plan(ops)}
        plan = [[name, [d for d in dtype_names if d in chosen[name]]] for name, dtype_names in plan]
    limit = CI_SAMPLES if args.ci else args.samples
    chunks = chunked([entry for entry in plan if entry[1]], args.chunk, limit)
    done = []
    start = time.monotonic()

    def progress(chunk):
        done.append(chunk)
        print(f"[{time.monotonic() - start:7.0f} s] {len(done)}/{len(chunks)} chunks, last {chunk.plan[-1][0]}",
              file=sys.stderr, flush=True)

    summary = summarize(run_chunks(chunks, args.jobs, args.hang, progress))
    summary["wall_seconds"] = round(time.monotonic() - start, 1)
    print(table(summary))
    print(f"wall time {summary['wall_seconds']} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(summary))
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
