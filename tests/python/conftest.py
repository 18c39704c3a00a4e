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


# The test tiers, all in this one table. `make test-fast` (a developer's loop, under
# 5 minutes on 2 cores) runs neither; `make test` runs every tier and times each.
# soak: runs for a set time or step count, to shake out races and leaks.
# slow: over about 10 s on 2 cores: the sweeps, the model zoos, the tests that start
# interpreters by the dozen.
# A file's name stands for all its tests, "file::test" for one test (every parameter).
TIERS = {
    "soak": {"test_stress.py"},
    "slow": {
        "test_sweep_crash_free.py", "test_opinfo_conformance.py", "test_module_conformance.py",
        "test_compile_hf_models.py", "test_compile_disk_cache.py", "test_copy_fuzz.py",
        "test_asm_fuzz.py", "test_host_math.py", "distributed/test_dist_collectives.py",
        "distributed/test_dist_failures.py", "distributed/test_dist_allreduce_messages.py",
        "distributed/test_dist_ddp.py",
        "distributed/test_dist_example.py", "distributed/test_dist_dtensor.py",
        "distributed/test_dist_fsdp.py", "test_compile_reduce_overhead.py", "test_factory_conformance.py",
        "distributed/test_dist_harness.py", "distributed/test_dist_init.py", "test_distributed_hosts.py",
        "test_crash_regressions.py",
        "test_torch_profiler.py", "test_fault_injection.py", "test_compile_models.py", "test_seed_example.py",
        "test_graphs.py::test_mlp_training_step_replays_as_eager_cpu",
        "test_vector_dispatch.py::test_elementwise_ops_match_cpu_on_each_capped_target",
        "test_vector_dispatch.py::test_wide_registers_appear_only_in_their_targets_code",
        "test_compile_backend.py::test_backend_works_after_a_bare_import_torch", "test_inductor.py",
    },
}
_TESTS_ROOT = os.path.dirname(os.path.abspath(__file__))


def pytest_configure(config):
    config.addinivalue_line("markers", "timing: asserts on measured times; skipped under PTO_SIM_STRICT=1")
    config.addinivalue_line("markers", "soak: runs for a set time or step count (conftest.TIERS)")
    config.addinivalue_line("markers", "slow: over about 10 s on 2 cores (conftest.TIERS)")


def _tier_of(item) -> str | None:
    file = os.path.relpath(str(item.path), _TESTS_ROOT)
    test = f"{file}::{item.originalname}"
    return next((tier for tier, names in TIERS.items() if file in names or test in names), None)


def pytest_collection_modifyitems(items):
    """Marks each test with its tier. Under PTO_SIM_STRICT=1 every launch waits until it
    has run and a first touch of device memory faults in a 2 MiB page inside the kernel:
    times say nothing then, so the timing tests are skipped."""
    for item in items:
        tier = _tier_of(item)
        if tier is not None:
            item.add_marker(getattr(pytest.mark, tier))
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
