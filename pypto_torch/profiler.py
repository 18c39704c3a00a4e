"""pypto.Profiler: what the device executed, instruction by instruction.

While a Profiler runs, the driver records every program launch, copy and fill each
stream executes (and, inside a program of several instructions, each stage: one
instruction or several fused) with its stream, start and end, the bytes it read and wrote and its FLOPs. ``report()``
tabulates them against the machine's measured copy bandwidth and GEMM throughput;
``export_chrome_trace`` writes Chrome/Perfetto trace JSON; ``visualize`` draws a
timeline, one lane per stream: a self-contained HTML page, or an image for .png.
"""
from __future__ import annotations

import dataclasses
import html
import json
import time

import torch

from pypto_torch import _C


@dataclasses.dataclass(frozen=True)
class Activity:
    name: str
    detail: str
    kind: str          # instruction (one launched alone), copy, fill, program (holds stages), stage
    device: int
    stream: int
    start_us: float
    end_us: float
    bytes: int
    flops: float

    @property
    def duration_us(self) -> float:
        return self.end_us - self.start_us


_machine_peaks: dict = {}


def machine_peaks() -> tuple:
    """The simulated device's measured copy bandwidth (GB/s, read + write) and float32
    GEMM throughput (GFLOP/s): what achieved figures are shares of. Measured once."""
    if not _machine_peaks:
        x = torch.empty(32 * 2**20, device="pto")  # 128 MiB
        y = torch.empty_like(x)
        a = torch.randn(1024, 1024, device="pto")
        y.copy_(x), a @ a
        torch.pto.synchronize()
        copy_s, gemm_s = [], []
        for _ in range(3):
            start = time.perf_counter()
            y.copy_(x)
            torch.pto.synchronize()
            copy_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            a @ a
            torch.pto.synchronize()
            gemm_s.append(time.perf_counter() - start)
        _machine_peaks["GB/s"] = 2 * x.numel() * 4 / min(copy_s) / 1e9
        _machine_peaks["GFLOP/s"] = 2 * 1024**3 / min(gemm_s) / 1e9
    return _machine_peaks["GB/s"], _machine_peaks["GFLOP/s"]


class Profiler:
    """Records what the pto devices execute between start() and stop() (or inside
    `with`). Work queued before start() is waited for first, and stop() waits for
    what was queued while it ran, so the record is exactly that window."""

    def __init__(self):
        self.activities: list[Activity] = []
        self._running = False
        self._origin_ns = 0

    def __enter__(self) -> "Profiler":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        if self._running:
            raise RuntimeError("Profiler.start(): this profiler is already running")
        _synchronize_all()
        _C._profiler_flush()  # anything an earlier profiler left
        self._origin_ns = _C._profiler_now_ns()
        self.activities = []
        self._running = True
        _C._profiler_start()

    def stop(self) -> None:
        if not self._running:
            raise RuntimeError("Profiler.stop(): this profiler is not running")
        _synchronize_all()
        _C._profiler_stop()
        self._running = False
        origin = self._origin_ns
        self.activities = sorted(
            (Activity(name, detail, kind, device, stream, (start - origin) / 1e3, (end - origin) / 1e3, bytes_, flops)
             for name, detail, kind, device, stream, start, end, bytes_, flops in _C._profiler_flush()
             if kind != "launch"),  # the host calls that queued the work: torch.profiler shows them
            key=lambda a: (a.start_us, a.kind != "program"))

    # -- views ----------------------------------------------------------------------------
    def leaf_activities(self) -> list:
        """Everything but the programs (whose time their instructions' activities show)."""
        return [a for a in self.activities if a.kind != "program"]

    def streams(self) -> list:
        """(device, stream) pairs in order of first use: the timeline's lanes."""
        lanes = []
        for a in self.activities:
            if (a.device, a.stream) not in lanes:
                lanes.append((a.device, a.stream))
        return lanes

    def report(self, top: int = 20) -> str:
        """Top operations by total time, with calls, mean time, achieved GB/s and GFLOP/s
        and their share of the machine's measured peaks, and compute vs copy time."""
        bandwidth, throughput = machine_peaks()
        totals: dict = {}
        for a in self.leaf_activities():
            entry = totals.setdefault(a.name, [0, 0.0, 0, 0.0, a.kind])
            entry[0] += 1
            entry[1] += a.duration_us
            entry[2] += a.bytes
            entry[3] += a.flops
        compute_us = sum(e[1] for e in totals.values() if e[4] not in ("copy", "fill"))
        copy_us = sum(e[1] for e in totals.values() if e[4] in ("copy", "fill"))
        header = (f"{'operation':<36} {'calls':>6} {'total ms':>9} {'mean us':>9} {'GB/s':>8} {'%bw':>5} "
                  f"{'GFLOP/s':>8} {'%peak':>6}")
        lines = [f"pypto profile: {len(self.leaf_activities())} activities on {len(self.streams())} stream(s); "
                 f"machine: {bandwidth:.1f} GB/s copy, {throughput:.1f} GFLOP/s float32 GEMM", header, "-" * len(header)]
        ranked = sorted(totals.items(), key=lambda item: -item[1][1])
        for name, (calls, total_us, bytes_, flops, _) in ranked[:top]:
            seconds = max(total_us, 1e-3) / 1e6
            gbs, gflops = bytes_ / seconds / 1e9, flops / seconds / 1e9
            lines.append(f"{name[:36]:<36} {calls:>6} {total_us / 1e3:>9.3f} {total_us / calls:>9.1f} {gbs:>8.2f} "
                         f"{100 * gbs / bandwidth:>5.0f} {gflops:>8.2f} {100 * gflops / throughput:>6.1f}")
        if len(ranked) > top:
            lines.append(f"... and {len(ranked) - top} more")
        lines.append("-" * len(header))
        lines.append(f"compute {compute_us / 1e3:.3f} ms, copies and fills {copy_us / 1e3:.3f} ms")
        return "\n".join(lines)

    def export_chrome_trace(self, path: str) -> None:
        """Chrome / Perfetto trace JSON: one process per device, one thread per stream."""
        lanes = self.streams()
        events = []
        for device, stream in lanes:
            events.append({"name": "process_name", "ph": "M", "pid": device, "args": {"name": f"pto:{device}"}})
            events.append({"name": "thread_name", "ph": "M", "pid": device, "tid": lanes.index((device, stream)),
                           "args": {"name": f"stream {lanes.index((device, stream))} (0x{stream:x})"}})
        for a in self.activities:
            events.append({"name": a.name, "cat": a.kind, "ph": "X", "ts": a.start_us, "dur": a.duration_us,
                           "pid": a.device, "tid": lanes.index((a.device, a.stream)),
                           "args": {"detail": a.detail, "bytes": a.bytes, "flops": a.flops}})
        with open(path, "w") as out:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, out)

    def visualize(self, path: str) -> None:
        """A timeline, one lane per stream: an image for .png paths (matplotlib), else a
        self-contained HTML page (inline SVG; hover a bar for its operands)."""
        if str(path).lower().endswith(".png"):
            self._png(path)
        else:
            with open(path, "w") as out:
                out.write(self._html())

    # -- drawing ----------------------------------------------------------------------
    _COLOURS = {"instruction": "#4e79a7", "stage": "#59a14f", "copy": "#e15759", "fill": "#f28e2b",
                "program": "#bab0ac"}

    def _extent_us(self) -> float:
        return max((a.end_us for a in self.activities), default=1.0) or 1.0

    def _html(self) -> str:
        lanes, width, lane_height = self.streams(), 1200, 44
        scale = (width - 160) / self._extent_us()
        bars = []
        for a in self.activities:
            lane = lanes.index((a.device, a.stream))
            y = 30 + lane * lane_height + (0 if a.kind == "program" else 12)
            height = 10 if a.kind == "program" else 24
            x, w = 150 + a.start_us * scale, max(a.duration_us * scale, 0.5)
            tip = html.escape(f"{a.name} ({a.kind}) {a.duration_us:.1f} us\n{a.detail}\n"
                              f"{a.bytes} bytes, {a.flops:.0f} FLOPs")
            bars.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{height}" '
                        f'fill="{self._COLOURS.get(a.kind, "#888")}"><title>{tip}</title></rect>')
        labels = [f'<text x="4" y="{30 + i * lane_height + 28}" font-size="12">pto:{d} stream {i}</text>'
                  for i, (d, _) in enumerate(lanes)]
        height = 40 + len(lanes) * lane_height
        legend = " ".join(f'<span style="color:{c}">&#9632; {k}</span>' for k, c in self._COLOURS.items())
        return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>pypto profile</title></head>"
                "<body style='font-family:sans-serif'><h3>pypto profile</h3>"
                f"<p>{len(self.activities)} activities, {self._extent_us() / 1e3:.3f} ms. {legend}</p>"
                f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}'>"
                f"<text x='150' y='16' font-size='11'>0 ms</text>"
                f"<text x='{width - 60}' y='16' font-size='11'>{self._extent_us() / 1e3:.3f} ms</text>"
                + "".join(labels) + "".join(bars) + "</svg>"
                f"<pre>{html.escape(self.report())}</pre></body></html>")

    def _png(self, path: str) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        lanes = self.streams()
        figure, axes = plt.subplots(figsize=(12, 1 + 0.8 * max(len(lanes), 1)))
        for a in self.activities:
            lane = lanes.index((a.device, a.stream))
            low, height = (lane + 0.35, 0.3) if a.kind == "program" else (lane - 0.3, 0.6)
            axes.broken_barh([(a.start_us / 1e3, max(a.duration_us / 1e3, 1e-4))], (low, height),
                             color=self._COLOURS.get(a.kind, "#888"))
        axes.set_yticks(range(len(lanes)), [f"pto:{d} stream {i}" for i, (d, _) in enumerate(lanes)])
        axes.set_xlabel("ms")
        axes.set_title(f"pypto profile: {len(self.activities)} activities")
        figure.tight_layout()
        figure.savefig(path)
        plt.close(figure)


def _synchronize_all() -> None:
    for device in range(torch.pto.device_count()):
        torch.pto.synchronize(device)
