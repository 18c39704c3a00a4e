"""Shared helpers. Tests run with the CPU fallback silenced; the fallback's own
warnings are tested in fresh interpreters (they fire once per op per process)."""

import os
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest
import torch

import pypto_torch

pypto_torch.set_fallback_mode("silent")

# The compile cache on disk (pypto_torch/compile/disk_cache.py) is on by default: the
# suite, and the interpreters it starts, keep its entries in a folder of their own,
# removed at the end, never in the user's home.
_COMPILE_CACHE = tempfile.mkdtemp(prefix="pto_test_compile_cache_")
os.environ["PTO_CACHE_DIR"] = _COMPILE_CACHE


def pytest_sessionfinish(session):
    shutil.rmtree(_COMPILE_CACHE, ignore_errors=True)


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter with extra environment variables."""
    full_env = {**os.environ, **env}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=full_env, timeout=300)


@pytest.fixture
def python():
    return run_python


def run_failing_at_next_sync(statement: str, setup: str = 'x = torch.randn(3, 4, device="pto")') -> str:
    """Queue `statement` (an op whose kernel fails) after `setup` in a fresh interpreter,
    then synchronize. Checks the process lives on and the device still computes
    (x * 2 on it equals the CPU's), and returns the output ("raised: ..." lines)."""
    result = run_python(f"""
        import torch
        {setup}
        {statement}   # queued: returns at once
        try:
            torch.pto.synchronize()
        except RuntimeError as error:
            print("raised:", error)
        print("usable:", torch.equal((x * 2).cpu(), x.cpu() * 2))
    """, PTO_FALLBACK="silent")
    assert result.returncode == 0, result.stderr
    assert "usable: True" in result.stdout, result.stdout
    return result.stdout


@pytest.fixture
def fails_at_next_sync():
    return run_failing_at_next_sync


def pytest_configure(config):
    config.addinivalue_line("markers", "timing: asserts on measured times; skipped under PTO_SIM_STRICT=1")


def pytest_collection_modifyitems(items):
    """Under PTO_SIM_STRICT=1 every launch waits until it has run and a first touch of
    device memory faults in a 2 MiB page inside the kernel: times say nothing then."""
    if os.environ.get("PTO_SIM_STRICT") != "1":
        return
    skip = pytest.mark.skip(reason="asserts on measured times, which PTO_SIM_STRICT=1 distorts "
                                   "(blocking launches, first touches of device memory)")
    for item in items:
        if "timing" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seeded():
    """Every test starts from the same generators: torch's (CPU and pto), NumPy's and
    Python's, whichever tests ran before it."""
    torch.manual_seed(0)
    torch.pto.manual_seed_all(0)
    np.random.seed(0)
    random.seed(0)


def pytest_terminal_summary(terminalreporter):
    """How much of PyTorch's OpInfo database the sweeps compared with the CPU."""
    from opinfo_sweep import SWEPT

    forward, gradient = SWEPT["forward"], SWEPT["gradient"]
    if forward or gradient:
        ops = {op for op, _ in forward} | set(gradient)
        terminalreporter.write_line(
            f"OpInfo sweep: {len(ops)} ops, {sum(forward.values())} forward samples over {len(forward)} "
            f"(op, dtype) pairs and {sum(gradient.values())} float32 gradient samples matched the CPU")
