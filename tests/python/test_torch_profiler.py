"""torch.profiler with ProfilerActivity.PrivateUse1: every pto kernel and copy as
device activity on its device and stream, linked to the aten op that launched it, in
key_averages() (device time) and in the Chrome trace (a lane per stream, a flow from
each launch call to its work), agreeing with pypto.Profiler on the same run.

Kineto lives in the process, so each profiled run has a fresh interpreter."""
import json

import pytest

WORKLOAD = """
    import json, torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    from pypto_torch.profiler import Profiler

    x = torch.randn(128, 128, device="pto")
    compiled = torch.compile(lambda t: torch.softmax(t * 2, -1) + 1, backend="pypto")
    compiled(x)  # compiled before profiling
    side = torch.pto.Stream()

    def workload():
        y = torch.exp(x @ x)
        y.cpu()
        compiled(x)
        with torch.pto.stream(side):
            torch.zeros(64, device="pto")

    def device_events(events):
        return [e for e in events if e.device_type == DeviceType.PrivateUse1]
"""


def run_profiled(python, body: str) -> dict:
    result = python(WORKLOAD + body)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """One run under torch.profiler and pypto.Profiler at once, then a second torch.profiler run."""
    from conftest import run_python

    trace = tmp_path_factory.mktemp("trace") / "trace.json"
    return run_profiled(run_python, f"""
    with Profiler() as pypto_profile:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            workload()
    prof.export_chrome_trace({str(trace)!r})
    averages = {{a.key: a for a in prof.key_averages()}}
    launched_by = {{k.name: e.name for e in prof.events() if e.device_type == DeviceType.CPU for k in e.kernels}}
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as again:
        workload()
    print(json.dumps({{
        "device": [(e.name, e.device_index, e.time_range.elapsed_us()) for e in device_events(prof.events())],
        "pypto": [(a.name, a.device, a.duration_us) for a in pypto_profile.leaf_activities()],
        "self_device_us": {{k: a.self_device_time_total for k, a in averages.items()}},
        "device_us": {{k: a.device_time_total for k, a in averages.items()}},
        "launched_by": launched_by,
        "trace": json.load(open({str(trace)!r}))["traceEvents"],
        "again": [e.name for e in device_events(again.events())],
    }}))
    """)


def test_device_events_are_the_pto_programs_and_copies_on_pto(profiled):
    names = {name for name, _, _ in profiled["device"]}
    assert {"tmatmul", "texp", "memcpy device-to-host", "texpands"} <= names, names
    assert any(name.startswith("fused:") for name in names), "the compiled program's stages appear too"
    assert all(device == 0 for _, device, _ in profiled["device"])
    assert all(duration > 0 for _, _, duration in profiled["device"])


def test_key_averages_has_device_time_for_kernels_and_the_ops_that_launched_them(profiled):
    for kernel in ("tmatmul", "texp", "memcpy device-to-host"):
        assert profiled["self_device_us"][kernel] > 0, kernel
    for op in ("aten::mm", "aten::exp"):
        assert profiled["device_us"][op] > 0, op


def test_each_kernel_is_linked_to_the_aten_op_that_launched_it(profiled):
    launched_by = profiled["launched_by"]
    assert launched_by["tmatmul"] == "aten::mm"
    assert launched_by["texp"] == "aten::exp"
    assert launched_by["texpands"] in ("aten::zero_", "aten::fill_")
    assert launched_by["memcpy device-to-host"] in ("aten::copy_", "aten::_copy_from")


def test_chrome_trace_has_a_lane_per_stream_and_flows_from_launches(profiled):
    events = profiled["trace"]
    device_work = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    launches = [e for e in events if e.get("ph") == "X" and e.get("cat") == "privateuse1_runtime"]
    assert {e["name"] for e in launches} >= {"ptoProgramLaunch", "ptoMemcpyAsync"}
    assert {e["pid"] for e in device_work} == {0}
    lanes = {e["tid"] for e in device_work}
    assert len(lanes) == 2, "the current stream and the side stream"
    metadata = [e for e in events if e.get("ph") == "M" and e["pid"] == 0]
    assert {e["args"]["name"] for e in metadata if e["name"] == "process_name"} == {"pto:0"}
    lane_names = {e["tid"]: e["args"]["name"] for e in metadata if e["name"] == "thread_name"}
    assert {lane_names[lane] for lane in lanes} == {"stream 0", "stream 1"}
    starts = {e["id"]: e for e in events if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    ends = [e for e in events if e.get("ph") == "f" and e.get("cat") == "ac2g"]
    assert len(ends) == len(device_work)
    launch_threads = {e["tid"] for e in launches}
    for end in ends:
        assert end["pid"] == 0 and end["id"] in starts
        assert starts[end["id"]]["tid"] in launch_threads


def test_counts_and_durations_agree_with_pypto_profiler(profiled):
    def totals(rows):
        counts, durations = {}, {}
        for name, _, duration in rows:
            counts[name] = counts.get(name, 0) + 1
            durations[name] = durations.get(name, 0.0) + duration
        return counts, durations

    torch_counts, torch_us = totals(profiled["device"])
    pypto_counts, pypto_us = totals(profiled["pypto"])
    assert torch_counts == pypto_counts
    for name, duration in pypto_us.items():
        assert torch_us[name] == pytest.approx(duration, rel=1e-3, abs=0.01), name


def test_profiling_twice_in_one_process(profiled):
    assert sorted(profiled["again"]) == sorted(name for name, _, _ in profiled["device"])


def test_cpu_activity_only_has_no_device_events_and_still_works(python):
    result = run_profiled(python, """
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        workload()
    print(json.dumps({"device": len(device_events(prof.events())), "ops": [e.name for e in prof.events()]}))
    """)
    assert result["device"] == 0
    assert "aten::mm" in result["ops"] and "ptoProgramLaunch" not in result["ops"]


def test_autograd_profiler_with_use_device_pto_and_kineto(python):
    result = run_profiled(python, """
    with torch.autograd.profiler.profile(use_device="pto", use_kineto=True) as prof:
        workload()
    print(json.dumps({"device": sorted({e.name for e in device_events(prof.function_events)})}))
    """)
    assert {"tmatmul", "texp"} <= set(result["device"])


def test_each_device_is_a_process_of_the_trace(python, tmp_path):
    trace = tmp_path / "trace.json"
    result = run_profiled(python, f"""
    if torch.pto.device_count() < 2:
        print(json.dumps(None))
        raise SystemExit
    a, b = torch.randn(8, device="pto:0"), torch.randn(8, device="pto:1")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        a.exp(), b.exp()
        torch.pto.synchronize(1)
    prof.export_chrome_trace({str(trace)!r})
    print(json.dumps(json.load(open({str(trace)!r}))["traceEvents"]))
    """)
    if result is None:
        pytest.skip("needs two pto devices")
    kernels = {(e["pid"], e["tid"]) for e in result if e.get("cat") == "kernel"}
    assert kernels == {(0, 0), (1, 0)}
    names = {(e["pid"], e["name"]): e["args"]["name"] for e in result
             if e.get("ph") == "M" and e["pid"] in (0, 1) and e["name"] in ("process_name", "thread_name")}
    assert names[(0, "process_name")] == "pto:0" and names[(1, "process_name")] == "pto:1"
    assert names[(0, "thread_name")] == names[(1, "thread_name")] == "stream 0"


def test_a_graph_replay_shows_its_kernels_joined_to_the_replay_launch(python, tmp_path):
    trace = tmp_path / "trace.json"
    events = run_profiled(python, f"""
    graph, stream = torch.pto.PTOGraph(), torch.pto.Stream()
    with torch.pto.stream(stream):
        (x + 1).exp()  # warm up outside the capture
        torch.pto.synchronize()
        with torch.pto.graph(graph):
            (x + 1).exp()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        graph.replay()
    prof.export_chrome_trace({str(trace)!r})
    print(json.dumps(json.load(open({str(trace)!r}))["traceEvents"]))
    """)
    kernels = [e for e in events if e.get("cat") == "kernel"]
    launches = [e for e in events if e.get("cat") == "privateuse1_runtime"]
    assert {"tadd", "texp"} <= {e["name"] for e in kernels}
    assert [e["name"] for e in launches] == ["ptoGraphLaunch"]
    starts = [e for e in events if e.get("ph") == "s"]
    ends = [e for e in events if e.get("ph") == "f"]
    assert len(starts) == 1 and len(ends) == len(kernels)
    assert all(end["id"] == starts[0]["id"] for end in ends)
