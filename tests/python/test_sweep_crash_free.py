"""No op of PyTorch's OpInfo database crashes or hangs on pto (sweep_all_ops.py): chunks
of ops run in worker interpreters, and a signal or a stall is reported with the op, the
dtype and the sample that caused it, while the sweep goes on.

What CI covers: the full sweep (every op, every dtype the CPU supports, every sample:
697 ops with a CPU dtype, 5,882 (op, dtype) pairs, 132,051 samples) took 20 to 37
minutes on this project's 2-core machine (shared with other builds), so it is the script
(`python3 tests/python/sweep_all_ops.py`, results in docs/SWEEP.md). CI runs
sweep_all_ops.ci_plan(): every op of op_db with a CPU dtype at float32 (at its first CPU
dtype when it has no float32) plus one more of its CPU dtypes, rotating through the
dtypes by the op's place in op_db (1392 pairs: every op once, every dtype on 40 or more
ops), the first CI_SAMPLES (32) samples of each pair, seeded as the script seeds them.
It asserts no crash and no hang; wrong results and errors raised on pto only are the
script's report. The whole file took 4 minutes on the same shared machine.
"""

import pytest

import sweep_all_ops as sweep

PARTS = 4  # each a pair of worker interpreters, whose start (torch, op_db) costs seconds
PLAN = sweep.ci_plan(sweep.all_ops())


def describe(failure: dict) -> str:
    return (f"{failure['kind']} in {failure['op']} {failure['dtype']} sample {failure['i']} ({failure['how']}):\n"
            f"{failure['output'][-800:]}")


@pytest.mark.parametrize("part", range(PARTS))
def test_no_op_crashes_or_hangs(part):
    plan = PLAN[part::PARTS]  # every PARTS-th op: the heavy ones spread over the parts
    halves = sweep.chunked(plan, -(-len(plan) // 2), sweep.CI_SAMPLES)  # one worker per core
    summary = sweep.summarize(sweep.run_chunks(halves, jobs=2))
    assert not summary["failures"], "\n\n".join(describe(f) for f in summary["failures"])
    assert summary["pairs"] == sum(len(dtypes) for _, dtypes in plan)


def test_the_ci_plan_covers_every_op_of_op_db_with_a_cpu_dtype():
    ops = sweep.all_ops()
    assert {name for name, _ in PLAN} == {name for name, op in ops.items() if sweep.cpu_dtypes(op)}
    assert {dtype for _, dtypes in PLAN for dtype in dtypes} == {sweep.dtype_name(d) for d in sweep.DTYPES}


@pytest.mark.parametrize("kind", ["crash", "hang"])
def test_a_crash_or_hang_names_the_sample_and_the_sweep_goes_on(kind, monkeypatch):
    monkeypatch.setenv("PTO_SWEEP_FAULT", f"add:float32:2:{kind}")
    plan = [["add", ["float32", "int64"]], ["neg", ["float32"]]]
    summary = sweep.summarize(sweep.run_chunks(sweep.chunked(plan, 2), jobs=1, hang_seconds=5))
    [failure] = summary["failures"]
    assert (failure["kind"], failure["op"], failure["dtype"], failure["i"]) == (kind, "add", "float32", 2)
    assert failure["how"] == ("signal SIGSEGV" if kind == "crash" else "no progress for 5 s")
    add_float32 = next(p for p in summary["pairs_detail"] if (p["op"], p["dtype"]) == ("add", "float32"))
    assert add_float32["status"] == {"pass": add_float32["samples"] - 1, kind: 1}
    assert summary["pairs"] == 3 and summary["count"]["pass"] == summary["samples"] - 1
