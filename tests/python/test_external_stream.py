"""torch.pto.ExternalStream, as torch.cuda.ExternalStream: a stream the runtime made
outside torch (here by the runtime's ptoStreamCreate through pypto_torch._C, as another
library would) used as a torch.Stream: current under torch.pto.stream, work ordered on
it, synchronized, never destroyed by torch. Results are compared with the CPU's."""

import textwrap

import pytest
import torch

from pypto_torch import _C


@pytest.fixture
def runtime_stream():
    """A stream the runtime made on pto:0, outside torch; its maker destroys it."""
    handle = _C._runtime_stream_create(0)
    yield handle
    _C._runtime_stream_destroy(handle)


def test_an_external_stream_is_a_pto_stream_over_the_handle(runtime_stream):
    external = torch.pto.ExternalStream(runtime_stream)
    assert isinstance(external, torch.pto.Stream) and isinstance(external, torch.Stream)
    assert external.native_handle == runtime_stream
    assert external.device == torch.device("pto", 0)
    assert torch.pto.ExternalStream(runtime_stream, device="pto:0") == external  # one handle, one stream
    assert external not in (torch.pto.default_stream(), torch.pto.current_stream())
    assert torch.pto.get_stream_from_external(runtime_stream, 0) == external
    assert torch.pto.ExternalStream(0) == torch.pto.default_stream()  # the runtime's null stream


def test_work_under_an_external_stream_runs_on_it_in_order(runtime_stream):
    external = torch.pto.ExternalStream(runtime_stream)
    host = torch.randint(0, 100, (1 << 20,), generator=torch.Generator().manual_seed(0)).float()
    x = host.to("pto")
    external.wait_stream(torch.pto.current_stream())
    with torch.pto.stream(external):
        assert torch.pto.current_stream() == external
        y = x
        for step in range(32):  # long enough to still run when the host moves on; one rounding per op, as on the CPU
            y = y * 2 - step
    assert torch.pto.current_stream() == torch.pto.default_stream()
    torch.pto.current_stream().wait_stream(external)
    z = y + 1  # on the default stream, after the external stream's work
    expected = host
    for step in range(32):
        expected = expected * 2 - step
    assert torch.equal(z.cpu(), expected + 1)
    external.synchronize()
    assert external.query()


def test_events_order_the_external_stream_after_torchs(runtime_stream):
    external = torch.pto.ExternalStream(runtime_stream)
    x = torch.zeros(1024, device="pto")
    x.add_(5)  # on the default stream
    ready = torch.pto.Event()
    ready.record()
    external.wait_event(ready)
    with torch.pto.stream(external):
        y = x * 3
    done = external.record_event()
    done.synchronize()
    assert torch.equal(y.cpu(), torch.full((1024,), 15.0))


def test_torch_does_not_destroy_the_stream_and_bad_handles_are_refused(python):
    result = python(textwrap.dedent("""
        import gc
        import torch
        from pypto_torch import _C
        handle = _C._runtime_stream_create(0)
        with torch.pto.stream(torch.pto.ExternalStream(handle)):
            y = torch.arange(8.0, device="pto") + 1
        gc.collect()  # the wrapper is gone; the stream is not
        again = torch.pto.ExternalStream(handle)
        again.synchronize()
        assert y.cpu().tolist() == [float(i + 1) for i in range(8)]
        _C._runtime_stream_destroy(handle)  # its maker's to destroy, once
        for attempt in (lambda: torch.pto.ExternalStream(handle),
                        lambda: torch.pto.ExternalStream(_C._runtime_stream_create(1), device=0)):
            try:
                attempt()
            except RuntimeError as error:
                print("REFUSED:", str(error).splitlines()[0])
        assert torch.equal((y * 2).cpu(), y.cpu() * 2)
    """))
    assert result.returncode == 0, result.stderr
    assert "is not a live stream" in result.stdout, result.stdout
    assert "ExternalStream: the stream was created on pto:1, not on pto:0" in result.stdout, result.stdout


def test_a_graph_captures_on_an_external_stream(python):
    result = python(textwrap.dedent("""
        import torch
        from pypto_torch import _C
        handle = _C._runtime_stream_create(0)
        external = torch.pto.ExternalStream(handle)
        static_x = torch.zeros(32, device="pto")
        g = torch.accelerator.Graph()
        with external, g:
            assert external.is_capturing()
            static_y = static_x * 2 + 1
        host = torch.randn(32, generator=torch.Generator().manual_seed(0))
        static_x.copy_(host)
        g.replay()
        assert torch.equal(static_y.cpu(), host * 2 + 1)
        del g
        _C._runtime_stream_destroy(handle)
    """))
    assert result.returncode == 0, result.stderr
