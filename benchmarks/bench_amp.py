"""A bf16 autocast training step of a transformer block, pto side by side with CPU autocast.

    python benchmarks/bench_amp.py [--quick]

The model is tests/python/compile_models.py's TransformerBlock (pre-norm attention
through scaled_dot_product_attention, layer norms, a GELU feed-forward), trained with
SGD + momentum on an MSE loss. One step: zero_grad, forward under
torch.autocast(device, dtype=torch.bfloat16), backward, optimizer step; on pto it ends
with torch.pto.synchronize(). The four steps of a size alternate, best of 10 rounds
after two untimed steps each. pto's autocast applies CUDA's cast policy, CPU's its own
lists (both put linear and attention's matmuls in bf16, layer norm and the loss in
float32). The float32 step of each device is beside it, for what autocast changes on
that device. The CPU flags that matter for bf16 (avx512_bf16, amx_bf16) are in the header.
Aim: pto's bf16 step no slower than CPU autocast's (pto/CPU time <= 1.0), at every size.
"""

import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import pypto_torch
from _timing import (Aims, OtherLoad, best_time, context_header, cpu_gemm_slow_path, fell_back_since, settle_and_warm,
                     table)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))
from compile_models import TransformerBlock, on_device, seeded  # noqa: E402

SIZES = [  # (batch, sequence, dim, heads, hidden)
    (8, 64, 64, 4, 256),
    (8, 128, 128, 4, 512),
    (4, 256, 256, 8, 1024),
]


def training_step(device: str, size, autocast: bool):
    """A function running one training step of a fresh, seeded block on `device`."""
    batch, seq, dim, heads, hidden = size
    model = on_device(seeded(TransformerBlock, dim=dim, heads=heads, hidden=hidden), device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(batch, seq, dim, generator=generator).to(device)
    target = torch.randn(batch, seq, dim, generator=generator).to(device)

    def step():
        optimizer.zero_grad()
        with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
            loss = F.mse_loss(model(x), target)
        loss.backward()
        optimizer.step()
        if device == "pto":
            torch.pto.synchronize()
        return loss

    return step


def best_times(steps: dict, reps: int) -> dict:
    """Best time of each step over `reps` rounds; the steps alternate within a round, each
    after the threads of the one before have stopped spinning and 50 ms of its own untimed
    steps (settle_and_warm), so that a burst of other load does not fall on one of them only."""
    best = {way: float("inf") for way in steps}
    for step in steps.values():
        step()
        step()
    for _ in range(reps):
        for way, step in steps.items():
            settle_and_warm(step)
            best[way] = min(best[way], best_time(step, 1, warmup=0))
    return best


def main() -> None:
    quick = "--quick" in sys.argv
    pypto_torch.set_fallback_mode("silent")
    context_header("Mixed precision: bf16 autocast training step, pto vs CPU", quick)
    aims = Aims("bench_amp")
    # Without a fast CPU bf16 GEMM a CPU bf16 step of the largest block takes seconds.
    slow_path = cpu_gemm_slow_path(torch.bfloat16)
    reps = 2 if slow_path else 3 if quick else 10
    if slow_path:
        print("  " + aims.note(f"capped: {slow_path}: best of {reps} rounds, not 10"))
    load = OtherLoad()
    start = time.perf_counter()
    fallbacks_before = pypto_torch.fallback_ops()
    rows = []
    for size in SIZES:
        batch, seq, dim, heads, hidden = size
        steps = {(device, autocast): training_step(device, size, autocast)
                 for device in ("pto", "cpu") for autocast in (True, False)}
        ms = {way: seconds * 1e3 for way, seconds in best_times(steps, reps).items()}
        name, ratio = f"{batch}x{seq}x{dim}, {heads} heads, ff {hidden}", ms['pto', True] / ms['cpu', True]
        rows.append([name, f"{ms['pto', True]:.2f}", f"{ms['cpu', True]:.2f}", f"{ratio:.2f}",
                     aims.aim(round(ratio, 2) <= 1.0, f"bf16 autocast step {name}: pto/CPU time {ratio:.2f} (aim <= 1)"),
                     f"{ms['pto', False]:.2f}", f"{ms['cpu', False]:.2f}",
                     f"{ms['pto', True] / ms['pto', False]:.2f}", f"{ms['cpu', True] / ms['cpu', False]:.2f}"])
    table(f"Time per training step, ms (best of {reps}; pto steps waited for)",
          ["transformer block", "pto bf16", "CPU bf16", "pto/CPU time", "<=1", "pto fp32", "CPU fp32",
           "pto bf16/fp32", "CPU bf16/fp32"], rows)
    print(f"\nops that went through the CPU fallback: {fell_back_since(fallbacks_before) or 'none'}")
    print(f"total time {time.perf_counter() - start:.1f} s; {load.describe()}")


if __name__ == "__main__":
    main()
