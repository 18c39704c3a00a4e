"""PTO_SIM_STRICT=1: host code cannot touch pto memory; torch, through the runtime, can.
A host read is a crash, so each case runs in its own interpreter."""

import signal

import pytest

USE_THEN_READ = """
    import ctypes
    import torch
    x = torch.arange(6.0, device="pto").reshape(2, 3).requires_grad_()
    y = (x * 2 + 1).sum()
    y.backward()
    pinned = torch.empty(2, 3, pin_memory=True)
    pinned.copy_(x.detach(), non_blocking=True)
    torch.pto.synchronize()
    print("ops", y.item(), x.grad.cpu().tolist(), x.detach().cpu()[1].tolist(), pinned.sum().item())
    print("host access", torch.pto.get_device_properties(0).host_access_to_device_memory)
    print(x)
    print("host read", ctypes.c_float.from_address(x.data_ptr() + 4).value, flush=True)
"""


def test_a_host_read_of_pto_memory_crashes_while_torch_works(python):
    result = python(USE_THEN_READ, PTO_SIM_STRICT="1", PTO_FALLBACK="silent")
    assert result.returncode == -signal.SIGSEGV, result.stdout + result.stderr
    assert "ops 36.0 [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]] [3.0, 4.0, 5.0] 15.0" in result.stdout
    assert "device='pto:0'" in result.stdout
    assert "host access False" in result.stdout  # what code above the runtime asks instead
    assert "host read" not in result.stdout


def test_without_strict_mode_the_same_read_goes_unnoticed(python):
    result = python(USE_THEN_READ, PTO_SIM_STRICT="0", PTO_FALLBACK="silent")
    assert result.returncode == 0, result.stderr
    assert "host access True" in result.stdout
    assert "host read 1.0" in result.stdout


@pytest.mark.parametrize("value", ["2", "yes"])
def test_a_value_other_than_0_or_1_is_refused(python, value):
    result = python('import torch; torch.ones(1, device="pto")', PTO_SIM_STRICT=value)
    assert result.returncode != 0
    assert f"PTO_SIM_STRICT='{value}' is not 0 or 1" in result.stderr
