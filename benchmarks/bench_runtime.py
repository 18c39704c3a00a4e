"""Runtime overheads of the pto device, side by side with the CPU.

    python3 benchmarks/bench_runtime.py [--quick]

Five measurements, each printed as a plain-text table:
  1. per-op launch overhead: rounds of 100 a.add_(1) on 16 floats, pto vs CPU (aim: pto/CPU
     time <= 1.0);
  2. host<->device copy bandwidth (pinned and pageable host memory) vs a host memcpy;
  3. the caching allocator: torch.empty + del of mixed sizes, pto vs CPU;
  4. the simulated device's core hand-off: a parallelFor of two 1 us chunks vs an
     OpenMP team, and the idle pool's CPU time (benchmarks/bench_parallel_for.cpp,
     built with the C++ suites into build/cmake/tests/cpp);
  5. the cost of torch.pto's runtime calls (current stream, memory counters, events)
     beside torch.accelerator's generic forms of the same.

Every figure is the best of several timed repetitions after warm-up; pto timings
end with torch.pto.synchronize() inside the timed region.
"""

import argparse
import ctypes
import random
import subprocess
import time
from pathlib import Path

import numpy as np
import torch

import pypto_torch
from _timing import Aims, best_time, context_header, table

KiB, MiB, GiB = 2**10, 2**20, 2**30


def size_name(count: int) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if count >= scale:
            return f"{count / scale:g} {unit}"
    return f"{count} B"


# 1. Per-op launch overhead ---------------------------------------------------------------

def bench_launch(quick: bool, aims: Aims) -> None:
    reps = 3 if quick else 5
    rounds = 20 if quick else 100  # of 100 ops each; a pto round ends with a synchronize
    a_cpu, a_pto = torch.zeros(16), torch.zeros(16, device="pto")
    one = torch.ones(16)

    def per_op(fn, sync):
        def run():
            for _ in range(rounds):
                for _ in range(100):
                    fn()
                if sync:
                    torch.pto.synchronize()
        return best_time(run, reps) / (100 * rounds)

    cpu = per_op(lambda: a_cpu.add_(1), False)
    fallbacks_before = sum(pypto_torch.fallback_ops().values())
    pto = per_op(lambda: a_pto.add_(1), True)
    native = sum(pypto_torch.fallback_ops().values()) == fallbacks_before
    h2d = per_op(lambda: a_pto.copy_(one), True)  # what the fallback pays per copy
    rows = [["cpu   a.add_(1)", f"{1 / cpu:,.0f}", f"{cpu * 1e6:.2f}"],
            ["pto   a.add_(1)", f"{1 / pto:,.0f}", f"{pto * 1e6:.2f}"],
            ["pto   a.copy_(cpu) (reference)", f"{1 / h2d:,.0f}", f"{h2d * 1e6:.2f}"]]
    table(f"1. Per-op launch overhead, 16-float tensor, {rounds} rounds of 100 ops, pto rounds synchronized "
          f"(best of {reps})", ["op", "ops/s", "us/op"], rows)
    how = ("native: one tadd on the stream, the scalar read from this thread's device constants for it"
           if native else "through the CPU fallback: a is copied to the host and back")
    ratio = pto / cpu
    print(f"{aims.aim(round(ratio, 2) <= 1.0, f'eager a.add_(1) on 16 floats: pto/CPU time {ratio:.2f} (aim <= 1)')} "
          f"pto/CPU per-op cost: {ratio:.2f}x  (add_ {how})")


# 2. Copy bandwidth ------------------------------------------------------------------------

def bench_copies(quick: bool) -> None:
    sizes = [MiB, 64 * MiB] if quick else [MiB, 64 * MiB, GiB]
    rows = []
    for nbytes in sizes:
        reps = 3 if nbytes >= GiB else 5
        inner = max(1, (256 * MiB) // nbytes) if not quick else max(1, (64 * MiB) // nbytes)
        pinned = torch.full((nbytes,), 7, dtype=torch.uint8).pin_memory()
        pageable = torch.full((nbytes,), 7, dtype=torch.uint8)
        host_dst = torch.zeros(nbytes, dtype=torch.uint8)
        pinned_dst = torch.zeros(nbytes, dtype=torch.uint8).pin_memory()
        device = torch.empty(nbytes, dtype=torch.uint8, device="pto")
        np_src, np_dst = pageable.numpy(), host_dst.numpy()

        def timed(copy, sync=False):
            def run():
                for _ in range(inner):
                    copy()
                if sync:
                    torch.pto.synchronize()
            return nbytes * inner / best_time(run, reps) / 1e9  # GB/s

        src_address, dst_address = pageable.data_ptr(), host_dst.data_ptr()
        memcpy_libc = timed(lambda: ctypes.memmove(dst_address, src_address, nbytes))
        memcpy_torch = timed(lambda: host_dst.copy_(pageable))
        memcpy_numpy = timed(lambda: np.copyto(np_dst, np_src))
        memcpy = max(memcpy_libc, memcpy_torch, memcpy_numpy)
        cases = [
            ("memcpy  libc memcpy (1 thread)", memcpy_libc),
            ("memcpy  torch copy_ (cpu->cpu)", memcpy_torch),
            ("memcpy  np.copyto", memcpy_numpy),
            ("H2D  pinned", timed(lambda: device.copy_(pinned), sync=True)),
            ("H2D  pinned, non_blocking", timed(lambda: device.copy_(pinned, non_blocking=True), sync=True)),
            ("H2D  pageable", timed(lambda: device.copy_(pageable), sync=True)),
            ("D2H  pinned", timed(lambda: pinned_dst.copy_(device), sync=True)),
            ("D2H  pageable", timed(lambda: host_dst.copy_(device), sync=True)),
        ]
        for name, gbps in cases:
            rows.append([size_name(nbytes), name, f"{gbps:.2f}", f"{100 * gbps / memcpy:.0f}%"])
        rows.append(["", "", "", ""])
        del pinned, pageable, host_dst, pinned_dst, device, np_src, np_dst
        torch.pto.empty_cache()
    table("2. Host<->device copy bandwidth (GB/s = 1e9 bytes/s; % of the fastest host-to-host copy)",
          ["size", "copy", "GB/s", "% memcpy"], rows[:-1], text_columns=2)


# 3. Caching allocator ---------------------------------------------------------------------

def bench_allocator(quick: bool) -> None:
    rng = random.Random(0)
    count = 2000 if quick else 10000
    # log-uniform sizes between 1 KiB and 8 MiB
    sizes = [int(2 ** rng.uniform(10, 23)) for _ in range(count)]
    reps = 3 if quick else 5
    rows, notes = [], []
    for live in (0, 16):
        pattern = "alloc + free" if live == 0 else f"{live} live (FIFO)"
        per_second = {}
        for device in ("cpu", "pto"):
            def run(device=device):
                keep = []
                for n in sizes:
                    t = torch.empty(n, dtype=torch.uint8, device=device)
                    if live:
                        keep.append(t)
                        if len(keep) > live:
                            keep.pop(0)
                    del t
                keep.clear()

            if device == "pto":
                torch.pto.empty_cache()
                before = torch.pto.memory_stats()
            per_second[device] = count / best_time(run, reps)
            if device == "pto":
                after = torch.pto.memory_stats()
                allocs = after["allocation.all.allocated"] - before["allocation.all.allocated"]
                device_allocs = after["num_device_alloc"] - before["num_device_alloc"]
                notes.append(f"  {pattern:<16} {allocs:>7,} tensor allocations -> {device_allocs:>4} "
                             f"device allocations (cache hit rate {100 * (1 - device_allocs / allocs):.2f}%), "
                             f"reserved {size_name(torch.pto.memory_reserved())}")
        rows.append([pattern, f"{per_second['cpu']:,.0f}", f"{per_second['pto']:,.0f}",
                     f"{per_second['cpu'] / per_second['pto']:.2f}x"])
    table(f"3. Caching allocator: torch.empty(n, uint8) + del, {count:,} sizes 1 KiB..8 MiB "
          f"(log-uniform, best of {reps})",
          ["pattern", "cpu allocs/s", "pto allocs/s", "pto/CPU cost"], rows)
    print("memory_stats() of pto:0 over all repetitions (warm-up included), from an empty cache:")
    print("\n".join(notes))


# 4. Core hand-off -------------------------------------------------------------------------

PARALLEL_FOR_BENCH = Path(__file__).resolve().parent.parent / "build/cmake/tests/cpp/bench_parallel_for"


def bench_core_handoff() -> None:
    print("\n4. Core hand-off of the simulated device")
    if not PARALLEL_FOR_BENCH.exists():
        print(f"skipped: {PARALLEL_FOR_BENCH} is not built (cmake --build build/cmake --target bench_parallel_for)")
        return
    print(subprocess.run([str(PARALLEL_FOR_BENCH)], check=True, capture_output=True, text=True).stdout, end="")


def bench_api_calls() -> None:
    """Microseconds per call of torch.pto's runtime functions that code calls every step."""
    import torch.accelerator.memory as accelerator_memory

    event = torch.pto.Event()
    calls = [
        ("torch.pto.current_stream()", torch.pto.current_stream, torch.accelerator.current_stream),
        ("torch.pto.default_stream()", torch.pto.default_stream, None),
        ("torch.pto.memory_allocated()", torch.pto.memory_allocated, accelerator_memory.memory_allocated),
        ("torch.pto.max_memory_reserved()", torch.pto.max_memory_reserved, accelerator_memory.max_memory_reserved),
        ("torch.pto.Event().record()", lambda: torch.pto.Event().record(), None),
        ("event.query()", event.query, None),
        ("torch.pto.synchronize(), idle", torch.pto.synchronize, torch.accelerator.synchronize),
    ]
    count = 2000

    def per_call(fn):
        return best_time(lambda: [fn() for _ in range(count)], 5) / count * 1e6

    rows = [[name, f"{per_call(pto):.2f}", f"{per_call(generic):.2f}" if generic else "-"] for name, pto, generic in calls]
    table("5. Runtime calls, us per call (best of 5 rounds of 2000)", ["call", "torch.pto", "torch.accelerator"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter run (no 1 GiB copies)")
    args = parser.parse_args()
    pypto_torch.set_fallback_mode("silent")

    context_header("pto runtime benchmark", args.quick)
    start = time.perf_counter()
    bench_launch(args.quick, Aims("bench_runtime"))
    bench_copies(args.quick)
    bench_allocator(args.quick)
    bench_core_handoff()
    bench_api_calls()
    print(f"\ntotal time {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
