"""torch.pto.set_sync_debug_mode / get_sync_debug_mode, as torch.cuda's: the calls that
make the host wait for the device warn ("warn") or raise ("error"); the others, and
every call under "default", pass. Results still equal the CPU's."""

import os
import warnings

import pytest
import torch

MESSAGE = "called a synchronizing pto operation"
TESTS = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def sync_debug():
    yield torch.pto.set_sync_debug_mode
    torch.pto.set_sync_debug_mode("default")


def host_data():
    return torch.randn(64, generator=torch.Generator().manual_seed(0))


def synchronize_an_event(x):
    event = torch.pto.Event()
    event.record()
    event.synchronize()


# The calls CUDA's mode flags: a copy between host and device the host waits for, and
# a stream's synchronize (ops that count on the host, as nonzero, copy a count back).
SYNCHRONIZING = {
    "item": lambda x: x.sum().item(),
    "cpu": lambda x: x.cpu(),
    "tolist": lambda x: x.tolist(),
    "nonzero": lambda x: torch.nonzero(x > 0),
    "masked_select": lambda x: torch.masked_select(x, x > 0),
    "to pto from pageable memory": lambda x: torch.ones(4).to("pto"),
    "stream synchronize": lambda x: torch.pto.current_stream().synchronize(),
}

# What CUDA's mode lets pass: device work, copies the host does not wait for, and
# synchronizing the device or an event, asked for by name.
NOT_SYNCHRONIZING = {
    "elementwise": lambda x: x * 2 + 1,
    "device to device": lambda x: x.clone(),
    "into pinned memory, non_blocking": lambda x: torch.empty(64).pin_memory().copy_(x, non_blocking=True),
    "device synchronize": lambda x: torch.pto.synchronize(),
    "event synchronize": synchronize_an_event,
}


@pytest.mark.parametrize("name", list(SYNCHRONIZING))
def test_warn_mode_warns_at_synchronizing_calls(sync_debug, name):
    x = host_data().to("pto")
    sync_debug("warn")
    assert torch.pto.get_sync_debug_mode() == 1
    with pytest.warns(UserWarning, match=MESSAGE):
        SYNCHRONIZING[name](x)


@pytest.mark.parametrize("name", list(NOT_SYNCHRONIZING))
@pytest.mark.parametrize("mode", ["warn", "error"])
def test_calls_that_do_not_wait_pass_in_every_mode(sync_debug, name, mode):
    x = host_data().to("pto")
    sync_debug(mode)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        NOT_SYNCHRONIZING[name](x)
    sync_debug("default")
    torch.pto.synchronize()


@pytest.mark.parametrize("mode", ["default", 0])
def test_default_mode_lets_everything_pass_with_the_cpus_results(sync_debug, mode):
    host = host_data()
    x = host.to("pto")
    sync_debug(mode)
    assert torch.pto.get_sync_debug_mode() == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for call in SYNCHRONIZING.values():
            call(x)
        assert x.sum().item() == pytest.approx(host.sum().item(), rel=1e-6)
        assert torch.equal(torch.nonzero(x > 0).cpu(), torch.nonzero(host > 0))


def test_warn_mode_keeps_the_results(sync_debug):
    host = host_data()
    x = host.to("pto")
    sync_debug(1)
    with pytest.warns(UserWarning, match=MESSAGE):
        assert torch.equal((x * 2).cpu(), host * 2)
    with pytest.warns(UserWarning, match=MESSAGE):
        assert torch.equal(torch.masked_select(x, x > 0).cpu(), torch.masked_select(host, host > 0))


# "error" raises before anything is queued, so the device is left as it was; the
# interpreter is a fresh one all the same.
def test_error_mode_raises_at_each_synchronizing_call_and_the_device_stays_usable(python):
    names = list(SYNCHRONIZING)
    result = python(f"""
        import sys
        sys.path.insert(0, {TESTS!r})
        import torch
        import test_sync_debug as cases
        x = cases.host_data().to("pto")
        torch.pto.set_sync_debug_mode("error")
        assert torch.pto.get_sync_debug_mode() == 2
        for name in {names!r}:
            try:
                cases.SYNCHRONIZING[name](x)
            except RuntimeError as error:
                print("RAISED", name, str(error).splitlines()[0] == cases.MESSAGE)
        y = x * 3  # device work still runs
        torch.pto.set_sync_debug_mode(0)
        assert torch.equal(y.cpu(), cases.host_data() * 3)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"RAISED {name} True" for name in names], result.stdout


def test_bad_modes_are_cudas_errors(sync_debug):
    with pytest.raises(RuntimeError, match="invalid value of debug_mode, expected one of `default`, `warn`, `error`"):
        sync_debug("loud")
    with pytest.raises(RuntimeError, match="invalid value of debug_mode, expected one of 0,1,2"):
        sync_debug(3)
    with pytest.raises(RuntimeError, match="invalid argument to set_sync_debug_mode, must be an int"):
        sync_debug(1.5)
    assert torch.pto.get_sync_debug_mode() == 0

