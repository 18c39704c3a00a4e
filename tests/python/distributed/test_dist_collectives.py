"""Every collective of the pccl backend, against the same data on CPU tensors through Gloo.

One spawned group per world size (2 and 4 ranks) runs the whole sweep: each rank
initialises ``init_process_group("cpu:gloo,pto:pccl")``, so the same group moves CPU
tensors through Gloo and pto tensors through pccl, and runs every case twice, on CPU
tensors and on pto tensors, from the same seeded inputs (each rank's inputs are a pure
function of the case name and the rank, so every rank can also recompute every other
rank's inputs: the reductions come with a float64 or exact reference computed that way).
The test process then compares, one pytest item per case and world size.

The cases run in groups ("phases"), each on a process group of its own made with
``dist.new_group`` while an environment variable is set (the backend reads it when a
group is created, so one launch covers them all):

* ``world``: the default group (shared-memory transport, 4 MiB per exchange), with
  tensors of 3M float32 (12 MB: several exchanges, and the reduce-scatter path of
  all_reduce) and 100k-600k elements (one exchange, reduce-scatter path);
* ``rounds``: ``PTO_PCCL_BUFFER_BYTES=65536``, every collective on tensors of a few
  hundred KB, so each one runs many exchanges;
* ``gloo``: ``PTO_PCCL_TRANSPORT=gloo`` (and the 64 KiB buffer) for all_reduce (every
  reduce op, one exchange and by messages), all_gather_into_tensor, reduce_scatter_tensor,
  uneven all_to_all_single and broadcast, small and in rounds;
* ``sequence+...``: orderings that leave a group unusable when they fail, each on a
  group of its own, last.

test_transports checks that each phase's group got its transport and, from the size of
the shared-memory segment it mapped, its buffer size.

The all_to_all cases run last within their phase: a failing exchange leaves its group
unusable for every later collective (by design: the ranks no longer agree on where they
are), and an ordering bug is covered by cases of their own (``sequence/...``).

Where Gloo lacks what a case does on pto tensors, the CPU side does the same arithmetic
with what Gloo has: PREMUL_SUM is SUM of factor * x, integer AVG is SUM then division
truncating toward zero (as pccl and NCCL), reduce's AVG is SUM / n, the uneven list
all_to_all is all_to_all_single, non-contiguous tensors go through contiguous copies,
and _coalescing_manager(device=...) (pccl's startCoalescing) takes the fast path.
With PTO_DIST_TEST_DEVICE=cpu both sides run that Gloo form (a check of this file).

The whole file takes about 30 s (2 CPUs).

Comparisons: integers, bool, MIN/MAX and data movement are exact (torch.testing.assert_close
with rtol=atol=0). Sums, averages, PREMUL_SUM and products of floating-point tensors are
compared elementwise against the float64 value E with the bound

    |result - E| <= (n + 1) * eps / 2 * S + n * tiny

(eps, tiny: the dtype's machine epsilon and smallest normal; n ranks; S = sum over ranks
of |f * x_r| for SUM/AVG/PREMUL_SUM with f = 1, 1/n, factor; S = |E| for PRODUCT).
Summing n terms in any order in a precision of unit roundoff u <= eps/2 (Gloo: the
dtype itself; pccl: float32 for float16/bfloat16) errs by at most (n - 1) u S, rounding
the result to the dtype (and AVG's division) adds at most 2 u |E| <= 2 u S; the products
are bounded the same way relatively. Pto against Gloo then allows twice the bound.
Pto against E is held to what pccl promises, float32 accumulation rounded once to the
dtype: |result - E| <= n * u32 * S + eps / 2 * |E| + n * tiny (u32 = 2**-24), so a
float16/bfloat16 reduction that accumulated in its own dtype fails it.
A contribution lost or counted twice, or the wrong rank's data, errs by about |x|, far
above eps * S; the bounds only admit rounding.
"""

from __future__ import annotations

import datetime
import functools
import os
import time
import traceback
import zlib
from dataclasses import dataclass
from typing import Any, Callable

import pytest
import torch
from torch.testing import assert_close

import harness

WORLDS = (2, 4)
ON_PTO = harness.DEVICE == "pto"
BACKENDS = f"cpu:gloo,{harness.DEVICE}:{harness.BACKEND}" if ON_PTO else "cpu:gloo"
CPU = torch.device("cpu")
FACTOR = 2.0  # PREMUL_SUM's factor: a power of two, so x * FACTOR is exact in every dtype
SMALL_BUFFER = 65536  # PTO_PCCL_BUFFER_BYTES of the "rounds" and "gloo" phases
LARGE = 3_000_000  # float32 elements: 12 MB, three exchanges of the default 4 MiB
LARGE_PART = 1_250_000  # per rank where each rank contributes a part: 5 MB > 4 MiB
PG_TIMEOUT_S = 60  # a desynchronised case fails within this instead of hanging the launch
LAUNCH_TIMEOUT_S = 420

FLOATS = (torch.float32, torch.bfloat16, torch.float16)
INTS = (torch.int64, torch.int32, torch.uint8)
BITWISE = ("BAND", "BOR", "BXOR")


def _dt(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


# ---------------------------------------------------------------------------
# Inputs: a pure function of (key, rank), so any rank (and the test) can recompute any rank's.

def _shape(shape) -> tuple:
    return (shape,) if isinstance(shape, int) else tuple(shape)


def gen(key: str, rank: int, shape, dtype: torch.dtype, kind: str = "auto") -> torch.Tensor:
    g = torch.Generator().manual_seed(zlib.crc32(f"{key}|{rank}".encode()))
    shape = _shape(shape)
    if kind == "auto":
        kind = "bool" if dtype == torch.bool else "normal" if dtype.is_floating_point else "int"

    def ints(low, high):
        return torch.randint(low, high, shape, generator=g, dtype=torch.int64).to(dtype)

    if kind == "normal":
        return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    if kind == "intlike":  # integers in floating point: sums of a few are exact in every dtype
        return ints(-8, 9)
    if kind == "bool":
        return ints(0, 2)
    if kind == "bits":
        return {torch.int64: lambda: ints(-2**62, 2**62), torch.int32: lambda: ints(-2**31, 2**31)}.get(
            dtype, lambda: ints(0, 256))()
    if kind == "small":  # products of n of them stay far from overflow
        return ints(0, 256) if dtype == torch.uint8 else ints(-6, 7)
    if kind == "byte_avg":  # the sum of 4 stays below 256
        return ints(0, 64)
    if kind == "int":
        return ints(0, 256) if dtype == torch.uint8 else ints(-1000, 1001)
    if kind == "ties":  # ranks hold 1, h, h, 0 (h: half an ulp of 1): summed in float32 and rounded
        h = torch.finfo(dtype).eps / 2  # once, 1 + 2h is exact; rounding 1 + h first (a tie) loses both h
        return torch.full(shape, [1.0, h, h, 0.0][rank % 4], dtype=dtype)
    raise ValueError(kind)


def _kind(op: str, dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return "bool"
    if dtype.is_floating_point:
        return "normal"
    if op in BITWISE:
        return "bits"
    if op == "PRODUCT":
        return "small"
    if op == "AVG" and dtype == torch.uint8:
        return "byte_avg"
    return "int"


def _op(name: str):
    import torch.distributed as dist

    return dist._make_nccl_premul_sum(FACTOR) if name == "PREMUL_SUM" else getattr(dist.ReduceOp, name)


def _gloo_form(op: str, tensors: list, n: int):
    """What Gloo runs for `op` on CPU: (prepared tensors, Gloo's op, post-processing).
    Gloo has no PREMUL_SUM (factor * x, then SUM) and no integer AVG (SUM, then / n)."""
    import torch.distributed as dist

    if op == "PREMUL_SUM":
        return [t * FACTOR for t in tensors], dist.ReduceOp.SUM, lambda y: y
    if op == "AVG" and not tensors[0].is_floating_point():
        return tensors, dist.ReduceOp.SUM, lambda y: torch.div(y, n, rounding_mode="trunc")
    return tensors, getattr(dist.ReduceOp, op), lambda y: y


def reduce_ref(xs: list, op: str) -> Any:
    """The reduction of `xs` (one tensor per rank): exact (a tensor of their dtype) for
    integers, bool, MIN and MAX; else {"approx": float64 value, "bound": elementwise bound}."""
    n, dtype = len(xs), xs[0].dtype
    if dtype == torch.bool:
        stack = torch.stack(xs)
        if op in ("SUM", "MAX", "BOR"):
            return stack.any(0)
        if op in ("PRODUCT", "MIN", "BAND"):
            return stack.all(0)
        if op == "BXOR":
            return functools.reduce(torch.logical_xor, xs)
        raise ValueError(op)
    if op in ("MIN", "MAX"):
        return torch.stack(xs).amin(0) if op == "MIN" else torch.stack(xs).amax(0)
    if not dtype.is_floating_point:  # in the dtype, wrapping as the hardware does
        fold = {"SUM": torch.add, "AVG": torch.add, "PRODUCT": torch.mul, "BAND": torch.bitwise_and,
                "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}[op]
        total = functools.reduce(fold, xs)
        return torch.div(total, n, rounding_mode="trunc") if op == "AVG" else total
    x = torch.stack(xs).double()
    if op == "PRODUCT":
        value = x.prod(0)
        scale = value.abs()
    else:
        f = {"SUM": 1.0, "AVG": 1.0 / n, "PREMUL_SUM": FACTOR}[op]
        value = (x * f).sum(0)
        scale = (x * f).abs().sum(0)
    info, u32 = torch.finfo(dtype), torch.finfo(torch.float32).eps / 2
    return {"approx": value, "bound": (n + 1) * info.eps / 2 * scale + n * info.tiny,
            # pccl accumulates in float32 and rounds to the dtype once
            "pccl_bound": n * u32 * scale + info.eps / 2 * value.abs() + n * info.tiny}


# ---------------------------------------------------------------------------
# Cases


@dataclass
class Ctx:
    rank: int
    world: int
    group: Any  # None: the default group
    device: torch.device  # this rank's pto device
    phase: str


@dataclass
class Case:
    name: str
    run: Callable  # run(ctx, device) -> result: on CPU tensors (Gloo) and on pto tensors (pccl)
    cpu: Callable | None = None  # the Gloo variant, when it differs from run(ctx, "cpu")
    ref: Callable | None = None  # ref(ctx) -> this rank's expected result, computed locally
    phase: str = "world"
    gloo: bool = True  # False: no Gloo counterpart, compared with ref only
    large: bool = False  # compared inside the rank (exactly); only the verdict comes back
    pto_only: bool = False  # needs pto streams or pccl's coalescing: left out of the CPU suite


def _reduction_cases(prefix, phase, world, collective, ops_dtypes, **kw) -> list:
    return [collective(f"{prefix}{op}/{_dt(dtype)}", op, dtype, phase=phase, world=world, **kw)
            for op, dtype in ops_dtypes]


def all_reduce_case(name, op, dtype, shape=(3, 37), kind=None, phase="world", world=None, large=False):
    import torch.distributed as dist

    shape = _shape(shape)

    kind = kind or _kind(op, dtype)

    def run(c, dev):
        x = gen(name, c.rank, shape, dtype, kind).to(dev)
        dist.all_reduce(x, op=_op(op), group=c.group)
        return x

    def cpu(c, dev):
        (x,), gop, post = _gloo_form(op, [gen(name, c.rank, shape, dtype, kind)], c.world)
        dist.all_reduce(x, op=gop, group=c.group)
        return post(x)

    def ref(c):
        return reduce_ref([gen(name, q, shape, dtype, kind) for q in range(c.world)], op)

    return Case(name, run, cpu, None if large else ref, phase=phase, large=large)


def all_reduce_coalesced_case(name, op, dtype, shapes, phase="world", world=None):
    import torch.distributed as dist

    kind = _kind(op, dtype)

    def inputs(rank):
        return [gen(f"{name}#{i}", rank, s, dtype, kind) for i, s in enumerate(shapes)]

    def run(c, dev):
        ts = [t.to(dev) for t in inputs(c.rank)]
        dist.all_reduce_coalesced(ts, op=_op(op), group=c.group)
        return ts

    def ref(c):
        per_rank = [inputs(q) for q in range(c.world)]
        return [reduce_ref([p[i] for p in per_rank], op) for i in range(len(shapes))]

    return Case(name, run, ref=ref, phase=phase)


def broadcast_case(name, root, dtype, shape=(5, 7), phase="world", world=None, large=False, kind="auto"):
    import torch.distributed as dist

    shape = _shape(shape)

    def run(c, dev):
        x = gen(name, c.rank, shape, dtype, kind).to(dev)
        dist.broadcast(x, src=root, group=c.group)
        return x

    return Case(name, run, ref=None if large else (lambda c: gen(name, root, shape, dtype, kind)),
                phase=phase, large=large)


def reduce_case(name, root, op, dtype, shape=(4, 9), phase="world", world=None, large=False, kind=None):
    import torch.distributed as dist

    shape = _shape(shape)

    kind = kind or _kind(op, dtype)

    def run(c, dev):
        x = gen(name, c.rank, shape, dtype, kind).to(dev)
        dist.reduce(x, dst=root, op=_op(op), group=c.group)
        return x if c.rank == root else None  # elsewhere the contents are unspecified

    def cpu(c, dev):
        (x,), gop, post = _gloo_form(op, [gen(name, c.rank, shape, dtype, kind)], c.world)
        if op == "AVG" and x.is_floating_point():  # Gloo's reduce has no AVG
            gop, post = dist.ReduceOp.SUM, lambda y: y / c.world
        dist.reduce(x, dst=root, op=gop, group=c.group)
        return post(x) if c.rank == root else None

    def ref(c):
        return reduce_ref([gen(name, q, shape, dtype, kind) for q in range(c.world)], op) if c.rank == root else None

    return Case(name, run, cpu, None if large else ref, phase=phase, large=large)


def all_gather_case(name, dtype, shape=(4, 5), phase="world", world=None, large=False, kind="auto"):
    import torch.distributed as dist

    shape = _shape(shape)

    def run(c, dev):
        x = gen(name, c.rank, shape, dtype, kind).to(dev)
        outs = [torch.empty(shape, dtype=dtype, device=dev) for _ in range(c.world)]
        dist.all_gather(outs, x, group=c.group)
        return outs

    def ref(c):
        return [gen(name, q, shape, dtype, kind) for q in range(c.world)]

    return Case(name, run, ref=None if large else ref, phase=phase, large=large)


def all_gather_into_tensor_case(name, dtype, shape=(4, 5), phase="world", world=None, large=False, kind="auto"):
    """The output concatenates the ranks' inputs along dim 0."""
    import torch.distributed as dist

    shape = _shape(shape)

    def run(c, dev):
        x = gen(name, c.rank, shape, dtype, kind).to(dev)
        out = torch.empty((c.world * shape[0],) + tuple(shape[1:]), dtype=dtype, device=dev)
        dist.all_gather_into_tensor(out, x, group=c.group)
        return out

    def ref(c):
        return torch.cat([gen(name, q, shape, dtype, kind) for q in range(c.world)])

    return Case(name, run, ref=None if large else ref, phase=phase, large=large)


def reduce_scatter_case(name, op, dtype, numel=13, phase="world", world=None):
    """The list form: rank r's inputs[q] is its contribution to rank q's output."""
    import torch.distributed as dist

    kind = _kind(op, dtype)

    def inputs(rank, n):
        return [gen(f"{name}#{q}", rank, numel, dtype, kind) for q in range(n)]

    def run(c, dev):
        out = torch.empty(numel, dtype=dtype, device=dev)
        dist.reduce_scatter(out, [t.to(dev) for t in inputs(c.rank, c.world)], op=_op(op), group=c.group)
        return out

    def cpu(c, dev):
        ins, gop, post = _gloo_form(op, inputs(c.rank, c.world), c.world)
        out = torch.empty(numel, dtype=dtype)
        dist.reduce_scatter(out, ins, op=gop, group=c.group)
        return post(out)

    def ref(c):
        return reduce_ref([inputs(q, c.world)[c.rank] for q in range(c.world)], op)

    return Case(name, run, cpu, ref, phase=phase)


def reduce_scatter_tensor_case(name, op, dtype, numel=13, phase="world", world=None, large=False, kind=None):
    """Each rank's input holds n blocks of `numel`; rank q's output reduces block q."""
    import torch.distributed as dist

    kind = kind or _kind(op, dtype)

    def run(c, dev):
        x = gen(name, c.rank, numel * c.world, dtype, kind).to(dev)
        out = torch.empty(numel, dtype=dtype, device=dev)
        dist.reduce_scatter_tensor(out, x, op=_op(op), group=c.group)
        return out

    def cpu(c, dev):
        (x,), gop, post = _gloo_form(op, [gen(name, c.rank, numel * c.world, dtype, kind)], c.world)
        out = torch.empty(numel, dtype=dtype)
        dist.reduce_scatter_tensor(out, x, op=gop, group=c.group)
        return post(out)

    def ref(c):
        xs = [gen(name, q, numel * c.world, dtype, kind).view(c.world, numel)[c.rank] for q in range(c.world)]
        return reduce_ref(xs, op)

    return Case(name, run, cpu, None if large else ref, phase=phase, large=large)


def _uneven(sender: int, receiver: int, rows: int = 1) -> int:
    """Rows `sender` sends `receiver` in the uneven all_to_all cases: rank 0 sends nothing
    at all, and other pairs 0, 1 or 2 blocks of `rows`."""
    return 0 if sender == 0 else ((sender + 2 * receiver) % 3) * rows


def all_to_all_single_case(name, dtype, rows, width=3, uneven=True, phase="world", world=None, large=False,
                           kind="auto", noncontig=False):
    """Uneven: rank r sends _uneven(r, q, rows) rows of `width` to rank q; even: `rows` to each."""
    import torch.distributed as dist

    def splits(c):
        if not uneven:
            return None, None, rows * c.world, rows * c.world
        ins = [_uneven(c.rank, q, rows) for q in range(c.world)]
        outs = [_uneven(q, c.rank, rows) for q in range(c.world)]
        return ins, outs, sum(ins), sum(outs)

    def run(c, dev):
        ins, outs, n_in, n_out = splits(c)
        if noncontig:  # a transposed input and an output that is a column slice of a wider tensor
            x = gen(name, c.rank, (width, n_in), dtype, kind).to(dev).t()
            base = torch.zeros((n_out, 2 * width), dtype=dtype, device=dev)
            out = base[:, ::2]
        else:
            x = gen(name, c.rank, (n_in, width), dtype, kind).to(dev)
            base = out = torch.empty((n_out, width), dtype=dtype, device=dev)
        dist.all_to_all_single(out, x, output_split_sizes=outs, input_split_sizes=ins, group=c.group)
        return base

    def cpu(c, dev):  # Gloo on contiguous copies of the same values
        ins, outs, n_in, n_out = splits(c)
        if noncontig:
            x = gen(name, c.rank, (width, n_in), dtype, kind).t().contiguous()
            base = torch.zeros((n_out, 2 * width), dtype=dtype)
            out = torch.empty((n_out, width), dtype=dtype)
            dist.all_to_all_single(out, x, output_split_sizes=outs, input_split_sizes=ins, group=c.group)
            base[:, ::2] = out
            return base
        return run(c, dev)

    def ref(c):
        parts = []
        for q in range(c.world):
            q_ins = [_uneven(q, p, rows) for p in range(c.world)] if uneven else [rows] * c.world
            xq = (gen(name, q, (width, sum(q_ins)), dtype, kind).t() if noncontig
                  else gen(name, q, (sum(q_ins), width), dtype, kind))
            parts.append(xq[sum(q_ins[:c.rank]):sum(q_ins[:c.rank + 1])])
        out = torch.cat(parts)
        if noncontig:
            base = torch.zeros((out.shape[0], 2 * width), dtype=dtype)
            base[:, ::2] = out
            return base
        return out

    return Case(name, run, cpu, None if large else ref, phase=phase, large=large)


def _rows_list(sender: int, receiver: int, scale: int) -> int:
    """Rows `sender` sends `receiver` in the list all_to_all cases: 0 from rank 0 to itself,
    else 1 to 3 blocks of `scale` (every other pair exchanges something)."""
    return 0 if sender == receiver == 0 else ((sender + 2 * receiver) % 3 + 1) * scale


def all_to_all_case(name, dtype, phase="world", world=None, scale=1):
    """The list form, uneven: rank r sends rank q a tensor of _rows_list(r, q, scale) rows of 2.
    The outputs are read newest first (the order the backend copies them in, reversed)."""
    import torch.distributed as dist

    _uneven = _rows_list

    def run(c, dev):
        ins = [gen(f"{name}#{q}", c.rank, (_uneven(c.rank, q, scale), 2), dtype).to(dev) for q in range(c.world)]
        outs = [torch.empty((_uneven(q, c.rank, scale), 2), dtype=dtype, device=dev) for q in range(c.world)]
        dist.all_to_all(outs, ins, group=c.group)
        return [o.clone() for o in reversed(outs)][::-1]  # clones on the current stream, last output first

    def cpu(c, dev):  # Gloo's list form wants equal sizes: the same exchange as all_to_all_single
        ins = [gen(f"{name}#{q}", c.rank, (_uneven(c.rank, q, scale), 2), dtype) for q in range(c.world)]
        out_rows = [_uneven(q, c.rank, scale) for q in range(c.world)]
        out = torch.empty((sum(out_rows), 2), dtype=dtype)
        dist.all_to_all_single(out, torch.cat(ins), output_split_sizes=out_rows,
                               input_split_sizes=[len(t) for t in ins], group=c.group)
        return list(out.split(out_rows))

    def ref(c):
        return [gen(f"{name}#{c.rank}", q, (_uneven(q, c.rank, scale), 2), dtype) for q in range(c.world)]

    return Case(name, run, cpu, ref, phase=phase)


def gather_case(name, root, dtype, shape=(3, 4), phase="world", world=None, large=False, kind="auto"):
    import torch.distributed as dist

    shape = _shape(shape)

    def run(c, dev):
        x = gen(name, c.rank, shape, dtype, kind).to(dev)
        outs = [torch.empty(shape, dtype=dtype, device=dev) for _ in range(c.world)] if c.rank == root else None
        dist.gather(x, outs, dst=root, group=c.group)
        return outs

    def ref(c):
        return [gen(name, q, shape, dtype, kind) for q in range(c.world)] if c.rank == root else None

    return Case(name, run, ref=None if large else ref, phase=phase, large=large)


def scatter_case(name, root, dtype, shape=(3, 4), phase="world", world=None, large=False, kind="auto"):
    import torch.distributed as dist

    shape = _shape(shape)

    def run(c, dev):
        out = torch.full(shape, 7, dtype=dtype, device=dev)
        ins = [gen(f"{name}#{q}", root, shape, dtype, kind).to(dev) for q in range(c.world)] if c.rank == root else None
        dist.scatter(out, ins, src=root, group=c.group)
        return out

    return Case(name, run, ref=None if large else (lambda c: gen(f"{name}#{c.rank}", root, shape, dtype, kind)),
                phase=phase, large=large)


def send_recv_case(name, dtype, shape=(6, 5), phase="world", world=None, large=False, kind="auto"):
    """Pairs (0, 1), (2, 3): the even rank sends (tag 3), the odd one answers with twice
    what it received (tag 5)."""
    import torch.distributed as dist

    shape = _shape(shape)

    def run(c, dev):
        peer = c.rank ^ 1
        if c.rank % 2 == 0:
            dist.send(gen(name, c.rank, shape, dtype, kind).to(dev), dst=peer, group=c.group, tag=3)
            answer = torch.empty(shape, dtype=dtype, device=dev)
            dist.recv(answer, src=peer, group=c.group, tag=5)
            return answer
        got = torch.empty(shape, dtype=dtype, device=dev)
        dist.recv(got, src=peer, group=c.group, tag=3)
        dist.send(got * 2 if dtype != torch.bool else ~got, dst=peer, group=c.group, tag=5)
        return got

    def ref(c):
        sent = gen(name, c.rank & ~1, shape, dtype, kind)
        return sent if c.rank % 2 else (sent * 2 if dtype != torch.bool else ~sent)

    return Case(name, run, ref=None if large else ref, phase=phase, large=large)


def recv_any_source_case(name, phase="world", world=None):
    """Rank 0 receives one message from each other rank with dist.recv(t) (no source):
    the returned sender must match the data it sent."""
    import torch.distributed as dist

    def run(c, dev):
        # a tag of each side's own: where both run on Gloo (the CPU suite), a sender already on the
        # second side must not feed a receive of the first
        tag = 11 if torch.device(dev).type == "cpu" else 12
        if c.rank == 0:
            got = []
            for _ in range(c.world - 1):
                t = torch.empty(5, device=dev)
                sender = dist.recv(t, group=c.group, tag=tag)
                got.append((sender, t.cpu()))
            return sorted(got, key=lambda p: p[0])
        dist.send(gen(name, c.rank, 5, torch.float32).to(dev), dst=0, group=c.group, tag=tag)
        return None

    def ref(c):
        return [(q, gen(name, q, 5, torch.float32)) for q in range(1, c.world)] if c.rank == 0 else None

    return Case(name, run, ref=ref, phase=phase)


def batch_isend_irecv_case(name, phase="world", world=None, numel=7):
    """A ring both ways in one batch: to rank+1 (tag 1) and rank-1 (tag 2), from rank-1 and rank+1."""
    import torch.distributed as dist

    def run(c, dev):
        nxt, prv = (c.rank + 1) % c.world, (c.rank - 1) % c.world
        fwd = gen(f"{name}/fwd", c.rank, numel, torch.float32).to(dev)
        bwd = gen(f"{name}/bwd", c.rank, numel, torch.int64).to(dev)
        from_prev = torch.empty(numel, device=dev)
        from_next = torch.empty(numel, dtype=torch.int64, device=dev)
        ops = [dist.P2POp(dist.irecv, from_prev, prv, group=c.group, tag=1),
               dist.P2POp(dist.isend, fwd, nxt, group=c.group, tag=1),
               dist.P2POp(dist.isend, bwd, prv, group=c.group, tag=2),
               dist.P2POp(dist.irecv, from_next, nxt, group=c.group, tag=2)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        return [from_prev, from_next]

    def ref(c):
        nxt, prv = (c.rank + 1) % c.world, (c.rank - 1) % c.world
        return [gen(f"{name}/fwd", prv, numel, torch.float32), gen(f"{name}/bwd", nxt, numel, torch.int64)]

    return Case(name, run, ref=ref, phase=phase)


def barrier_case(name, phase="world", world=None):
    """The last rank arrives late; after the barrier every rank must see every rank's
    'arrived' key in the store. On pto tensors: dist.barrier(device_ids=[index]) (pccl);
    on the CPU: dist.barrier() (Gloo)."""
    import torch.distributed as dist

    def run(c, dev):
        store = dist.distributed_c10d._get_default_store()
        tag = f"{name}/{c.phase}/{torch.device(dev).type}"
        if c.rank == c.world - 1:
            time.sleep(0.2)
        store.set(f"{tag}/{c.rank}", "1")
        if torch.device(dev).type == "cpu":
            dist.barrier(group=c.group)
        else:
            dist.barrier(group=c.group, device_ids=[torch.device(dev).index])
        return torch.tensor(store.check([f"{tag}/{q}" for q in range(c.world)]))

    return Case(name, run, ref=lambda c: torch.tensor(True), phase=phase)


def coalescing_cases(world, phase="world", numel=11) -> list:
    """torch.distributed.distributed_c10d._coalescing_manager: the fast path (all_reduce,
    all_gather_into_tensor, reduce_scatter_tensor become one *_coalesced call), async_ops,
    and the old path with a device (pccl's startCoalescing/endCoalescing; Gloo has none,
    so the CPU side takes the fast path)."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _coalescing_manager

    p = f"{phase}/" if phase != "world" else ""
    cases = []

    name = f"{p}coalescing_manager/all_reduce/SUM/float32"
    shapes = [(numel,), (3, numel), (0,), (2,)]

    def ar_run(c, dev, name=name, with_device=False, async_ops=False):
        ts = [gen(f"{name}#{i}", c.rank, s, torch.float32).to(dev) for i, s in enumerate(shapes)]
        use_device = torch.device(dev) if with_device and torch.device(dev).type != "cpu" else None
        with _coalescing_manager(group=c.group, device=use_device, async_ops=async_ops) as cm:
            for t in ts:
                dist.all_reduce(t, group=c.group)
        if async_ops:
            cm.wait()
        return ts

    def ar_ref(c, name):
        per = [[gen(f"{name}#{i}", q, s, torch.float32) for i, s in enumerate(shapes)] for q in range(c.world)]
        return [reduce_ref([pq[i] for pq in per], "SUM") for i in range(len(shapes))]

    cases.append(Case(name, ar_run, ref=functools.partial(ar_ref, name=name), phase=phase))
    for variant, kw in (("device", {"with_device": True}), ("async", {"async_ops": True})):
        vname = f"{p}coalescing_manager/all_reduce/{variant}"
        cases.append(Case(vname, functools.partial(ar_run, name=vname, **kw),
                          ref=functools.partial(ar_ref, name=vname), phase=phase, pto_only=variant == "device"))

    for async_ops in (False, True):
        name = f"{p}coalescing_manager/all_gather_into_tensor" + ("/async" if async_ops else "")
        specs = [((numel,), torch.float32), ((2, 3), torch.int64), ((5,), torch.bfloat16)]

        def ag_run(c, dev, name=name, async_ops=async_ops, specs=specs):
            ins = [gen(f"{name}#{i}", c.rank, s, d).to(dev) for i, (s, d) in enumerate(specs)]
            outs = [torch.empty((c.world * s[0],) + s[1:], dtype=d, device=dev) for s, d in specs]
            with _coalescing_manager(group=c.group, async_ops=async_ops) as cm:
                for o, i in zip(outs, ins):
                    dist.all_gather_into_tensor(o, i, group=c.group)
            if async_ops:
                cm.wait()
            return outs

        def ag_ref(c, name=name, specs=specs):
            return [torch.cat([gen(f"{name}#{i}", q, s, d) for q in range(c.world)]) for i, (s, d) in enumerate(specs)]

        cases.append(Case(name, ag_run, ref=ag_ref, phase=phase))

    for op in ("SUM", "AVG"):
        name = f"{p}coalescing_manager/reduce_scatter_tensor/{op}"
        sizes = (numel, 4)

        def rs_run(c, dev, name=name, op=op):
            ins = [gen(f"{name}#{i}", c.rank, k * c.world, torch.float32).to(dev) for i, k in enumerate(sizes)]
            outs = [torch.empty(k, device=dev) for k in sizes]
            with _coalescing_manager(group=c.group):
                for o, i in zip(outs, ins):
                    dist.reduce_scatter_tensor(o, i, op=_op(op), group=c.group)
            return outs

        def rs_ref(c, name=name, op=op):
            return [reduce_ref([gen(f"{name}#{i}", q, k * c.world, torch.float32).view(c.world, k)[c.rank]
                                for q in range(c.world)], op) for i, k in enumerate(sizes)]

        cases.append(Case(name, rs_run, ref=rs_ref, phase=phase))
    return cases


# --- non-contiguous inputs and outputs: pto runs on strided views; the CPU side runs Gloo on
# contiguous copies of the same values (Gloo wants dense tensors) and writes them back alike.


def noncontig_cases(world, phase="world", rows=6) -> list:
    import torch.distributed as dist

    p = f"{phase}/" if phase != "world" else ""
    cases = []

    def case(name, run, cpu, ref=None):
        cases.append(Case(f"{p}noncontig/{name}", run, cpu, ref, phase=phase))

    # all_reduce on every other column of a wider tensor: the columns between stay.
    def ar(c, dev, contig):
        base = gen(f"{p}nc/ar", c.rank, (rows, 10), torch.float32, "intlike").to(dev)
        view = base[:, ::2]
        t = view.contiguous() if contig else view
        dist.all_reduce(t, group=c.group)
        if contig:
            view.copy_(t)
        return base

    case("all_reduce/SUM/float32", functools.partial(ar, contig=False), functools.partial(ar, contig=True))

    # all_reduce MAX on a transposed (column-major) tensor.
    def ar_t(c, dev, contig):
        t = gen(f"{p}nc/art", c.rank, (7, rows), torch.int32, "int").to(dev).t()
        u = t.contiguous() if contig else t
        dist.all_reduce(u, op=dist.ReduceOp.MAX, group=c.group)
        return u

    case("all_reduce/MAX/int32/transposed", functools.partial(ar_t, contig=False), functools.partial(ar_t, contig=True))

    def bc(c, dev, contig):
        base = gen(f"{p}nc/bc", c.rank, (rows, 8), torch.bfloat16).to(dev)
        view = base[:, 1::2]
        t = view.contiguous() if contig else view
        dist.broadcast(t, src=world - 1, group=c.group)
        if contig:
            view.copy_(t)
        return base

    case("broadcast", functools.partial(bc, contig=False), functools.partial(bc, contig=True))

    def red(c, dev, contig):
        base = gen(f"{p}nc/red", c.rank, (rows, 6), torch.float32, "intlike").to(dev)
        view = base.t()[1:4]
        t = view.contiguous() if contig else view
        dist.reduce(t, dst=0, group=c.group)
        if contig:
            view.copy_(t)
        return base if c.rank == 0 else None

    case("reduce", functools.partial(red, contig=False), functools.partial(red, contig=True))

    def ag(c, dev, contig):
        x = gen(f"{p}nc/ag", c.rank, (5, rows), torch.float32).to(dev).t()
        base = torch.zeros(c.world, 5, rows + 2, device=dev)
        views = [base[q, :, 1:rows + 1].t() for q in range(c.world)]
        if contig:
            outs = [torch.empty(rows, 5, device=dev) for _ in range(c.world)]
            dist.all_gather(outs, x.contiguous(), group=c.group)
            for v, o in zip(views, outs):
                v.copy_(o)
        else:
            dist.all_gather(views, x, group=c.group)
        return base

    case("all_gather", functools.partial(ag, contig=False), functools.partial(ag, contig=True))

    def agt(c, dev, contig):
        x = gen(f"{p}nc/agt", c.rank, (4, rows), torch.int64, "int").to(dev).t()  # (rows, 4), column-major
        base = torch.zeros(4, c.world * rows, dtype=torch.int64, device=dev)
        out = base.t()  # (world * rows, 4), column-major
        if contig:
            o = torch.empty(c.world * rows, 4, dtype=torch.int64, device=dev)
            dist.all_gather_into_tensor(o, x.contiguous(), group=c.group)
            out.copy_(o)
        else:
            dist.all_gather_into_tensor(out, x, group=c.group)
        return base

    case("all_gather_into_tensor", functools.partial(agt, contig=False), functools.partial(agt, contig=True))

    def rst(c, dev, contig):
        x = gen(f"{p}nc/rst", c.rank, (3, c.world * rows), torch.float32, "intlike").to(dev).t()
        base = torch.zeros(3, rows + 1, device=dev)
        out = base[:, 1:].t()  # (rows, 3)
        if contig:
            o = torch.empty(rows, 3, device=dev)
            dist.reduce_scatter_tensor(o, x.contiguous(), group=c.group)
            out.copy_(o)
        else:
            dist.reduce_scatter_tensor(out, x, group=c.group)
        return base

    case("reduce_scatter_tensor", functools.partial(rst, contig=False), functools.partial(rst, contig=True))

    def rs(c, dev, contig):
        ins = [gen(f"{p}nc/rs#{q}", c.rank, (4, 3), torch.float32, "intlike").to(dev).t() for q in range(c.world)]
        base = torch.zeros(4, 6, device=dev)
        out = base[:, ::2].t()  # (3, 4)
        if contig:
            o = torch.empty(3, 4, device=dev)
            dist.reduce_scatter(o, [i.contiguous() for i in ins], group=c.group)
            out.copy_(o)
        else:
            dist.reduce_scatter(out, ins, group=c.group)
        return base

    case("reduce_scatter", functools.partial(rs, contig=False), functools.partial(rs, contig=True))

    def sc(c, dev, contig):
        base = torch.zeros(rows, 4, device=dev)
        out = base[:, 1:3]
        ins = ([gen(f"{p}nc/sc#{q}", 0, (2, rows), torch.float32).to(dev).t() for q in range(c.world)]
               if c.rank == 0 else None)
        if contig:
            o = torch.empty(rows, 2, device=dev)
            dist.scatter(o, [i.contiguous() for i in ins] if ins else None, src=0, group=c.group)
            out.copy_(o)
        else:
            dist.scatter(out, ins, src=0, group=c.group)
        return base

    case("scatter", functools.partial(sc, contig=False), functools.partial(sc, contig=True))

    def ga(c, dev, contig):
        x = gen(f"{p}nc/ga", c.rank, (3, rows), torch.float32).to(dev).t()
        base = torch.zeros(c.world, 3, rows, device=dev) if c.rank == world - 1 else None
        outs = [base[q].t() for q in range(c.world)] if base is not None else None
        if contig:
            tmp = [torch.empty(rows, 3, device=dev) for _ in range(c.world)] if outs else None
            dist.gather(x.contiguous(), tmp, dst=world - 1, group=c.group)
            for v, o in zip(outs or [], tmp or []):
                v.copy_(o)
        else:
            dist.gather(x, outs, dst=world - 1, group=c.group)
        return base

    case("gather", functools.partial(ga, contig=False), functools.partial(ga, contig=True))

    def sr(c, dev, contig):
        peer = c.rank ^ 1
        base = torch.zeros(5, 8, device=dev)
        if c.rank % 2 == 0:
            x = gen(f"{p}nc/sr", c.rank, (4, 5), torch.float32).to(dev).t()
            dist.send(x.contiguous() if contig else x, dst=peer, group=c.group)
        else:
            view = base[:, 2:6]
            if contig:
                t = torch.empty(5, 4, device=dev)
                dist.recv(t, src=peer, group=c.group)
                view.copy_(t)
            else:
                dist.recv(view, src=peer, group=c.group)
        return base

    case("send_recv", functools.partial(sr, contig=False), functools.partial(sr, contig=True))
    return cases


def empty_cases(world, phase="world") -> list:
    """Zero-element tensors through every collective: nothing moves, nothing hangs, and the
    group stays usable (later cases run on the same group)."""
    import torch.distributed as dist

    def mk(name, fn):
        return Case(f"empty/{name}", fn, phase=phase)

    def e(dev, *shape, dtype=torch.float32):
        return torch.empty(shape, dtype=dtype, device=dev)

    def ar(c, dev):
        t = e(dev, 0, 3)
        dist.all_reduce(t, group=c.group)
        return t

    def bc(c, dev):
        t = e(dev, 0, dtype=torch.int64)
        dist.broadcast(t, src=0, group=c.group)
        return t

    def red(c, dev):
        t = e(dev, 0)
        dist.reduce(t, dst=0, group=c.group)
        return t

    def ag(c, dev):
        outs = [e(dev, 0) for _ in range(c.world)]
        dist.all_gather(outs, e(dev, 0), group=c.group)
        return outs

    def agt(c, dev):
        out = e(dev, 0, 4)
        dist.all_gather_into_tensor(out, e(dev, 0, 4), group=c.group)
        return out

    def rs(c, dev):
        out = e(dev, 0)
        dist.reduce_scatter(out, [e(dev, 0) for _ in range(c.world)], group=c.group)
        return out

    def rst(c, dev):
        out = e(dev, 0)
        dist.reduce_scatter_tensor(out, e(dev, 0), group=c.group)
        return out

    def a2as(c, dev):
        out = e(dev, 0, 2)
        dist.all_to_all_single(out, e(dev, 0, 2), group=c.group)
        return out

    def a2a(c, dev):
        outs = [e(dev, 0) for _ in range(c.world)]
        dist.all_to_all(outs, [e(dev, 0) for _ in range(c.world)], group=c.group)
        return outs

    def ga(c, dev):
        outs = [e(dev, 0) for _ in range(c.world)] if c.rank == 0 else None
        dist.gather(e(dev, 0), outs, dst=0, group=c.group)
        return outs

    def sc(c, dev):
        out = e(dev, 0)
        dist.scatter(out, [e(dev, 0) for _ in range(c.world)] if c.rank == 0 else None, src=0, group=c.group)
        return out

    def sr(c, dev):
        t = e(dev, 0)
        (dist.send if c.rank % 2 == 0 else dist.recv)(t, c.rank ^ 1, group=c.group)
        return t

    def then_normal(c, dev):  # an empty all_reduce between two real ones
        x = torch.full((3,), float(c.rank + 1), device=dev)
        dist.all_reduce(x, group=c.group)
        dist.all_reduce(e(dev, 0), group=c.group)
        dist.all_reduce(x, group=c.group)
        return x

    return [mk("all_reduce", ar), mk("broadcast", bc), mk("reduce", red), mk("all_gather", ag),
            mk("all_gather_into_tensor", agt), mk("reduce_scatter", rs), mk("reduce_scatter_tensor", rst),
            mk("gather", ga), mk("scatter", sc), mk("send_recv", sr),
            Case("empty/all_reduce_between_others", then_normal, phase=phase,
                 ref=lambda c: torch.full((3,), float(c.world * c.world * (c.world + 1) / 2))),
            # all_to_all last (see the module docstring)
            mk("all_to_all_single", a2as), mk("all_to_all", a2a)]


def async_cases(world, phase="world") -> list:
    """async_op=True: several collectives in flight, waited for in another order, then
    arithmetic on the current stream reading their outputs; a collective after a wait
    reading what the current stream just wrote; a side stream; Work.get_future()."""
    import torch.distributed as dist

    def in_flight(c, dev):
        x = gen("async/x", c.rank, 9, torch.float32, "intlike").to(dev)
        y = gen("async/y", c.rank, (2, 3), torch.int64, "int").to(dev)
        z = gen("async/z", c.rank, 4, torch.bfloat16).to(dev)
        gathered = torch.empty((c.world * 2, 3), dtype=torch.int64, device=dev)
        works = [dist.all_reduce(x, group=c.group, async_op=True),
                 dist.all_gather_into_tensor(gathered, y, group=c.group, async_op=True),
                 dist.broadcast(z, src=world - 1, group=c.group, async_op=True)]
        for work in reversed(works):
            work.wait()
        return [x * 2 + 1, gathered - 3, z * 2]

    def in_flight_ref(c):
        xs = sum(gen("async/x", q, 9, torch.float32, "intlike") for q in range(c.world))
        ys = torch.cat([gen("async/y", q, (2, 3), torch.int64, "int") for q in range(c.world)])
        return [xs * 2 + 1, ys - 3, gen("async/z", world - 1, 4, torch.bfloat16) * 2]

    def many(c, dev):
        ts = [gen(f"async/many#{i}", c.rank, 5 + i, torch.float32, "intlike").to(dev) for i in range(8)]
        works = [dist.all_reduce(t, op=dist.ReduceOp.MAX if i % 2 else dist.ReduceOp.SUM, group=c.group,
                                 async_op=True) for i, t in enumerate(ts)]
        for i in (3, 0, 7, 1, 6, 2, 5, 4):
            works[i].wait()
        return [t + 0 for t in ts]

    def many_ref(c):
        return [reduce_ref([gen(f"async/many#{i}", q, 5 + i, torch.float32, "intlike") for q in range(c.world)],
                           "MAX" if i % 2 else "SUM") for i in range(8)]

    def chain(c, dev):  # the current stream's writes feed the next collective, async both times
        x = gen("async/chain", c.rank, 6, torch.float32, "intlike").to(dev)
        dist.all_reduce(x, group=c.group, async_op=True).wait()
        x.mul_(3).add_(c.rank)
        dist.all_reduce(x, op=dist.ReduceOp.MAX, group=c.group, async_op=True).wait()
        return x - 1

    def chain_ref(c):
        s = sum(gen("async/chain", q, 6, torch.float32, "intlike") for q in range(c.world))
        return torch.stack([s * 3 + q for q in range(c.world)]).amax(0) - 1

    def future(c, dev):
        x = gen("async/future", c.rank, 4, torch.float32, "intlike").to(dev)
        result = dist.all_reduce(x, group=c.group, async_op=True).get_future().wait()
        return [result[0] * 1, x * 1]

    def future_ref(c):
        s = sum(gen("async/future", q, 4, torch.float32, "intlike") for q in range(c.world))
        return [s, s]

    def side_stream(c, dev):
        if torch.device(dev).type == "cpu":
            x = gen("async/side", c.rank, 10, torch.float32, "intlike") * 3
            dist.all_reduce(x, group=c.group)
            return x + 1
        s = torch.pto.Stream()
        with torch.pto.stream(s):
            x = gen("async/side", c.rank, 10, torch.float32, "intlike").to(dev) * 3
            work = dist.all_reduce(x, group=c.group, async_op=True)
            work.wait()  # the side stream (current) waits
            y = x + 1
        torch.pto.current_stream().wait_stream(s)
        return y

    def side_ref(c):
        return sum(gen("async/side", q, 10, torch.float32, "intlike") for q in range(c.world)) * 3 + 1

    return [Case("async/in_flight", in_flight, ref=in_flight_ref, phase=phase),
            Case("async/many_in_flight", many, ref=many_ref, phase=phase),
            Case("async/chain", chain, ref=chain_ref, phase=phase),
            Case("async/get_future", future, ref=future_ref, phase=phase),
            Case("async/side_stream", side_stream, ref=side_ref, phase=phase)]


def large_cases(world, phase="world") -> list:
    """Several exchanges of the default 4 MiB buffer; integer-valued float32 so every
    order of summation is exact: compared exactly inside the rank."""
    L, P = LARGE, LARGE_PART
    kw = dict(phase=phase, world=world, large=True, kind="intlike")
    return [
        all_reduce_case("large/all_reduce/SUM/float32", "SUM", torch.float32, shape=L, **kw),
        broadcast_case("large/broadcast", world - 1, torch.float32, shape=L, **kw),
        reduce_case("large/reduce/SUM", 0, "SUM", torch.float32, shape=L, **kw),
        all_gather_case("large/all_gather", torch.float32, shape=P, **kw),
        all_gather_into_tensor_case("large/all_gather_into_tensor", torch.float32, shape=(P,), **kw),
        reduce_scatter_tensor_case("large/reduce_scatter_tensor/SUM", "SUM", torch.float32, numel=L // world, **kw),
        gather_case("large/gather", world - 1, torch.float32, shape=P, **kw),
        scatter_case("large/scatter", 0, torch.float32, shape=P, **kw),
        send_recv_case("large/send_recv", torch.float32, shape=L, **kw),
        # all_to_all last: cases() moves it
        all_to_all_single_case("large/all_to_all_single/uneven", torch.float32, rows=100_000, width=4, **kw),
    ]


def rounds_cases(world, phase="rounds") -> list:
    """Every collective with PTO_PCCL_BUFFER_BYTES=65536: tensors of 80-240 KB per rank,
    so each runs several exchanges (reduce_scatter and scatter: many more, as a round
    carries one block per rank)."""
    p, kw = f"{phase}/", dict(phase=phase, world=world)
    N = 50_001
    cases = [
        all_reduce_case(f"{p}all_reduce/SUM/float32", "SUM", torch.float32, shape=N, **kw),
        all_reduce_case(f"{p}all_reduce/MAX/bfloat16", "MAX", torch.bfloat16, shape=70_001, **kw),
        all_reduce_case(f"{p}all_reduce/AVG/float16", "AVG", torch.float16, shape=70_001, **kw),
        all_reduce_case(f"{p}all_reduce/BXOR/uint8", "BXOR", torch.uint8, shape=200_003, **kw),
        all_reduce_coalesced_case(f"{p}all_reduce_coalesced/SUM/float32", "SUM", torch.float32,
                                  [(30_001,), (20_000,), (3,)], **kw),
        broadcast_case(f"{p}broadcast", world - 1, torch.float32, shape=N, **kw),
        reduce_case(f"{p}reduce/SUM/float32", 0, "SUM", torch.float32, shape=N, **kw),
        all_gather_case(f"{p}all_gather", torch.float32, shape=20_001, **kw),
        all_gather_into_tensor_case(f"{p}all_gather_into_tensor/bfloat16", torch.bfloat16, shape=(40_001,), **kw),
        reduce_scatter_case(f"{p}reduce_scatter/SUM/float32", "SUM", torch.float32, numel=20_001, **kw),
        reduce_scatter_tensor_case(f"{p}reduce_scatter_tensor/SUM/float32", "SUM", torch.float32, numel=20_001, **kw),
        reduce_scatter_tensor_case(f"{p}reduce_scatter_tensor/PREMUL_SUM/bfloat16", "PREMUL_SUM", torch.bfloat16,
                                   numel=30_001, **kw),
        gather_case(f"{p}gather", 0, torch.float32, shape=20_001, **kw),
        scatter_case(f"{p}scatter", world - 1, torch.float32, shape=20_001, **kw),
        send_recv_case(f"{p}send_recv", torch.float32, shape=N, **kw),
        batch_isend_irecv_case(f"{p}batch_isend_irecv", numel=N, **kw),
    ]
    cases += coalescing_cases(world, phase=phase, numel=20_001)
    cases += [c for c in noncontig_cases(world, phase=phase, rows=4000)]
    # all_to_all last
    cases += [all_to_all_single_case(f"{p}all_to_all_single/uneven", torch.float32, rows=7, width=1000, **kw),
              all_to_all_case(f"{p}all_to_all", torch.float32, scale=9000, **kw)]
    return cases


def gloo_transport_cases(world, phase="gloo") -> list:
    p, kw = f"{phase}/", dict(phase=phase, world=world)
    return [
        all_reduce_case(f"{p}all_reduce/SUM/float32", "SUM", torch.float32, **kw),
        all_reduce_case(f"{p}all_reduce/MAX/int64", "MAX", torch.int64, **kw),
        all_reduce_case(f"{p}all_reduce/SUM/bfloat16/rounds", "SUM", torch.bfloat16, shape=70_001, **kw),
        # past the one exchange of everything (kOneShotBytes gathered): reduce-scatter and
        # allgather by messages, in chunks (the last one short, some of its parts empty)
        all_reduce_case(f"{p}all_reduce/SUM/float32/messages", "SUM", torch.float32, shape=70_001, **kw),
        all_reduce_case(f"{p}all_reduce/MAX/int64/messages", "MAX", torch.int64, shape=40_001, **kw),
        all_reduce_case(f"{p}all_reduce/AVG/float16/messages", "AVG", torch.float16, shape=(3, 50_001), **kw),
        all_reduce_case(f"{p}all_reduce/PREMUL_SUM/bfloat16/messages", "PREMUL_SUM", torch.bfloat16,
                        shape=140_003, **kw),
        all_reduce_case(f"{p}all_reduce/MIN/float32/messages", "MIN", torch.float32, shape=98_307, **kw),
        all_reduce_case(f"{p}all_reduce/BXOR/int32/messages", "BXOR", torch.int32, shape=65_537, **kw),
        all_reduce_case(f"{p}all_reduce/MAX/bool/messages", "MAX", torch.bool, shape=300_001, **kw),
        all_gather_into_tensor_case(f"{p}all_gather_into_tensor", torch.float32, **kw),
        all_gather_into_tensor_case(f"{p}all_gather_into_tensor/rounds", torch.float32, shape=(30_001,), **kw),
        reduce_scatter_tensor_case(f"{p}reduce_scatter_tensor/SUM/float32", "SUM", torch.float32, **kw),
        reduce_scatter_tensor_case(f"{p}reduce_scatter_tensor/AVG/float32/rounds", "AVG", torch.float32,
                                   numel=20_001, **kw),
        broadcast_case(f"{p}broadcast", 1, torch.int64, **kw),
        broadcast_case(f"{p}broadcast/rounds", 0, torch.float32, shape=50_001, **kw),
        all_to_all_single_case(f"{p}all_to_all_single/uneven", torch.float32, rows=2, **kw),
        all_to_all_single_case(f"{p}all_to_all_single/uneven/rounds", torch.float32, rows=7, width=1000, **kw),
        # the ordering of the "isolated" phase, on this transport
        *sequence_cases(world, phase=phase),
    ]


def sequence_cases(world, phase=None, lasts=("broadcast", "all_gather_into_tensor"), a2a_numel=None) -> list:
    """all_to_all_single, then another collective, then one that reads its peers' data
    (broadcast, all_gather_into_tensor): on the shared-memory transport the third once
    read at the all_to_all's block offsets (the backend does not count the
    all_to_all's exchanges: a regression test)."""
    import torch.distributed as dist

    p = f"{phase}/" if phase else ""
    out = []
    for last in lasts:
        name = f"{p}sequence/all_to_all_single+all_reduce+{last}"
        k = a2a_numel or 2  # elements to each peer

        def run(c, dev, name=name, last=last, k=k):
            a2a = torch.empty(k * c.world, device=dev)
            dist.all_to_all_single(a2a, gen(name, c.rank, k * c.world, torch.float32).to(dev), group=c.group)
            s = torch.full((1,), float(c.rank), device=dev)
            dist.all_reduce(s, group=c.group)
            x = gen(f"{name}/x", c.rank, 4, torch.float32).to(dev)
            if last == "broadcast":
                dist.broadcast(x, src=0, group=c.group)
                tail = x
            else:
                tail = torch.empty(4 * c.world, device=dev)
                dist.all_gather_into_tensor(tail, x, group=c.group)
            return [a2a, s, tail]

        def ref(c, name=name, last=last, k=k):
            a2a = torch.cat([gen(name, q, k * c.world, torch.float32)[k * c.rank:k * (c.rank + 1)]
                             for q in range(c.world)])
            s = torch.full((1,), float(sum(range(c.world))))
            xs = [gen(f"{name}/x", q, 4, torch.float32) for q in range(c.world)]
            return [a2a, s, xs[0] if last == "broadcast" else torch.cat(xs)]

        # each on a group of its own unless on the gloo transport: a failure leaves the group unusable
        out.append(Case(name, run, ref=ref, phase=phase or f"sequence+{last}"))
    return out


@functools.cache
def cases(world: int) -> tuple:
    W = dict(world=world)
    cs = []
    # all_reduce: every op on every dtype where it is defined
    combos = [(op, d) for d in FLOATS for op in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "PREMUL_SUM")]
    combos += [(op, d) for d in INTS for op in ("SUM", "AVG", "PRODUCT", "MIN", "MAX") + BITWISE]
    combos += [(op, torch.bool) for op in ("SUM", "PRODUCT", "MIN", "MAX") + BITWISE]
    cs += _reduction_cases("all_reduce/", "world", world, all_reduce_case, combos)
    # one exchange, but past the one-shot size: the reduce-scatter + allgather path
    cs += [all_reduce_case("all_reduce/SUM/float32/medium", "SUM", torch.float32, shape=100_003, **W),
           all_reduce_case("all_reduce/SUM/bfloat16/medium", "SUM", torch.bfloat16, shape=300_007, **W),
           all_reduce_case("all_reduce/AVG/float16/medium", "AVG", torch.float16, shape=300_007, **W),
           all_reduce_case("all_reduce/PRODUCT/float32/medium", "PRODUCT", torch.float32, shape=100_003, **W),
           all_reduce_case("all_reduce/MAX/int64/medium", "MAX", torch.int64, shape=100_003, **W),
           all_reduce_case("all_reduce/BXOR/uint8/medium", "BXOR", torch.uint8, shape=600_001, **W)]
    # float32 accumulation, rounded once: sums of halves of an ulp (see gen(kind="ties"))
    cs += [all_reduce_case(f"all_reduce/{op}/{_dt(d)}/ties", op, d, shape=5, kind="ties", **W)
           for op, d in (("SUM", torch.bfloat16), ("AVG", torch.bfloat16), ("SUM", torch.float16))]
    cs += [reduce_scatter_tensor_case("reduce_scatter_tensor/SUM/bfloat16/ties", "SUM", torch.bfloat16, numel=3,
                                      kind="ties", **W)]
    cs += [all_reduce_coalesced_case("all_reduce_coalesced/SUM/float32", "SUM", torch.float32,
                                     [(5,), (3, 4), (0,), (7, 2)], **W),
           all_reduce_coalesced_case("all_reduce_coalesced/MAX/int64", "MAX", torch.int64, [(6,), (2, 2)], **W),
           all_reduce_coalesced_case("all_reduce_coalesced/AVG/bfloat16", "AVG", torch.bfloat16, [(9,), (4,)], **W)]
    cs += coalescing_cases(world)
    cs += [broadcast_case(f"broadcast/root{r}/{_dt(d)}", r, d, **W)
           for r in range(world) for d in (torch.float32, torch.bfloat16, torch.int64, torch.bool)]
    cs += [reduce_case(f"reduce/root{r}/{op}/{_dt(d)}", r, op, d, **W)
           for r in range(world) for op in ("SUM", "MAX") for d in (torch.float32, torch.int32)]
    cs += [reduce_case("reduce/root0/PRODUCT/float32", 0, "PRODUCT", torch.float32, **W),
           reduce_case(f"reduce/root{world - 1}/AVG/float32", world - 1, "AVG", torch.float32, **W),
           reduce_case("reduce/root1/PREMUL_SUM/bfloat16", 1, "PREMUL_SUM", torch.bfloat16, **W),
           reduce_case("reduce/root0/BOR/uint8", 0, "BOR", torch.uint8, **W)]
    cs += [all_gather_case(f"all_gather/{_dt(d)}", d, **W)
           for d in (torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.uint8, torch.bool)]
    cs += [all_gather_into_tensor_case(f"all_gather_into_tensor/{_dt(d)}", d, **W)
           for d in (torch.float32, torch.bfloat16, torch.int32, torch.bool)]
    cs += [all_gather_into_tensor_case("all_gather_into_tensor/float32/1d", torch.float32, shape=(11,), **W)]
    cs += [reduce_scatter_case(f"reduce_scatter/{op}/{_dt(d)}", op, d, **W)
           for op, d in (("SUM", torch.float32), ("MAX", torch.float32), ("SUM", torch.int64), ("MIN", torch.int64),
                         ("SUM", torch.bfloat16), ("AVG", torch.float32), ("PREMUL_SUM", torch.float16))]
    cs += [reduce_scatter_tensor_case(f"reduce_scatter_tensor/{op}/{_dt(d)}", op, d, **W)
           for op, d in [(op, torch.float32) for op in ("SUM", "AVG", "PREMUL_SUM", "MAX", "MIN", "PRODUCT")]
           + [(op, torch.bfloat16) for op in ("SUM", "AVG", "PREMUL_SUM")]
           + [("SUM", torch.float16), ("SUM", torch.int32), ("MAX", torch.int32), ("AVG", torch.int32),
              ("BAND", torch.int32), ("SUM", torch.uint8), ("MAX", torch.bool)]]
    cs += [gather_case(f"gather/root{r}/float32", r, torch.float32, **W) for r in range(world)]
    cs += [gather_case("gather/root0/int64", 0, torch.int64, **W)]
    cs += [scatter_case(f"scatter/root{r}/float32", r, torch.float32, **W) for r in range(world)]
    cs += [scatter_case("scatter/root1/bfloat16", 1, torch.bfloat16, **W)]
    cs += [barrier_case("barrier", **W)]
    cs += [send_recv_case(f"send_recv/{_dt(d)}", d, **W) for d in (torch.float32, torch.bfloat16, torch.int64,
                                                                  torch.bool)]
    cs += [recv_any_source_case("recv_any_source", **W), batch_isend_irecv_case("batch_isend_irecv", **W)]
    cs += noncontig_cases(world)
    cs += async_cases(world)
    cs += [c for c in large_cases(world) if "all_to_all" not in c.name]
    cs += [c for c in empty_cases(world) if "all_to_all" not in c.name]
    # all_to_all last (see the module docstring)
    cs += [c for c in large_cases(world) if "all_to_all" in c.name]
    cs += [all_to_all_single_case(f"all_to_all_single/even/{_dt(d)}", d, rows=2, uneven=False, **W)
           for d in (torch.float32, torch.bfloat16, torch.int64)]
    cs += [all_to_all_single_case("all_to_all_single/uneven/float32", torch.float32, rows=2, **W),
           all_to_all_single_case("all_to_all_single/uneven/int32/1d", torch.int32, rows=3, width=1, kind="int", **W),
           all_to_all_single_case("all_to_all_single/uneven/noncontig", torch.float32, rows=2, noncontig=True, **W),
           all_to_all_single_case("all_to_all_single/uneven/float32/medium", torch.float32, rows=20_000, width=4, **W),
           all_to_all_case("all_to_all/float32", torch.float32, scale=2000, **W),
           all_to_all_case("all_to_all/int64", torch.int64, scale=2000, **W)]
    cs += [c for c in empty_cases(world) if "all_to_all" in c.name]
    cs += rounds_cases(world)
    cs += gloo_transport_cases(world)
    cs += sequence_cases(world)
    # an all_to_all_single of several rounds (exchanges: 1 + rounds, padded to even) first
    cs += sequence_cases(world, phase="sequence+rounds", lasts=("broadcast",), a2a_numel=12_000)
    names = [c.name for c in cs]
    assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]
    return tuple(c for c in cs if ON_PTO or not c.pto_only)


PHASES = {  # phase -> environment of the group it runs on (None: the default group)
    "world": None,
    "rounds": {"PTO_PCCL_BUFFER_BYTES": str(SMALL_BUFFER)},
    "gloo": {"PTO_PCCL_TRANSPORT": "gloo", "PTO_PCCL_BUFFER_BYTES": str(SMALL_BUFFER)},
    "sequence+broadcast": {},  # sequence_cases(), each on a fresh group
    "sequence+all_gather_into_tensor": {},
    "sequence+rounds": {"PTO_PCCL_BUFFER_BYTES": str(SMALL_BUFFER)},
}


# ---------------------------------------------------------------------------
# What each rank runs


def _large_verdict(cpu, pto) -> list:
    """Differences between two results of big tensors, as text (empty: identical)."""
    problems = []

    def walk(a, b, path):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            if a.dtype != b.dtype or a.shape != b.shape:
                problems.append(f"{path}: cpu {a.dtype}{list(a.shape)} vs pto {b.dtype}{list(b.shape)}")
                return
            bad = (a != b).nonzero()
            if len(bad):
                i = tuple(bad[0].tolist())
                problems.append(f"{path}: {len(bad)} of {a.numel()} elements differ, first at {i}: "
                                f"cpu {a[i].item()} pto {b[i].item()}")
        elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
            for k, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{path}[{k}]")
        elif isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor) or a != b:
            problems.append(f"{path}: cpu {type(a).__name__} vs pto {type(b).__name__}")

    walk(cpu, pto, "result")
    return problems


def _run_case(case: Case, ctx: Ctx) -> dict:
    started = time.monotonic()
    entry: dict = {}
    if case.gloo:
        try:
            entry["cpu"] = harness.to_cpu((case.cpu or case.run)(ctx, CPU))
        except Exception:
            entry["cpu_error"] = traceback.format_exc()
    try:
        # On the CPU suite (PTO_DIST_TEST_DEVICE=cpu) both sides are Gloo: its form of the case.
        entry["pto"] = harness.to_cpu((case.run if ON_PTO else case.cpu or case.run)(ctx, ctx.device))
        if ON_PTO:
            torch.pto.synchronize()  # errors of work queued aside (the result copies already waited)
    except Exception:
        entry["pto_error"] = traceback.format_exc()
    if case.ref is not None:
        try:
            entry["ref"] = case.ref(ctx)
        except Exception:
            entry["ref_error"] = traceback.format_exc()
    if case.large and "cpu" in entry and "pto" in entry:
        entry["large"] = _large_verdict(entry.pop("cpu"), entry.pop("pto"))
    entry["seconds"] = time.monotonic() - started
    return entry


def _shm_segments() -> dict:
    """This process's shared-memory mappings (the shm transport's segments): name -> bytes."""
    sizes: dict = {}
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].startswith("/dev/shm/"):
                start, end = (int(x, 16) for x in fields[0].split("-"))
                sizes[fields[5].strip()] = sizes.get(fields[5].strip(), 0) + end - start
    return sizes


def sweep(world: int) -> dict:
    import torch.distributed as dist

    device = harness.local_device()
    dist.init_process_group(BACKENDS, timeout=datetime.timedelta(seconds=PG_TIMEOUT_S))
    rank = dist.get_rank()
    results: dict = {"__meta__": {"transport": {}, "seconds": {}, "shm_bytes": {}}}
    all_cases = cases(world)
    for phase, env in PHASES.items():
        phase_cases = [c for c in all_cases if c.phase == phase]
        if not phase_cases:
            continue
        started = time.monotonic()
        segments = _shm_segments()
        group = None
        if env is not None:
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                group = dist.new_group(list(range(world)), backend=BACKENDS)
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        if ON_PTO:
            backend = (group or dist.group.WORLD)._get_backend(device)
            results["__meta__"]["transport"][phase] = getattr(backend, "transport", type(backend).__name__)
        ctx = Ctx(rank, world, group, device, phase)
        for case in phase_cases:
            results[case.name] = _run_case(case, ctx)
        results["__meta__"]["seconds"][phase] = time.monotonic() - started
        results["__meta__"]["shm_bytes"][phase] = sorted(v for k, v in _shm_segments().items() if k not in segments)
    return results


# ---------------------------------------------------------------------------
# The test process

@functools.cache
def _launch(world: int):
    started = time.monotonic()
    try:
        ranks = harness.run(sweep, world, args=(world,), timeout=LAUNCH_TIMEOUT_S)
    except harness.RanksFailed as error:
        return error
    print(f"\n[test_dist_collectives] {world} ranks: {time.monotonic() - started:.1f} s "
          f"(phases on rank 0: {ranks[0]['__meta__']['seconds']})")
    return ranks


def _ranks(world: int) -> list:
    ranks = _launch(world)
    if isinstance(ranks, Exception):
        pytest.fail(f"the launch of {world} ranks failed:\n{ranks}", pytrace=False)
    return ranks


def _is_approx(value) -> bool:
    return isinstance(value, dict) and "approx" in value


def _check_within(actual: torch.Tensor, expected: torch.Tensor, bound: torch.Tensor, what: str) -> None:
    diff = (actual.double() - expected.double()).abs()
    bad = ~(diff <= bound)  # NaN fails too
    if bad.any():
        i = tuple(bad.nonzero()[0].tolist())
        raise AssertionError(f"{what}: {int(bad.sum())} of {actual.numel()} elements beyond the rounding bound; "
                             f"first at {i}: {actual[i].item()!r} vs {expected[i].item()!r} "
                             f"(|diff| {diff[i].item():.3g} > bound {bound[i].item():.3g})")


def _compare(pto, cpu, ref, path: str) -> None:
    """pto against cpu (Gloo) and ref, leaf by leaf. A missing side is `...`."""
    if isinstance(pto, (list, tuple)):
        for other, label in ((cpu, "cpu"), (ref, "ref")):
            if other is not ... and not (isinstance(other, (list, tuple)) and len(other) == len(pto)):
                raise AssertionError(f"{path}: pto gave {len(pto)} items, {label} {other!r:.200}")
        for i, item in enumerate(pto):
            _compare(item, cpu[i] if cpu is not ... else ..., ref[i] if ref is not ... else ..., f"{path}[{i}]")
        return
    if isinstance(pto, torch.Tensor):
        if _is_approx(ref):
            assert pto.shape == ref["approx"].shape, f"{path}: shape {list(pto.shape)} vs {list(ref['approx'].shape)}"
            _check_within(pto, ref["approx"], ref["pccl_bound"] if ON_PTO else ref["bound"],
                          f"{path}: pto against the float64 reference")
            if cpu is not ...:
                assert isinstance(cpu, torch.Tensor) and cpu.dtype == pto.dtype and cpu.shape == pto.shape, (
                    f"{path}: pto {pto.dtype}{list(pto.shape)} vs cpu {cpu!r:.200}")
                _check_within(pto, cpu, 2 * ref["bound"], f"{path}: pto against Gloo")
            return
        for other, label in ((cpu, "Gloo on CPU tensors"), (ref, "the reference")):
            if other is ...:
                continue
            assert isinstance(other, torch.Tensor), f"{path}: pto gave a tensor, {label} {other!r:.200}"
            assert_close(pto, other, rtol=0, atol=0, equal_nan=True,
                         msg=lambda m, label=label: f"{path}: pto against {label}: {m}")
        return
    for other, label in ((cpu, "cpu"), (ref, "ref")):
        if other is not ...:
            assert pto == other, f"{path}: pto {pto!r:.200} vs {label} {other!r:.200}"


def _params():
    params = []
    for world in WORLDS:
        for case in cases(world):
            params.append(pytest.param(world, case.name, id=f"{world}ranks-{case.name}"))
    return params


@pytest.mark.parametrize("world,name", _params())
def test_collective(world, name):
    ranks = _ranks(world)
    problems = []
    for rank, results in enumerate(ranks):
        entry = results[name]
        for key in ("pto_error", "cpu_error", "ref_error"):
            if key in entry:
                problems.append(f"rank {rank}: {key.replace('_', ' ')}:\n{entry[key]}")
        if problems:
            continue
        if "large" in entry:
            problems += [f"rank {rank}: {p}" for p in entry["large"]]
            continue
        try:
            _compare(entry["pto"], entry.get("cpu", ...), entry.get("ref", ...), f"rank {rank}")
        except AssertionError as error:
            problems.append(str(error))
    if problems:
        pytest.fail(f"{name} on {world} ranks:\n" + "\n".join(problems), pytrace=False)


@pytest.mark.skipif(not ON_PTO, reason="pccl's transports")
@pytest.mark.parametrize("world", WORLDS)
def test_transports(world):
    """Each phase's group runs on the transport it was made for."""
    expected = {phase: "gloo" if phase == "gloo" else "shm" for phase in PHASES}
    for rank, results in enumerate(_ranks(world)):
        meta = results["__meta__"]
        assert meta["transport"] == expected, f"rank {rank}"
        # The shm segment a phase's group maps: two sets of one buffer per rank, so
        # PTO_PCCL_BUFFER_BYTES (read when the group is made) shows in its size.
        for phase, env in PHASES.items():
            if expected.get(phase) != "shm":
                continue
            buffer = int((env or {}).get("PTO_PCCL_BUFFER_BYTES", 4 << 20))
            new_segments = meta["shm_bytes"][phase]
            if phase == "world":  # mapped at init_process_group, before the sweep
                continue
            assert len(new_segments) == 1 and 2 * world * buffer <= new_segments[0] < 2 * world * buffer * 1.25, (
                f"rank {rank}, phase {phase}: segments {new_segments}, buffer {buffer}")
