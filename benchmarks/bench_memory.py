"""Fragmentation of the caching allocator on a workload of varying sizes, default settings
beside PYTORCH_ALLOC_CONF options.

    python3 benchmarks/bench_memory.py [--quick]

The workload (seeded): a window of live tensors whose sizes are drawn log-uniformly between
256 KiB and 48 MiB; each step allocates one and, once 24 are live, frees a random one. Each
configuration runs in a process of its own (torch reads PYTORCH_ALLOC_CONF once) on a 1 GiB
device (so that garbage_collection_threshold:0.5 has something to collect) and reports
peak reserved / peak allocated (1.0: the cache holds nothing beyond what tensors use), the
segments it took from the device and the time per allocation. The aim: expandable_segments
brings the ratio closer to 1 than the default.
"""

import argparse
import json
import os
import subprocess
import sys
import time

from _timing import Aims, context_header, table

CONFIGURATIONS = ["", "expandable_segments:True", "max_split_size_mb:20", "garbage_collection_threshold:0.5"]

WORKLOAD = """
import json, random, sys, time
import torch
import pypto_torch

steps = int(sys.argv[1])
rng = random.Random(0)
live = []
torch.pto.reset_peak_memory_stats()
start = time.perf_counter()
for _ in range(steps):
    size = int(2 ** rng.uniform(18, 25.58))  # 256 KiB to 48 MiB
    live.append(torch.empty(size, dtype=torch.uint8, device="pto"))
    if len(live) > 24:
        live.pop(rng.randrange(len(live)))
seconds = time.perf_counter() - start
stats = torch.pto.memory_stats()
print(json.dumps({"reserved": stats["reserved_bytes.all.peak"], "allocated": stats["allocated_bytes.all.peak"],
                  "device_allocs": stats["num_device_alloc"], "us_per_alloc": seconds / steps * 1e6}))
"""


def measure(conf: str, steps: int) -> dict:
    env = dict(os.environ, PYTORCH_ALLOC_CONF=conf, PTO_SIM_MEMORY="1G")
    if not conf:
        env.pop("PYTORCH_ALLOC_CONF")
    result = subprocess.run([sys.executable, "-c", WORKLOAD, str(steps)], env=env, capture_output=True, text=True,
                            check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps")
    args = parser.parse_args()
    context_header("pto caching allocator fragmentation benchmark", args.quick)
    start = time.perf_counter()
    steps = 500 if args.quick else 3000
    results = {conf or "default": measure(conf, steps) for conf in CONFIGURATIONS}
    MiB = 2**20
    table(f"{steps} allocations of 256 KiB-48 MiB, 24 live (seed 0)",
          ["PYTORCH_ALLOC_CONF", "peak reserved MiB", "peak allocated MiB", "reserved/allocated",
           "device allocations", "us/alloc"],
          [[conf, f"{r['reserved'] / MiB:,.0f}", f"{r['allocated'] / MiB:,.0f}", f"{r['reserved'] / r['allocated']:.3f}",
            f"{r['device_allocs']:,}", f"{r['us_per_alloc']:.1f}"] for conf, r in results.items()])
    default, expandable = results["default"], results["expandable_segments:True"]
    ratio_default = default["reserved"] / default["allocated"]
    ratio_expandable = expandable["reserved"] / expandable["allocated"]
    aims = Aims("bench_memory")
    print(aims.aim(ratio_expandable < ratio_default,
                   f"expandable_segments reserved/allocated {ratio_expandable:.3f} vs default {ratio_default:.3f} "
                   "(aim: lower)"),
          f"expandable_segments: peak reserved/allocated {ratio_expandable:.3f} vs {ratio_default:.3f} by default")
    print(f"\ntotal time {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
