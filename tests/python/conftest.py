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
