"""pypto.Profiler: every kernel, copy and program instruction, on every stream, with
times, bytes and FLOPs; the report's table, the Chrome trace, the HTML and PNG timelines."""
import json

import pytest
import torch

from pypto_torch.profiler import Profiler


def workload():
    """An eager GEMM and exp, a copy to the host, a compiled fused program, and an add
    on a second stream."""
    x = torch.randn(256, 256, device="pto")
    compiled = torch.compile(lambda t: torch.softmax(t * 2, -1) + 1, backend="pypto")
    compiled(x)  # compiled before profiling
    side = torch.pto.Stream()
    with Profiler() as profiler:
        y = torch.exp(x @ x)
        y.cpu()
        compiled(x)
        with torch.pto.stream(side):
            x + 1
    return profiler


@pytest.fixture(scope="module")
def profiled():
    return workload()


def test_records_every_kernel_copy_and_program_instruction(profiled):
    by_name = {a.name: a for a in profiled.activities}
    assert by_name["tmatmul"].kind == "instruction" and by_name["tmatmul"].flops == 2 * 256**3
    assert by_name["tmatmul"].detail == "f32[256,256] <- f32[256,256], f32[256,256]"
    assert by_name["tmatmul"].bytes == 3 * 256 * 256 * 4
    assert by_name["texp"].kind == "instruction"
    assert by_name["memcpy device-to-host"].kind == "copy"
    assert by_name["memcpy device-to-host"].bytes == 2 * 256 * 256 * 4
    program = by_name["program"]
    inside = [a for a in profiled.activities if a.kind == "stage"]
    assert any(a.name.startswith("fused:") and "tsoftmax" in a.name for a in inside)
    for a in inside:
        assert program.start_us <= a.start_us <= a.end_us <= program.end_us
    assert all(a.end_us >= a.start_us >= 0 for a in profiled.activities)


def test_one_lane_per_stream(profiled):
    lanes = profiled.streams()
    assert len(lanes) == 2
    add = next(a for a in profiled.activities if a.name == "tadd" and a.kind == "instruction")
    assert (add.device, add.stream) == lanes[1]


def test_report_ranks_operations_with_rates_and_shares(profiled):
    text = profiled.report()
    assert "GB/s" in text and "GFLOP/s" in text and "%peak" in text
    rows = [line.split() for line in text.splitlines()[3:] if line and not line.startswith(("-", "compute"))]
    names = [row[0] for row in rows]
    totals_ms = [float(row[-6]) for row in rows]
    # The most time on top. Which operation that is depends on how the host's cores
    # were shared while it ran (a preempted 54 us add can outlast a 5 ms GEMM), so
    # the order is checked, not a name.
    assert totals_ms == sorted(totals_ms, reverse=True), text
    assert "tmatmul" in names and "tadd" in names
    assert "program" not in names  # its instructions carry its time
    assert "compute" in text.splitlines()[-1] and "copies and fills" in text.splitlines()[-1]


def test_chrome_trace_loads_with_a_thread_per_stream(profiled, tmp_path):
    path = tmp_path / "trace.json"
    profiled.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == len(profiled.activities)
    assert {e["tid"] for e in spans} == {0, 1}
    names = [e for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"]
    assert len(names) == 2
    assert all(e["dur"] >= 0 and "detail" in e["args"] for e in spans)


def test_visualize_writes_html_and_a_real_png(profiled, tmp_path):
    page = tmp_path / "trace.html"
    profiled.visualize(str(page))
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.count("<rect") == len(profiled.activities)
    image = tmp_path / "trace.png"
    profiled.visualize(str(image))
    data = image.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    assert matplotlib.image.imread(str(image)).shape[0] > 50


def test_start_and_stop_misuse_are_clear_errors():
    profiler = Profiler()
    with pytest.raises(RuntimeError, match="not running"):
        profiler.stop()
    profiler.start()
    with pytest.raises(RuntimeError, match="already running"):
        profiler.start()
    profiler.stop()
    assert profiler.activities == []


def test_device_time_appears_in_torch_profiler():
    """torch.autograd.profiler with use_device="pto": each aten op's device time, from
    pto events around it (the PrivateUse1 profiler stubs)."""
    x = torch.randn(256, 256, device="pto")
    with torch.autograd.profiler.profile(use_device="pto") as prof:
        torch.exp(x @ x)
        torch.pto.synchronize()
    by_key = {event.key: event for event in prof.key_averages()}
    assert by_key["aten::mm"].self_device_time_total > 0
    assert by_key["aten::exp"].self_device_time_total > 0
    assert "Self PTO" in prof.key_averages().table(sort_by="self_device_time_total")
