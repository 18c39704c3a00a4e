"""The harness itself: results come back per rank on the CPU; an exception, a crash
and a hang each fail with what happened on which rank, and nothing is left running."""

import os
import signal
import time

import pytest
import torch

import harness


def returns_rank_tensors():
    import torch.distributed as dist

    device = harness.init()
    x = torch.full((2,), float(dist.get_rank()), device=device)
    dist.all_reduce(x)
    return {"rank": int(os.environ["RANK"]), "x": x, "seeded": torch.randn(2), "pid": os.getpid()}


def rank_one_raises_rank_zero_waits():
    if os.environ["RANK"] == "1":
        raise ValueError("rank one failed on purpose")
    time.sleep(600)  # as if stuck in a collective with the dead rank


def rank_zero_segfaults():
    if os.environ["RANK"] == "0":
        os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(600)


def hangs():
    time.sleep(600)


def _gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_results_come_back_on_the_cpu_in_rank_order():
    results = harness.run(returns_rank_tensors, 2, timeout=120)
    assert [r["rank"] for r in results] == [0, 1]
    for r in results:
        assert r["x"].device.type == "cpu" and torch.equal(r["x"], torch.ones(2))
        torch.manual_seed(harness.SEED)
        assert torch.equal(r["seeded"], torch.randn(2))  # every rank seeded alike
        assert _gone(r["pid"])


def test_an_exception_fails_with_its_traceback_and_the_others_are_killed():
    start = time.monotonic()
    with pytest.raises(harness.RanksFailed) as failure:
        harness.run(rank_one_raises_rank_zero_waits, 2, timeout=120, grace=2)
    message = str(failure.value)
    assert "ValueError: rank one failed on purpose" in message
    assert "rank 1: exit code 1" in message and "rank 0: killed by signal SIGKILL" in message
    assert time.monotonic() - start < 60


def test_a_crash_fails_with_the_signal():
    with pytest.raises(harness.RanksFailed, match="rank 0: killed by signal SIGSEGV"):
        harness.run(rank_zero_segfaults, 2, timeout=120, grace=2)


def test_a_hang_fails_at_the_timeout():
    start = time.monotonic()
    with pytest.raises(harness.RanksFailed, match="TIMEOUT after 8 s"):
        harness.run(hangs, 1, timeout=8)
    assert time.monotonic() - start < 20
