"""Long-running checks of the pto device, shared by test_stress.py (short runs in CI)
and the command line (long runs):

    python3 tests/python/stress.py concurrency --threads 8 --seconds 30
    python3 tests/python/stress.py soak --model mlp --steps 10000
    python3 tests/python/stress.py soak --model compiled-block --steps 10000

`concurrency`: threads, each on its own stream (some on pto:1), run random ops,
copies (pinned and pageable, blocking and not), allocations and synchronisations,
each result compared with the CPU's. `soak`: a training loop whose
memory_allocated() and process RSS must stay flat. Both print one summary line
of `key=value` pairs that the tests read. Seeded throughout.
"""

import argparse
import os
import random
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# --- concurrency -------------------------------------------------------------

def _random_shape(rng: random.Random) -> tuple:
    return tuple(rng.choice([0, 1, 3, 17, 64, 130]) for _ in range(rng.randint(1, 3)))


def _one_action(rng: random.Random, device: str, stream) -> str:
    """Runs one random action on `device`, checks it against the CPU; returns its name."""
    shape = _random_shape(rng)
    host = torch.randn(shape, generator=torch.Generator().manual_seed(rng.getrandbits(31)))
    action = rng.choice(["elementwise", "matmul", "reduce", "copy_pinned", "copy_pageable",
                         "allocate", "sync_stream", "sync_device", "event"])
    if action == "elementwise":
        x = host.to(device)
        torch.testing.assert_close((x.tanh() * 2 + x).cpu(), host.tanh() * 2 + host)
    elif action == "matmul":
        n = rng.choice([1, 16, 96])
        a = torch.randn(n, n, generator=torch.Generator().manual_seed(rng.getrandbits(31)))
        torch.testing.assert_close((a.to(device) @ a.to(device)).cpu(), a @ a, rtol=1e-4, atol=1e-4)
    elif action == "reduce":
        x = host.to(device)
        torch.testing.assert_close(x.sum(-1).cpu(), host.sum(-1), rtol=1e-4, atol=1e-4)
    elif action in ("copy_pinned", "copy_pageable"):
        source = host.pin_memory() if action == "copy_pinned" else host.clone()
        on_device = source.to(device, non_blocking=True)
        del source  # the copy must not depend on the caller keeping it alive
        back = torch.empty(shape, pin_memory=action == "copy_pinned")
        back.copy_(on_device, non_blocking=True)
        stream.synchronize()
        assert torch.equal(back, host), "copy round trip differs"
    elif action == "allocate":
        blocks = [torch.empty(rng.choice([1, 1000, 1 << 20]), device=device) for _ in range(rng.randint(1, 4))]
        for block in blocks:
            block.fill_(3.0)
        assert all(bool((block == 3.0).all()) for block in blocks)
    elif action == "sync_stream":
        stream.synchronize()
    elif action == "sync_device":
        torch.pto.synchronize(device)
    else:
        x = host.to(device)
        event = torch.pto.Event()
        event.record(stream)
        event.synchronize()
        assert event.query()
        torch.testing.assert_close(x.cpu(), host)
    return action


def concurrency(threads: int, seconds: float, seed: int) -> dict:
    deadline = time.monotonic() + seconds
    counts = [0] * threads
    failures: list[str] = []

    def worker(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        device = f"pto:{index % torch.pto.device_count()}"
        stream = torch.pto.Stream(device=device)
        with torch.pto.device(device), torch.pto.stream(stream):
            while time.monotonic() < deadline and not failures:
                try:
                    _one_action(rng, device, stream)
                    counts[index] += 1
                except Exception as error:  # noqa: BLE001  (every failure is reported, then the run stops)
                    failures.append(f"thread {index}: {type(error).__name__}: {error}")

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    torch.pto.synchronize()
    return {"threads": threads, "seconds": seconds, "actions": sum(counts), "failures": len(failures),
            "first_failure": failures[0] if failures else "none"}


# --- soak ----------------------------------------------------------------------

def _mlp_step_factory():
    from compile_models import MLP, on_device, seeded

    model = on_device(seeded(MLP, sizes=(64, 128, 128, 10)))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

    def step(batch: int) -> torch.Tensor:
        x = torch.randn(32, 64, device="pto")
        target = torch.randint(0, 10, (32,), device="pto")
        loss = torch.nn.functional.cross_entropy(model(x), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


def _compiled_block_step_factory():
    from compile_models import TransformerBlock, on_device, seeded

    model = on_device(seeded(TransformerBlock, dim=32, heads=2, hidden=64))
    compiled = torch.compile(model, backend="pypto")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step(batch: int) -> torch.Tensor:
        x = torch.randn(4, 8, 32, device="pto")
        loss = compiled(x).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


SOAK_MODELS = {"mlp": _mlp_step_factory, "compiled-block": _compiled_block_step_factory}


def soak(model: str, steps: int, seed: int) -> dict:
    """Trains for `steps`; memory is read after a warm-up (a tenth of the steps, at
    least 20: caches, lazily built programs and the optimizer's state settle) and
    at the end."""
    torch.manual_seed(seed)
    torch.pto.manual_seed_all(seed)
    step = SOAK_MODELS[model]()
    warmup = max(20, steps // 10)
    started = time.monotonic()
    for index in range(steps):
        loss = step(index)
        if index == warmup - 1:
            torch.pto.synchronize()
            allocated_after_warmup, rss_after_warmup = torch.pto.memory_allocated(), rss_bytes()
    final_loss = float(loss)
    torch.pto.synchronize()
    return {"model": model, "steps": steps, "seconds": round(time.monotonic() - started, 1),
            "allocated_after_warmup": allocated_after_warmup, "allocated_at_end": torch.pto.memory_allocated(),
            "rss_mib_after_warmup": round(rss_after_warmup / 2**20, 1), "rss_mib_at_end": round(rss_bytes() / 2**20, 1),
            "final_loss_finite": bool(torch.isfinite(torch.tensor(final_loss)))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("concurrency")
    run.add_argument("--threads", type=int, default=8)
    run.add_argument("--seconds", type=float, default=30)
    run.add_argument("--seed", type=int, default=0)
    run = commands.add_parser("soak")
    run.add_argument("--model", choices=sorted(SOAK_MODELS), default="mlp")
    run.add_argument("--steps", type=int, default=10000)
    run.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import pypto_torch

    pypto_torch.set_fallback_mode("silent")
    if args.command == "concurrency":
        summary = concurrency(args.threads, args.seconds, args.seed)
    else:
        summary = soak(args.model, args.steps, args.seed)
    print(" ".join(f"{key}={value}" for key, value in summary.items()))


if __name__ == "__main__":
    main()
