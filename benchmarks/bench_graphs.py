"""Graph replay against eager launches: 100 small adds, side by side.

    python3 benchmarks/bench_graphs.py [--quick]

One step is 100 in-place adds (x.add_(1)) on a 16-element float32 tensor, run
  - eagerly on the CPU,
  - eagerly on pto (100 launches through the dispatcher and the runtime),
  - as one torch.pto.PTOGraph replay (the 100 launches captured once, queued as
    one command),
  - as one PTOGraph(optimize=True) replay (the captured work compiled into one
    program, launched once),
  - as a torch.compile(backend="pypto") function of 100 adds (x + 1, out of place:
    the compiled function returns a new tensor), with the default mode (the adds
    lowered into one program, launched from Python each call) and with
    mode="reduce-overhead" (that call replayed from a captured PTOGraph).
A second table times a small MLP's training step (zero_grad, forward, MSE loss,
backward, SGD step) in one compiled function: eagerly on pto, and compiled with the
default mode and with mode="reduce-overhead" (forward, backward and the optimizer
step each replayed from a graph).
Every figure is the best of several timed repetitions after warm-up; pto timings
end with torch.pto.synchronize() inside the timed region. The aim: replay at
least 5x faster than eager pto, and faster than eager CPU.
"""

import argparse
import time

import torch

import pypto_torch
from _timing import Aims, OtherLoad, best_time, context_header, settle, table

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

    def adds(x):
        for _ in range(OPS):
            x = x + 1
        return x

    compiled = torch.compile(adds, backend="pypto", dynamic=False)
    reduce_overhead = torch.compile(adds, backend="pypto", mode="reduce-overhead", dynamic=False)

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
    compiled_default = timed(lambda: compiled(x_pto), True)
    compiled_replay = timed(lambda: reduce_overhead(x_pto), True)

    for captured in (graph, optimized):
        x_pto.zero_()
        captured.replay()
        assert x_pto.cpu().tolist() == [float(OPS)] * ELEMENTS, "the replay did not add 100 times"
    for fn in (compiled, reduce_overhead):
        assert fn(x_pto).cpu().tolist() == [2.0 * OPS] * ELEMENTS, "the compiled function did not add 100 times"

    rows = [[name, f"{seconds * 1e6:,.1f}", f"{seconds * 1e6 / OPS:.2f}", f"{cpu / seconds:.2f}x", f"{pto / seconds:.2f}x"]
            for name, seconds in (("eager cpu", cpu), ("eager pto", pto), ("PTOGraph.replay()", replay),
                                  ("PTOGraph(optimize=True).replay()", replay_optimized),
                                  ("torch.compile, default mode", compiled_default),
                                  ('torch.compile, mode="reduce-overhead"', compiled_replay))]
    table(f"{OPS} x add_(1) on a {ELEMENTS}-element float32 tensor, one step (best of {reps} x {steps} steps)",
          ["run", "us/step", "us/op", "vs eager cpu", "vs eager pto"], rows)
    aims = Aims("bench_graphs")
    print(aims.aim(round(pto / replay, 1) >= 5, f"PTOGraph replay vs eager pto: {pto / replay:.1f}x faster (aim >= 5)"),
          f"replay vs eager pto: {pto / replay:.1f}x (aim >= 5x)")
    print(aims.aim(replay < cpu, f"PTOGraph replay vs eager cpu: {cpu / replay:.2f}x faster (aim > 1)"),
          f"replay vs eager cpu: {cpu / replay:.2f}x (aim > 1x)")
    print(f"optimize=True vs plain replay: {replay / replay_optimized:.2f}x")
    print(f'torch.compile mode="reduce-overhead" vs default mode: {compiled_default / compiled_replay:.2f}x')
    print(f"captured nodes: {graph._node_count()}")

    training = {name: timed_training(mode, reps, steps) for name, mode in
                (("eager pto", None), ("torch.compile, default mode", "default"),
                 ('torch.compile, mode="reduce-overhead"', "reduce-overhead"))}
    eager_step = training["eager pto"]
    table(f"MLP 16-32-32-4 training step on a batch of 8 (best of {reps} x {steps} steps)",
          ["run", "us/step", "vs eager pto"],
          [[name, f"{seconds * 1e6:,.1f}", f"{eager_step / seconds:.2f}x"] for name, seconds in training.items()])
    print(whole_run.describe())
    print(f"\ntotal time {time.perf_counter() - start:.1f} s")


def timed_training(mode: str | None, reps: int, steps: int) -> float:
    """Seconds per training step of the MLP, eagerly (mode None) or compiled with `mode`;
    checked against the eager step's loss after the timing."""
    def train_step(model, opt, x, y):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    def fresh():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 32),
                                    torch.nn.ReLU(), torch.nn.Linear(32, 4)).to("pto")
        return model, torch.optim.SGD(model.parameters(), lr=0.01)

    x, y = torch.randn(8, 16, device="pto"), torch.randn(8, 4, device="pto")
    model, opt = fresh()
    step = train_step if mode is None else torch.compile(train_step, backend="pypto", mode=mode)

    def run():
        for _ in range(steps):
            step(model, opt, x, y)
        torch.pto.synchronize()
    settle()
    seconds = best_time(run, reps, warmup=2) / steps
    reference, reference_opt = fresh()
    for _ in range((reps + 2) * steps):
        train_step(reference, reference_opt, x, y)
    torch.testing.assert_close(step(model, opt, x, y).cpu(), train_step(reference, reference_opt, x, y).cpu(),
                               rtol=1e-3, atol=1e-5)
    return seconds


if __name__ == "__main__":
    main()
