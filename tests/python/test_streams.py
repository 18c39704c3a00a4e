"""Streams and events on pto, through torch.Stream/torch.Event and torch.pto."""

import pytest
import torch
from torch.testing import assert_close


def test_torch_stream_and_event_on_pto():
    stream = torch.Stream(device="pto")
    assert stream.device_type == torch.device("pto").type or stream.device.type == "pto"
    x = torch.randn(64, 64, device="pto")
    stream.wait_stream(torch.accelerator.current_stream())
    with stream:
        y = x * 2
    event = torch.Event(device="pto")
    event.record(stream)
    event.synchronize()
    assert event.query()
    torch.accelerator.current_stream().wait_stream(stream)
    assert_close(y.cpu(), x.cpu() * 2)


def test_pto_stream_is_a_torch_stream():
    stream = torch.pto.Stream()
    assert isinstance(stream, torch.Stream)
    assert stream.device == torch.device("pto", 0)
    with torch.pto.stream(stream):
        assert torch.pto.current_stream() == stream
    assert torch.pto.current_stream() == torch.pto.default_stream()
    stream.synchronize()
    assert stream.query()


def test_stream_on_second_device():
    stream = torch.pto.Stream(device="pto:1")
    assert stream.device_index == 1
    with torch.pto.stream(stream):
        z = torch.ones(3, device="pto:1") * 3
    stream.synchronize()
    assert torch.equal(z.cpu(), torch.full((3,), 3.0))
    assert torch.pto.current_device() == 0  # the stream's device was current only inside


def test_event_elapsed_time_is_positive_and_ordered():
    start = torch.pto.Event(enable_timing=True)
    middle = torch.pto.Event(enable_timing=True)
    end = torch.pto.Event(enable_timing=True)
    x = torch.randn(256, 256, device="pto")
    start.record()
    x @ x
    middle.record()
    x @ x
    end.record()
    end.synchronize()
    assert 0 <= start.elapsed_time(middle) <= start.elapsed_time(end)


def test_elapsed_time_needs_recorded_events():
    start, end = torch.pto.Event(enable_timing=True), torch.pto.Event(enable_timing=True)
    start.record()
    with pytest.raises(ValueError, match="recorded"):
        start.elapsed_time(end)


@pytest.mark.parametrize("device, synchronize", [
    ("pto:0", lambda: torch.pto.synchronize()),
    ("pto:1", lambda: torch.pto.synchronize("pto:1")),
    ("pto:0", lambda: torch.accelerator.synchronize()),
], ids=["torch.pto.synchronize", "torch.pto.synchronize(pto:1)", "torch.accelerator.synchronize"])
def test_synchronize_device_and_accelerator(device, synchronize):
    """Each waits for the work queued on every stream of its device: afterwards the
    streams are idle and the results are there."""
    streams = [torch.pto.Stream(device=device) for _ in range(2)]
    results = []
    for stream in streams:
        with torch.pto.stream(stream):
            x = torch.ones(256, 256, device=device)
            results.append((x @ x).sum())
    synchronize()
    assert all(stream.query() for stream in streams)
    assert [r.item() for r in results] == [256.0 ** 3] * 2


def test_record_stream_delays_reuse():
    side = torch.pto.Stream()
    x = torch.randn(1024, device="pto")
    address = x.data_ptr()
    with torch.pto.stream(side):
        y = x * 2
    x.record_stream(side)
    del x
    side.synchronize()
    z = torch.empty(1024, device="pto")
    assert z.data_ptr() == address  # reusable once the side stream passed the free
    assert_close(y.cpu().shape, torch.Size([1024]))
