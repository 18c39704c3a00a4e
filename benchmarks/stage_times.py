"""Where a compiled forward's time goes, by kind of stage: pypto's from the device's own
record of every program stage (pypto_torch.Profiler), Inductor's on the CPU from
torch.profiler, with Inductor's kernels compiled to record themselves
(torch._inductor.config.cpp.enable_kernel_profile) and its extern GEMM calls seen as the
aten ops they are. Both sides sort their stages into the same kinds by name; the time of
the call no stage covers (Python, Dynamo's guards, launches, threads waking) is the rest."""

import contextlib
import os
import time

import torch
import torch._inductor.config

import pypto_torch

KINDS = ("matmul", "softmax, norms", "other kernels", "outside kernels")

# Names, lower case, that make a stage a matmul: pto's tmatmul (its fused epilogue
# included), Inductor's extern calls (attention as the one batched-GEMM op it is there).
MATMUL_NAMES = ("tmatmul", "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_scaled_dot_product",
                "mkldnn", "mkl_linear")
NORM_NAMES = ("softmax", "norm")


def kind_of(name: str) -> str:
    lowered = name.lower()
    if any(part in lowered for part in MATMUL_NAMES):
        return "matmul"
    if any(part in lowered for part in NORM_NAMES):
        return "softmax, norms"
    return "other kernels"


def _fastest(calls: list[tuple[float, dict[str, float]]]) -> dict[str, float]:
    """The kinds' seconds of the call with the shortest wall time, the rest named."""
    wall, seconds = min(calls, key=lambda call: call[0])
    seconds = dict(seconds)
    seconds["outside kernels"] = max(0.0, wall - sum(seconds.values()))
    seconds["wall"] = wall
    return seconds


def pypto_stages(run, calls: int = 5) -> dict[str, float]:
    """Seconds by kind of one call of run() (pto work, compiled with backend="pypto")."""
    measured = []
    for _ in range(calls):
        with pypto_torch.Profiler() as prof:
            start = time.perf_counter()
            run()
            torch.pto.synchronize()
            wall = time.perf_counter() - start
        seconds = dict.fromkeys(KINDS[:-1], 0.0)
        for activity in prof.leaf_activities():
            seconds[kind_of(activity.name)] += activity.duration_us / 1e6
        measured.append((wall, seconds))
    return _fastest(measured)


def _outermost(events, is_stage) -> list:
    """The events is_stage picks that no picked event encloses: an extern GEMM's own aten
    calls inside it count once."""
    def enclosed(event):
        parent = event.cpu_parent
        while parent is not None:
            if is_stage(parent):
                return True
            parent = parent.cpu_parent
        return False
    return [event for event in events if is_stage(event) and not enclosed(event)]


@contextlib.contextmanager
def kineto_lines_dropped():
    """torch's Kineto writes a line to file descriptor 2 as each profile starts and stops
    (KINETO_LOG_LEVEL does not silence them): dropped, so the tables stay readable."""
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def inductor_stages(model, inputs: tuple, calls: int = 5) -> dict[str, float]:
    """Seconds by kind of one call of torch.compile(model) (Inductor, CPU tensors),
    compiled anew with its kernels recording themselves."""
    def is_stage(event):
        return "cpp_fused" in event.name or kind_of(event.name) == "matmul"

    with torch._inductor.config.patch({"cpp.enable_kernel_profile": True}), torch.no_grad():
        compiled = torch.compile(model)
        compiled(*inputs)
        measured = []
        for _ in range(calls):
            with kineto_lines_dropped(), torch.profiler.profile(
                    activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                start = time.perf_counter()
                compiled(*inputs)
                wall = time.perf_counter() - start
            seconds = dict.fromkeys(KINDS[:-1], 0.0)
            for event in _outermost(prof.events(), is_stage):
                seconds[kind_of(event.name)] += event.cpu_time_total / 1e6
            measured.append((wall, seconds))
    return _fastest(measured)
