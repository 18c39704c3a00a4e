"""The benchmarks' harness (benchmarks/_timing.py, benchmarks/run_all.py): the header names
the host's vector features and a cap set by the environment, a CPU reference without a
fast path is named, aims reach the summary, and a script past its budget is stopped with
every process it started. No figure is timed here: timings belong in benchmarks/."""

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import _timing  # noqa: E402
import run_all  # noqa: E402

HEADER = f"""
    import sys
    sys.path.insert(0, {str(BENCHMARKS)!r})
    import torch
    import _timing
    _timing.context_header("harness", quick=True)
    print("slow bf16:", _timing.cpu_gemm_slow_path(torch.bfloat16))
    print("slow float32:", _timing.cpu_gemm_slow_path(torch.float32))
"""


def host_flags() -> set[str]:
    with open("/proc/cpuinfo") as info:
        return set(next((l.split(":", 1)[1].split() for l in info if l.startswith(("flags", "Features"))), []))


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="reads the CPU's flags from /proc/cpuinfo")
def test_header_lists_the_vector_features_the_host_has(python):
    result = python(HEADER)
    assert result.returncode == 0, result.stderr
    listed = next(l for l in result.stdout.splitlines() if "vector features:" in l).split(":", 1)[1].split()
    assert set(listed) == host_flags() & set(_timing.VECTOR_FEATURES)
    assert "torch CPU capability" in result.stdout and "pto vector target" in result.stdout
    assert "capped" not in result.stdout.split("slow bf16")[0]
    assert "slow float32: None" in result.stdout


@pytest.mark.skipif("avx2" not in host_flags(), reason="the AVX2 cap needs an x86 host with AVX2")
def test_avx2_cap_is_said_and_names_the_bf16_gemm_without_a_fast_path(python):
    result = python(HEADER, **_timing.ISA_CAPS["avx2"])
    assert result.returncode == 0, result.stderr
    assert "capped to AVX2 by environment" in result.stdout
    assert "torch CPU capability AVX2" in result.stdout
    slow = next(l for l in result.stdout.splitlines() if l.startswith("slow bf16:"))
    assert "no fast path" in slow and "AVX2" in slow, slow
    assert "slow float32: None" in result.stdout


def test_aims_are_marked_and_recorded_for_the_summary(tmp_path, monkeypatch):
    monkeypatch.setenv("PTO_BENCH_AIMS", str(tmp_path / "aims.tsv"))
    aims = _timing.Aims("bench_example")
    marks = [aims.aim(True, "add: pto/CPU time 0.90 (aim <= 1)"), aims.aim(False, "exp: pto/CPU time 1.20 (aim <= 1)"),
             aims.aim(None, "not measured")]
    assert marks == [_timing.YES, _timing.NO, "?"]
    assert (aims.checked, aims.missed) == (2, ["exp: pto/CPU time 1.20 (aim <= 1)"])
    assert (tmp_path / "aims.tsv").read_text(encoding="utf-8").splitlines() == [
        f"bench_example\t{_timing.YES}\tadd: pto/CPU time 0.90 (aim <= 1)",
        f"bench_example\t{_timing.NO}\texp: pto/CPU time 1.20 (aim <= 1)"]


def test_budget_counts_down_and_says_what_it_skipped(monkeypatch):
    monkeypatch.setenv("PTO_BENCH_BUDGET_S", "0")
    budget = _timing.Budget(default=100)
    assert budget.seconds == 0 and budget.exhausted()
    assert budget.skipped("bench_matmul") == "skipped: bench_matmul (time budget of 0 s spent)"
    monkeypatch.delenv("PTO_BENCH_BUDGET_S")
    assert not _timing.Budget(default=100).exhausted()


def test_a_repetition_is_timed_after_the_cores_ran_it_untimed_for_their_ramp_up():
    """settle_and_warm runs the repetition at least once, and again until RAMP_UP_SECONDS
    have passed since it started, before the caller times it."""
    starts = []
    _timing.settle_and_warm(lambda: starts.append(time.perf_counter()))
    assert len(starts) >= 2 and time.perf_counter() - starts[0] >= _timing.RAMP_UP_SECONDS
    slow = []
    _timing.settle_and_warm(lambda: (slow.append(1), time.sleep(2 * _timing.RAMP_UP_SECONDS)))
    assert len(slow) == 1


def test_a_script_past_its_budget_is_stopped_with_what_it_started(tmp_path, monkeypatch):
    child_pid = tmp_path / "child.pid"
    (tmp_path / "bench_hangs.py").write_text(textwrap.dedent(f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(child_pid)!r}, "w").write(str(child.pid))
        time.sleep(60)
    """))
    monkeypatch.setattr(run_all, "HERE", tmp_path)
    monkeypatch.setattr(run_all, "GRACE", 1)
    wall, status = run_all.run_script("bench_hangs", budget=1, quick=False, env=dict(os.environ))
    assert status == "stopped 1 s past its budget" and wall < 30
    pid = int(child_pid.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # killed with its group; reaped by init shortly after
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the script's child {pid} outlived it")


def test_a_script_past_the_whole_runs_time_is_stopped(tmp_path, monkeypatch):
    (tmp_path / "bench_long.py").write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setattr(run_all, "HERE", tmp_path)
    wall, status = run_all.run_script("bench_long", budget=100, quick=False, env=dict(os.environ), time_left=1)
    assert status == "stopped: the whole run's time is spent" and wall < 30


def test_a_script_that_fails_is_reported_by_its_exit_status(tmp_path, monkeypatch):
    (tmp_path / "bench_fails.py").write_text("raise SystemExit(3)\n")
    monkeypatch.setattr(run_all, "HERE", tmp_path)
    assert run_all.run_script("bench_fails", budget=30, quick=False, env=dict(os.environ))[1] == \
        "failed, exit status 3"
