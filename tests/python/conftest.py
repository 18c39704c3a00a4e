"""Shared helpers. Tests run with the CPU fallback silenced; the fallback's own
warnings are tested in fresh interpreters (they fire once per op per process)."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import pypto_torch

pypto_torch.set_fallback_mode("silent")


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter with extra environment variables."""
    full_env = {**os.environ, **env}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=full_env, timeout=300)


@pytest.fixture
def python():
    return run_python


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)
    torch.pto.manual_seed_all(0)


def pytest_terminal_summary(terminalreporter):
    """How much of PyTorch's OpInfo database the sweeps compared with the CPU."""
    from opinfo_sweep import SWEPT

    forward, gradient = SWEPT["forward"], SWEPT["gradient"]
    if forward or gradient:
        ops = {op for op, _ in forward} | set(gradient)
        terminalreporter.write_line(
            f"OpInfo sweep: {len(ops)} ops, {sum(forward.values())} forward samples over {len(forward)} "
            f"(op, dtype) pairs and {sum(gradient.values())} float32 gradient samples matched the CPU")
