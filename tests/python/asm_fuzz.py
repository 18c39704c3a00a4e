"""A fuzzer for hand-written PTO programs (`pypto.asm`): random programs of
elementwise and reduction instructions whose operands have random shapes,
strides (negative and zero included) and offsets, bound to slices of larger
tensors. Every program is either refused with a clear error before it runs, or
runs and leaves every element outside its output slice as it was: no program
reads or writes past the views it is given.

    python3 tests/python/asm_fuzz.py --cases 100000 --seed 7     # a long run

Each case prints its description before it runs, so a crash's last line names it.
"""

import argparse
import random

import torch

import pypto_torch as pypto

SENTINEL = -7.25  # exactly representable; no instruction below computes it from the inputs
STORAGE = 256     # elements of the output storage and of the input storage

UNARY = ["texp", "tneg", "tabs", "tmov"]
BINARY = ["tadd", "tmul"]


def _operand(rng: random.Random, buffer: int, shape: list[int], zero_strides=()) -> str:
    """Mostly row-major operands (programs that can run), else random strides and offsets."""
    if rng.random() < 0.6:
        strides, step = [], 1
        for size in reversed(shape):
            strides.insert(0, step)
            step *= max(size, 1)
    else:
        strides = [rng.randint(-4, 4) for _ in shape]
    strides = [0 if d in zero_strides else stride for d, stride in enumerate(strides)]
    offset = rng.choice([0, 0, 0, rng.randint(-4, 48)])
    return f"%{buffer}:f32[{','.join(map(str, shape))};{','.join(map(str, strides))}]@{offset}"


def random_program(rng: random.Random, input_bytes: int, output_bytes: int) -> str:
    lines = [f"buffer %0 input {input_bytes}", f"buffer %1 output {output_bytes}"]
    for _ in range(rng.choice([1, 1, 2, 3])):
        shape = [rng.choice([0, 1, 2, 3, 5, 8, 16]) for _ in range(rng.choice([1, 1, 2, 2, 3]))]
        kind = rng.choice(["unary", "binary", "reduce"])
        if kind == "reduce":
            reduced = {rng.randrange(len(shape))}
            out = _operand(rng, 1, shape, zero_strides=reduced)
            lines.append(f"tsum {out}, {_operand(rng, 0, shape)} scale=1")
        elif kind == "unary":
            lines.append(f"{rng.choice(UNARY)} {_operand(rng, 1, shape)}, {_operand(rng, 0, shape)}")
        else:
            name = rng.choice(BINARY)
            suffix = " alpha=1" if name == "tadd" else ""
            lines.append(f"{name} {_operand(rng, 1, shape)}, {_operand(rng, 0, shape)}, "
                         f"{_operand(rng, 0, shape)}{suffix}")
    return "\n".join(lines) + "\n"


def run_case(seed: int, case: int, verbose: bool = False) -> str:
    """One case; returns "ran" or "refused". Raises AssertionError if the program
    touched memory outside its output slice."""
    rng = random.Random(seed * 1_000_003 + case)
    device = rng.choice(["pto", "pto", "cpu"])
    inputs = torch.randn(STORAGE, generator=torch.Generator().manual_seed(rng.getrandbits(31))).to(device)
    outputs = torch.full((STORAGE,), SENTINEL, device=device)
    in_start, in_stop = sorted(rng.sample(range(STORAGE + 1), 2))
    out_start, out_stop = sorted(rng.sample(range(STORAGE + 1), 2))
    input_view, output_view = inputs[in_start:in_stop], outputs[out_start:out_stop]
    declared = [max(0, 4 * (view.numel() + rng.choice([0, 0, 0, -1, 1, 8]))) for view in (input_view, output_view)]
    program = random_program(rng, *declared)
    if verbose:
        print(f"case {case} on {device}: input [{in_start}:{in_stop}] output [{out_start}:{out_stop}]\n{program}",
              flush=True)
    inputs_before = inputs.cpu().clone()
    try:
        pypto.asm(program, input_view, output_view)
        if device == "pto":
            torch.pto.synchronize()
        outcome = "ran"
    except (pypto.CompileError, RuntimeError, TypeError, ValueError):
        torch.pto.synchronize()
        outcome = "refused"
    after = outputs.cpu()
    outside = torch.cat([after[:out_start], after[out_stop:]])
    assert bool((outside == SENTINEL).all()), f"case {case}: wrote outside [{out_start}:{out_stop}]\n{program}"
    assert torch.equal(inputs.cpu(), inputs_before), f"case {case}: wrote its input\n{program}"
    return outcome


def run_cases(seed: int, first: int, count: int, verbose: bool = False) -> dict:
    outcomes = {"ran": 0, "refused": 0}
    for case in range(first, first + count):
        outcomes[run_case(seed, case, verbose)] += 1
    return outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10000)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true", help="print each case before running it")
    args = parser.parse_args()
    pypto.set_fallback_mode("silent")
    outcomes = run_cases(args.seed, args.first, args.cases, args.verbose)
    print(f"cases={args.cases} ran={outcomes['ran']} refused={outcomes['refused']}")


if __name__ == "__main__":
    main()
