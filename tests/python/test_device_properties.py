"""torch.pto's device properties, raw allocations, memory history and utilization, as
torch.cuda offers them; and what torch.compile's default backend does on pto."""
import os

import pytest
import torch
from torch.cuda import _memory_viz

from pypto_torch import _C


def test_properties_are_the_runtime_attributes():
    props = torch.pto.get_device_properties(0)
    assert props.name == torch.pto.get_device_name(0) == f"PTO {_C._driver_name()} device"
    assert props.driver == _C._driver_name()
    assert props.total_memory == _C._device_attribute(0, "total_memory_bytes")
    assert props.multi_processor_count == _C._device_attribute(0, "core_count") >= 1
    assert props.unified_buffer_bytes == _C._device_attribute(0, "unified_buffer_bytes")
    assert (props.major, props.minor) == torch.pto.get_device_capability(0) == (
        _C._device_attribute(0, "isa_version_major"), _C._device_attribute(0, "isa_version_minor"))


def test_sim_memory_setting_sets_total_memory(python):
    result = python("""
        import torch
        print(torch.pto.get_device_properties(1).total_memory, torch.pto.mem_get_info(1)[1])
    """, PTO_SIM_MEMORY="768M")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(768 << 20)] * 2


def test_sim_core_count_is_its_worker_threads():
    # The simulated device runs tiles on the host's threads: its pool's and the caller's.
    assert torch.pto.get_device_properties().multi_processor_count == os.cpu_count()


@pytest.mark.parametrize("query", [torch.pto.get_device_properties, torch.pto.get_device_name,
                                   torch.pto.get_device_capability, torch.pto.utilization])
def test_a_bad_device_index_is_a_clear_error(query):
    with pytest.raises(RuntimeError, match="pto:7 is not a valid device: there are 2 pto device"):
        query(7)
    with pytest.raises(ValueError, match="expected a pto device, got cpu"):
        query("cpu")


def test_caching_allocator_alloc_and_delete_round_trip():
    stream = torch.pto.Stream(device=1)
    before = torch.pto.memory_allocated(1)
    ptr = torch.pto.caching_allocator_alloc(10_000, device=1, stream=stream)
    assert ptr != 0
    assert torch.pto.memory_allocated(1) == before + 10_240  # rounded to 512 bytes
    assert torch.pto.memory_allocated(0) == torch.pto.memory_allocated(0)
    torch.pto.caching_allocator_delete(ptr)
    assert torch.pto.memory_allocated(1) == before
    # A stream id works too, as with torch.cuda.
    ptr = torch.pto.caching_allocator_alloc(512, 1, stream.stream_id)
    torch.pto.caching_allocator_delete(ptr)
    with pytest.raises(RuntimeError, match="the caching allocator did not hand it out"):
        torch.pto.caching_allocator_delete(ptr)
    with pytest.raises(TypeError, match="stream must be a torch.pto.Stream or a stream id"):
        torch.pto.caching_allocator_alloc(512, 0, "stream")


def allocate_a_tensor():
    return torch.ones(1000, 1000, device="pto")


@pytest.fixture
def history():
    torch.pto.memory._record_memory_history(max_entries=10_000, clear_history=True)
    yield
    torch.pto.memory._record_memory_history(enabled=None)


def trace_of(snapshot, device=0):
    return [entry for entry in snapshot["device_traces"][device] if entry["action"] != "snapshot"]


def test_history_records_allocations_and_frees_with_sizes_and_stacks(history):
    x = allocate_a_tensor()
    address = x.data_ptr()
    del x
    trace = trace_of(torch.pto.memory._snapshot())
    alloc = next(entry for entry in trace if entry["action"] == "alloc" and entry["addr"] == address)
    assert alloc["size"] == 4_000_256  # 4 MB rounded to 512 bytes
    assert "allocate_a_tensor" in [frame["name"] for frame in alloc["frames"]]
    assert {"filename", "line", "name"} <= alloc["frames"][0].keys()
    actions = [entry["action"] for entry in trace if entry.get("addr") == address]
    assert actions[actions.index("alloc"):][:3] == ["alloc", "free_requested", "free_completed"]


def test_snapshot_segments_show_live_blocks_and_their_stacks(history):
    x = allocate_a_tensor()
    segments = [segment for segment in torch.pto.memory._snapshot()["segments"] if segment["device"] == 0]
    assert sum(segment["total_size"] for segment in segments) == torch.pto.memory_reserved()
    assert sum(segment["allocated_size"] for segment in segments) == torch.pto.memory_allocated()
    block = next(block for segment in segments for block in segment["blocks"] if block["address"] == x.data_ptr())
    assert block["state"] == "active_allocated"
    assert block["requested_size"] == x.nbytes
    assert "allocate_a_tensor" in [frame["name"] for frame in block["frames"]]


def test_snapshot_shows_a_captured_graph_s_private_pool(history):
    x = torch.ones(64, 64, device="pto")
    graph = torch.pto.PTOGraph()
    with torch.pto.graph(graph):
        y = x * 2
    pools = {segment["segment_pool_id"] for segment in torch.pto.memory._snapshot()["segments"]
             if any(block["address"] == y.data_ptr() for block in segment["blocks"])}
    assert pools == {graph.pool()}
    assert graph.pool() != (0, 0)


def test_python_only_stacks_and_no_free_stacks(history):
    torch.pto.memory._record_memory_history(context="alloc", stacks="python", clear_history=True)
    x = allocate_a_tensor()
    del x
    trace = trace_of(torch.pto.memory._snapshot())
    alloc = next(entry for entry in trace if entry["action"] == "alloc")
    assert all(frame["filename"].endswith(".py") or frame["filename"].startswith("<") for frame in alloc["frames"])
    assert all(entry["frames"] == [] for entry in trace if entry["action"] == "free_requested")


def test_history_keeps_the_newest_entries(history):
    torch.pto.memory._record_memory_history(max_entries=4, clear_history=True)
    tensors = [torch.empty(n + 1, device="pto") for n in range(10)]
    last = tensors[-1].data_ptr()
    trace = trace_of(torch.pto.memory._snapshot())
    assert len(trace) == 3  # the fourth entry is the snapshot itself
    assert trace[-1]["action"] == "alloc" and trace[-1]["addr"] == last


def test_stopping_forgets_the_history():
    torch.pto.memory._record_memory_history()
    x = allocate_a_tensor()
    torch.pto.memory._record_memory_history(enabled=None)
    del x
    snapshot = torch.pto.memory._snapshot()
    assert snapshot["device_traces"] == [[], []]
    assert all(block["frames"] == [] for segment in snapshot["segments"] for block in segment["blocks"])


def test_oom_is_recorded(python):
    result = python("""
        import torch
        torch.pto.memory._record_memory_history()
        try:
            torch.empty(300 * 1024 * 1024, dtype=torch.uint8, device="pto")
        except torch.OutOfMemoryError:
            pass
        oom = [e for e in torch.pto.memory._snapshot()["device_traces"][0] if e["action"] == "oom"]
        print(oom[0]["size"], oom[0]["device_free"] > 0)
    """, PTO_SIM_MEMORY="256M")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(300 << 20), "True"]


def test_bad_history_options_are_clear_errors():
    with pytest.raises(ValueError, match="enabled must be None, 'state' or 'all'"):
        torch.pto.memory._record_memory_history(enabled="yes")
    with pytest.raises(ValueError, match="stacks must be 'python' or 'all'"):
        torch.pto.memory._record_memory_history(stacks="cpp")
    with pytest.raises(TypeError, match="pto does not record"):
        torch.pto.memory._record_memory_history(compile_context=True)


def test_memory_viz_reads_the_snapshot(history, tmp_path):
    x = allocate_a_tensor()
    y = torch.empty(100, device="pto")
    del y
    snapshot = torch.pto.memory._snapshot()
    assert "<html>" in _memory_viz.segment_plot(snapshot)
    assert "<html>" in _memory_viz.trace_plot(snapshot)
    assert "segments:" in _memory_viz.segsum(snapshot)
    assert "allocate_a_tensor" in _memory_viz.memory(snapshot, format_flamegraph=lambda lines: lines)
    torch.pto.memory._dump_snapshot(str(tmp_path / "snapshot.pickle"))
    assert (tmp_path / "snapshot.pickle").stat().st_size > 0
    del x


def test_utilization_follows_the_work():
    torch.pto.utilization(1)
    x = torch.randn(512, 512, device="pto:1")
    for _ in range(30):
        x = (x @ x).tanh()
    torch.pto.synchronize(1)
    assert torch.pto.utilization(1) > 20
    assert 0 <= torch.pto.utilization(1) <= 100


def test_the_default_compile_backend_and_pypto_both_run_on_pto():
    torch._dynamo.reset()
    model = torch.nn.Linear(4, 4).to("pto")
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(3))
    expected = torch.nn.functional.linear(x, model.weight.detach().cpu(), model.bias.detach().cpu())
    for backend in ("inductor", "pypto"):
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(model, backend=backend)(x.to("pto")).cpu(), expected)


@pytest.mark.parametrize("cap, expected", [("avx2", {"avx2", "sse4", "scalar"}), ("scalar", {"scalar"})])
def test_sim_vector_isa_setting_caps_the_kernels_vector_isa(python, cap, expected):
    result = python("""
        import torch
        print(torch.pto.get_device_properties(0).vector_isa)
        x = torch.linspace(-4, 4, 1000, device="pto")
        torch.testing.assert_close(torch.exp(x).cpu(), torch.exp(x.cpu()))
    """, PTO_SIM_VECTOR_ISA=cap)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() in expected


def test_vector_isa_is_one_the_host_has():
    assert torch.pto.get_device_properties(0).vector_isa in ("avx512", "avx2", "sse4", "neon", "scalar")


def test_invalid_vector_isa_setting_is_a_clear_error(python):
    result = python("import torch; torch.empty(1, device='pto')", PTO_SIM_VECTOR_ISA="avx1024")
    assert result.returncode != 0
    assert "PTO_SIM_VECTOR_ISA='avx1024' is not one of avx512, avx2, sse4, scalar" in result.stderr
