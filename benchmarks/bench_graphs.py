"""Graph replay against eager launches: 100 small adds, side by side.

    python3 benchmarks/bench_graphs.py [--quick]

One step is 100 in-place adds (x.add_(1)) on a 16-element float32 tensor, run
  - eagerly on the CPU,
  - eagerly on pto (100 launches through the dispatcher and the runtime),
  - as one torch.pto.PTOGraph replay (the 100 launches captured once, queued as
    one command),
  - as one PTOGraph(optimize=True) replay (the captured work compiled into one
    program, launched once).
Every figure is the best of several timed repetitions after warm-up; pto timings
end with torch.pto.synchronize() inside the timed region. The aim: replay at
least 5x faster than eager pto, and faster than eager CPU.
"""

import argparse
import time

import torch

import pypto_torch
from _timing import OtherLoad, best_time, context_header, settle, table

OPS = 100
ELEMENTS = 16


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    pypto_torch.set_fallback_mode("silent")
    context_header("pto graph replay benchmark", args.quick)
    whole_run = OtherLoad()
    start = time.perf_counter()
    reps, steps = (5, 20) if args.quick else (15, 50)

    x_cpu = torch.zeros(ELEMENTS)
    x_pto = torch.zeros(ELEMENTS, device="pto")

    def eager(x):
        for _ in range(OPS):
            x.add_(1)

    graph = torch.pto.PTOGraph()
    with torch.pto.graph(graph):
        eager(x_pto)
    optimized = torch.pto.PTOGraph(optimize=True)
    with torch.pto.graph(optimized):
        eager(x_pto)

    def timed(step, sync):
        def run():
            for _ in range(steps):
                step()
            if sync:
                torch.pto.synchronize()
        settle()
        return best_time(run, reps, warmup=2) / steps

    cpu = timed(lambda: eager(x_cpu), False)
    pto = timed(lambda: eager(x_pto), True)
    replay = timed(graph.replay, True)
    replay_optimized = timed(optimized.replay, True)

    for captured in (graph, optimized):
        x_pto.zero_()
        captured.replay()
        assert x_pto.cpu().tolist() == [float(OPS)] * ELEMENTS, "the replay did not add 100 times"

    rows = [[name, f"{seconds * 1e6:,.1f}", f"{seconds * 1e6 / OPS:.2f}", f"{cpu / seconds:.2f}x", f"{pto / seconds:.2f}x"]
            for name, seconds in (("eager cpu", cpu), ("eager pto", pto), ("PTOGraph.replay()", replay),
                                  ("PTOGraph(optimize=True).replay()", replay_optimized))]
    table(f"{OPS} x add_(1) on a {ELEMENTS}-element float32 tensor, one step (best of {reps} x {steps} steps)",
          ["run", "us/step", "us/op", "vs eager cpu", "vs eager pto"], rows)
    print(f"replay vs eager pto: {pto / replay:.1f}x (aim >= 5x: {'met' if pto / replay >= 5 else 'MISSED'}); "
          f"replay vs eager cpu: {cpu / replay:.2f}x (aim > 1x: {'met' if replay < cpu else 'MISSED'})")
    print(f"optimize=True vs plain replay: {replay / replay_optimized:.2f}x")
    print(f"captured nodes: {graph._node_count()}; {whole_run.describe()}")
    print(f"\ntotal time {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
