"""Every benchmark, one after another, each within its share of the time budget, then one
summary of the whole run: each script's wall time against its budget, and every aim line.

    python3 benchmarks/run_all.py [--quick] [--isa avx2] [--only bench_ops,bench_compile]

`make bench` runs it (`make bench ISA=avx2`: with --isa avx2). The whole run fits in 15
minutes on a 2-core host: each script gets a budget (PTO_BENCH_BUDGET_S), skips what no
longer fits in it and says so; one that runs past its budget by more than GRACE seconds, or
past the whole run's 15 minutes, is stopped, with every process it started (the scripts
after it are not run, and the summary says so). Each script appends the aims it checks to the file
PTO_BENCH_AIMS names, for the summary.

--isa avx2 caps every side to AVX2 on a host that has AVX-512 (torch's kernels, its oneDNN
and MKL, the pto kernels with theirs: _timing.ISA_CAPS), to measure what an AVX2-only host
gets. It is an emulation: the caches, memory bandwidth and clock stay this host's.
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import ISA_CAPS, NO, YES, host_description, table

HERE = Path(__file__).resolve().parent
TOTAL_BUDGET = 15 * 60  # seconds for the whole run on a 2-core host
# Each script's share, in seconds, by what it measured on a 2-core host (--quick: a third).
BUDGETS = {
    "bench_runtime": 45,
    "bench_ops": 270,
    "bench_compile": 240,  # 150-260 s with the stage table; bench_ops used 216 of its 300
    "bench_pypto": 45,
    "bench_distributed": 150,
    "bench_amp": 45,
    "bench_graphs": 45,
    "bench_memory": 30,
}
GRACE = 60  # seconds past its budget after which a script is stopped


def run_script(script: str, budget: float, quick: bool, env: dict,
               time_left: float = float("inf")) -> tuple[float, str]:
    """Run one benchmark in its own process group, its output through to ours; its wall time
    and how it ended. It is stopped GRACE seconds past its budget, or once the whole run's
    `time_left` is spent."""
    command = [sys.executable, str(HERE / f"{script}.py")] + (["--quick"] if quick else [])
    env = dict(env, PTO_BENCH_BUDGET_S=f"{budget:g}")
    limit = min(budget + GRACE, time_left)
    start = time.perf_counter()
    # A session of its own: stopping it stops the ranks bench_distributed spawns too.
    process = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        code = process.wait(timeout=limit)
        status = "ok" if code == 0 else f"failed, exit status {code}"
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        status = f"stopped {GRACE} s past its budget" if limit < time_left else "stopped: the whole run's time is spent"
    return time.perf_counter() - start, status


def summary(results: dict, aims_path: str, wall: float, total_budget: float) -> None:
    """The closing summary: the host, each script's time and aims, every aim line."""
    with open(aims_path, encoding="utf-8") as aims_file:
        lines = [line.rstrip("\n").split("\t", 2) for line in aims_file if line.strip()]
    aims = [line for line in lines if line[1] != "note"]
    print("\n" + "=" * 100 + "\nmake bench summary")
    print("\n".join(f"  {line}" for line in host_description()))
    rows = []
    for script, (budget, seconds, status) in results.items():
        marks = [mark for name, mark, _ in aims if name == script]
        met = f"{marks.count(YES)} of {len(marks)}" if marks else "-"
        rows.append([script, f"{budget:g}", f"{seconds:.0f}", met, status])
    table("Scripts, wall time against budget, s", ["script", "budget", "wall", "aims met", "status"], rows)
    verdict = "within" if wall <= total_budget else "OVER"
    print(f"total wall time {wall:.0f} s ({wall / 60:.1f} min), {verdict} the {total_budget / 60:.0f}-minute budget")
    print(f"\nAims ({YES} met, {NO} missed), {sum(m == YES for _, m, _ in aims)} of {len(aims)} met:")
    for script in results:
        marked = [f"  {mark} {what}" for name, mark, what in aims if name == script]
        notes = [f"  note: {what}" for name, kind, what in lines if name == script and kind == "note"]
        if marked or notes:
            print(f"{script}:\n" + "\n".join(marked + notes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="each script's shorter run, a third of the budget")
    parser.add_argument("--isa", choices=sorted(ISA_CAPS), help="cap every side to this vector level (an emulation)")
    parser.add_argument("--only", help="comma-separated scripts to run (default: all)")
    args = parser.parse_args()
    scripts = args.only.split(",") if args.only else list(BUDGETS)
    unknown = [s for s in scripts if s not in BUDGETS]
    if unknown:
        parser.error(f"unknown script(s) {', '.join(unknown)}; known: {', '.join(BUDGETS)}")

    scale = 1 / 3 if args.quick else 1
    # Here too, so that the summary's host lines say so.
    os.environ.update(ISA_CAPS[args.isa] if args.isa else {})
    env = dict(os.environ)
    results = {}
    start = time.perf_counter()
    with tempfile.NamedTemporaryFile("w", prefix="bench_aims_", suffix=".tsv") as aims:
        env["PTO_BENCH_AIMS"] = aims.name
        for script in scripts:
            budget = BUDGETS[script] * scale
            time_left = TOTAL_BUDGET * scale - (time.perf_counter() - start)
            if time_left <= 0:
                results[script] = (budget, 0.0, "not run: the whole run's time is spent")
                continue
            print(f"\n{'=' * 100}\n{script} (budget {budget:.0f} s)", flush=True)
            results[script] = (budget, *run_script(script, budget, args.quick, env, time_left))
        summary(results, aims.name, time.perf_counter() - start, TOTAL_BUDGET * scale)
    sys.exit(0 if all(status == "ok" for _, _, status in results.values()) else 1)


if __name__ == "__main__":
    main()
