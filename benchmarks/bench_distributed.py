"""torch.distributed on pto (the pccl backend), side by side with gloo on CPU tensors.

    python3 benchmarks/bench_distributed.py [--quick] [--only collectives|ddp]

The script spawns its own ranks (torch.multiprocessing, spawn; MASTER_ADDR 127.0.0.1
and a free MASTER_PORT) and prints three plain-text tables:
  1. all_reduce (SUM, float32), 8 B .. 256 MiB (--quick: .. 16 MiB), on 2 and 4 ranks:
     latency and bus bandwidth of gloo on CPU tensors, pccl over shared memory and
     pccl over its Gloo TCP transport (PTO_PCCL_TRANSPORT=gloo, the path between hosts), as
     nccl-tests defines them: algbw = bytes / time, busbw = algbw * 2(n-1)/n; the aim: pccl
     over TCP at Gloo's time or better (<= 1.0) at 16 KiB, 1 MiB, 16 MiB and 256 MiB;
  2. DistributedDataParallel step time of an MLP (~10 MiB of parameters) on pto, 2 ranks,
     default bucketing, against one process doing the same per-rank work without DDP,
     alone and while a second process does the same work at the same time (on a
     2-core machine the fair comparison: two ranks share the cores);
  3. all_to_all_single with uneven splits (rank r sends to rank q a share proportional
     to ((q - r) mod n) + 1), 64 KiB .. 16 MiB sent per rank, on 2 and 4 ranks:
     (bytes sent + received per rank) / time, pccl (shm, gloo transport) vs gloo on CPU.

One set of ranks per world size serves every variant: the default group is
"cpu:gloo,pto:pccl" (pccl over shm), a second group is pccl over the Gloo transport
(PTO_PCCL_TRANSPORT=gloo while it is created). The variants alternate size by size,
so each size's figures are taken under the same conditions.

Timing: per size and variant, a checked call (all_reduce: the sum of rank + 1;
all_to_all_single: every block received) and a timed warm-up call, whose time (the
slowest rank's) sets N so that a repeat lasts ~20 ms (1 <= N <= 200); then 5 repeats
(3 from 64 MiB on, and with --quick) of N back-to-back calls, each after a barrier (a
1-element all_reduce of the CPU group). pto repeats end with torch.pto.synchronize()
inside the timed region: a pccl collective returns once it is queued on the device's
communication stream; gloo is synchronous on CPU tensors. A repeat's time is the
slowest rank's; the tables show the median of the repeats. Every rank runs with
torch.set_num_threads(1) (as OMP_NUM_THREADS=1 of torchrun); the simulated device's
worker threads are its own. --only runs tables 1 and 3 (collectives) or table 2 (ddp).
"""

import argparse
import os
import pickle
import socket
import statistics
import sys
import tempfile
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import pypto_torch
from _timing import Aims, OtherLoad, context_header, fell_back_since, table

KiB, MiB = 2**10, 2**20
ALLREDUCE_SIZES = [8, 64, KiB, 16 * KiB, 256 * KiB, MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB]
ALLTOALL_SIZES = [64 * KiB, MiB, 16 * MiB]
WORLD_SIZES = [2, 4]
VARIANTS = ["gloo", "pccl-shm", "pccl-gloo"]  # gloo: CPU tensors; pccl-*: pto tensors, by transport
# Sizes whose pccl-over-TCP time is held to Gloo's own (aim <= 1.0): the path between hosts.
TCP_AIM_SIZES = [16 * KiB, MiB, 16 * MiB, 256 * MiB]
RANK_TIMEOUT = timedelta(seconds=180)


def size_name(count: int) -> str:
    for unit, scale in (("MiB", MiB), ("KiB", KiB)):
        if count >= scale:
            return f"{count // scale} {unit}" if count % scale == 0 else f"{count / scale:.2f} {unit}"
    return f"{count} B"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RunLoad(OtherLoad):
    """OtherLoad that counts the ranks this process started (and reaped) as its own work."""

    OWN_TIMES = 4  # user, system, children's user, children's system


# Launching ranks -------------------------------------------------------------------------

def _rank_main(rank: int, fn_name: str, world: int, port: int, outdir: str, args: tuple) -> None:
    """What every spawned rank runs: the environment torchrun would give it, then fn."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    pypto_torch.set_fallback_mode("silent")
    torch.pto.set_device(rank % torch.pto.device_count())
    torch.manual_seed(1234 + rank)
    fallbacks_before = pypto_torch.fallback_ops()
    result = globals()[fn_name](rank, world, *args)
    fell_back = fell_back_since(fallbacks_before)
    if dist.is_initialized():
        dist.destroy_process_group()
    with open(os.path.join(outdir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump({"result": result, "fallbacks": fell_back}, f)
    # The result is written: leave without the interpreter's finalisation. A Gloo worker
    # thread of torch's may still hold the last reference to a finished all_reduce of a
    # CPU tensor (the barriers'), whose release takes the GIL; during finalisation that
    # ends the thread by a forced unwind and aborts the rank (3 of 8 DDP runs here, with
    # or without pypto's own exit hook): torch's race, not pccl's.
    os._exit(0)


def launch(fn_name: str, world: int, *args) -> list:
    """Runs globals()[fn_name](rank, world, *args) on `world` spawned ranks; their results, rank order."""
    with tempfile.TemporaryDirectory(prefix="pto-bench-dist-") as outdir:
        mp.start_processes(_rank_main, args=(fn_name, world, free_port(), outdir, args), nprocs=world,
                           join=True, start_method="spawn")
        out = []
        for rank in range(world):
            with open(os.path.join(outdir, f"rank{rank}.pkl"), "rb") as f:
                out.append(pickle.load(f))
    fell_back = {}
    for r in out:
        for op, n in r["fallbacks"].items():
            fell_back[op] = fell_back.get(op, 0) + n
    if fell_back:
        print(f"  (ranks of {fn_name}: ops through the CPU fallback: {fell_back})")
    return [r["result"] for r in out]


# Rank side: collectives ------------------------------------------------------------------

def _cpu_barrier() -> None:
    """A barrier through the default group's gloo: a 1-element all_reduce of a CPU tensor."""
    dist.all_reduce(torch.zeros(1))


def _timed(call, iters: int, pto: bool) -> float:
    """One repeat: barrier, then `iters` calls, synchronised; seconds (this rank's)."""
    _cpu_barrier()
    start = time.perf_counter()
    for _ in range(iters):
        call()
    if pto:
        torch.pto.synchronize()
    return time.perf_counter() - start


def _calls_per_repeat(call, pto: bool, quick: bool) -> int:
    """Times one call (the slowest rank's) and returns how many make a repeat of ~20 ms
    (--quick: ~10 ms), 1 to 200; every rank gets the same count."""
    elapsed = torch.tensor([_timed(call, 1, pto)], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    target = 0.010 if quick else 0.020
    return int(max(1, min(200, target // elapsed.item())))


def collectives_rank(rank: int, world: int, quick: bool, allreduce_sizes: list, alltoall_sizes: list) -> dict:
    os.environ["PTO_PCCL_TRANSPORT"] = "shm"
    dist.init_process_group("cpu:gloo,pto:pccl", timeout=RANK_TIMEOUT)
    os.environ["PTO_PCCL_TRANSPORT"] = "gloo"
    pccl_gloo = dist.new_group(backend="pccl", timeout=RANK_TIMEOUT)
    del os.environ["PTO_PCCL_TRANSPORT"]
    device = torch.device("pto", torch.pto.current_device())
    transports = {"pccl-shm": dist.group.WORLD._get_backend(device).transport,
                  "pccl-gloo": pccl_gloo._get_backend(device).transport}
    assert transports == {"pccl-shm": "shm", "pccl-gloo": "gloo"}, transports
    groups = {"gloo": None, "pccl-shm": None, "pccl-gloo": pccl_gloo}
    repeats = 3 if quick else 5
    times = {}  # (op, variant, nbytes) -> [seconds per call of each repeat] (this rank's)

    # all_reduce: each variant checked once (sum of rank + 1), then timed on zeros.
    expected = world * (world + 1) / 2
    for nbytes in allreduce_sizes:
        numel = nbytes // 4
        tensors = {v: torch.full((numel,), float(rank + 1), device="cpu" if v == "gloo" else device)
                   for v in VARIANTS}
        for v in VARIANTS:
            dist.all_reduce(tensors[v], group=groups[v])
            got = (tensors[v].min().item(), tensors[v].max().item())
            assert got == (expected, expected), f"all_reduce {v} {nbytes} B: got {got}, expected {expected}"
            tensors[v].zero_()
        calls = {v: (lambda v=v: dist.all_reduce(tensors[v], group=groups[v])) for v in VARIANTS}
        iters = {v: _calls_per_repeat(calls[v], v != "gloo", quick) for v in VARIANTS}
        for v in VARIANTS:
            times[("allreduce", v, nbytes)] = []
        for _ in range(3 if nbytes >= 64 * MiB else repeats):
            for v in VARIANTS:
                t = _timed(calls[v], iters[v], v != "gloo")
                times[("allreduce", v, nbytes)].append(t / iters[v])
        del tensors

    # all_to_all_single, uneven: rank r sends q a share proportional to ((q - r) mod n) + 1.
    weight_sum = world * (world + 1) // 2

    def split(total_numel: int, src: int, dst: int) -> int:
        return total_numel * (((dst - src) % world) + 1) // weight_sum

    for nbytes in alltoall_sizes:
        numel = nbytes // 4
        send_splits = [split(numel, rank, q) for q in range(world)]
        recv_splits = [split(numel, q, rank) for q in range(world)]
        moved = 4 * (sum(send_splits) + sum(recv_splits))
        # Row i of what rank r sends holds r * 1e6 + i: the receiver can check each block.
        buffers = {}
        for v in VARIANTS:
            where = "cpu" if v == "gloo" else device
            source = (rank * 1e6 + torch.arange(sum(send_splits), dtype=torch.float32)).to(where)
            buffers[v] = (source, torch.empty(sum(recv_splits), device=where))
        for v in VARIANTS:
            source, target = buffers[v]
            dist.all_to_all_single(target, source, recv_splits, send_splits, group=groups[v])
            received = target.cpu()
            offset = 0
            for q in range(world):
                start = sum(split(numel, q, d) for d in range(rank))  # where q's block for this rank began
                want = q * 1e6 + torch.arange(start, start + recv_splits[q], dtype=torch.float32)
                assert torch.equal(received[offset:offset + recv_splits[q]], want), \
                    f"all_to_all_single {v} {nbytes} B: the block from rank {q} is wrong"
                offset += recv_splits[q]
        calls = {v: (lambda v=v: dist.all_to_all_single(buffers[v][1], buffers[v][0], recv_splits, send_splits,
                                                        group=groups[v])) for v in VARIANTS}
        iters = {v: _calls_per_repeat(calls[v], v != "gloo", quick) for v in VARIANTS}
        for v in VARIANTS:
            times[("alltoall", v, nbytes)] = []
            times[("alltoall-bytes", v, nbytes)] = moved
        for _ in range(repeats):
            for v in VARIANTS:
                t = _timed(calls[v], iters[v], v != "gloo")
                times[("alltoall", v, nbytes)].append(t / iters[v])
        del buffers

    # The slowest rank's time of each repeat (every rank has the same keys in the same order).
    keys = [k for k in times if k[0] != "alltoall-bytes"]
    flat = torch.tensor([t for k in keys for t in times[k]], dtype=torch.float64)
    dist.all_reduce(flat, op=dist.ReduceOp.MAX)
    moved_bytes = torch.tensor([times[k] for k in times if k[0] == "alltoall-bytes"], dtype=torch.float64)
    dist.all_reduce(moved_bytes, op=dist.ReduceOp.MAX)
    out, i = {}, 0
    for k in keys:
        out[k] = flat[i:i + len(times[k])].tolist()
        i += len(times[k])
    for j, k in enumerate(k for k in times if k[0] == "alltoall-bytes"):
        out[k] = moved_bytes[j].item()  # the largest per-rank sent + received bytes
    dist.destroy_process_group(pccl_gloo)
    return out


# Rank side: DDP ---------------------------------------------------------------------------

MLP_IN, MLP_WIDTH, BATCH = 256, 1024, 64


def _make_mlp() -> torch.nn.Module:
    """~2.6M parameters (10 MiB float32); every rank builds the same one from one seed."""
    from torch import nn

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(4321)
        return nn.Sequential(nn.Linear(MLP_IN, MLP_WIDTH), nn.GELU(), nn.LayerNorm(MLP_WIDTH),
                             nn.Linear(MLP_WIDTH, MLP_WIDTH), nn.GELU(), nn.LayerNorm(MLP_WIDTH),
                             nn.Linear(MLP_WIDTH, MLP_WIDTH), nn.GELU(), nn.Linear(MLP_WIDTH, MLP_IN))


def _skip_allreduce(state, bucket):
    """A DDP comm hook that returns the bucket as it is: DDP's own work, no communication."""
    future = torch.futures.Future()
    future.set_result(bucket.buffer())
    return future


TRAINING_RUNS = ["alone", "concurrent", "ddp", "ddp-no-comm", "comm-only"]


def training_rank(rank: int, world: int, warmup: int, steps: int, repeats: int) -> dict:
    """Every training run of table 2 in one set of 2 ranks, their repeats interleaved (so a
    change in the machine's other load hits every run alike), each repeat after a barrier:
      alone        rank 0 trains the plain model (no DDP) while rank 1 waits in the barrier;
      concurrent   both ranks train their plain model at the same time, no communication;
      ddp          DDP over pccl (shm), default bucketing;
      ddp-no-comm  the same with a comm hook that skips the all_reduce (DDP's own work);
      comm-only    the all_reduces of DDP's buckets, back to back, without the compute."""
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("cpu:gloo,pto:pccl", timeout=RANK_TIMEOUT)
    device = torch.device("pto", torch.pto.current_device())
    x = torch.randn(BATCH, MLP_IN).to(device)
    y = torch.randn(BATCH, MLP_IN).to(device)
    plain = _make_mlp().to(device)
    ddp = DDP(_make_mlp().to(device), device_ids=None)
    no_comm = DDP(_make_mlp().to(device), device_ids=None)
    no_comm.register_comm_hook(None, _skip_allreduce)

    def training(model):
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

        def step():
            optimizer.zero_grad(set_to_none=True)
            F.mse_loss(model(x), y).backward()
            optimizer.step()
        return step

    plain_step = training(plain)
    run = {"alone": plain_step, "concurrent": plain_step, "ddp": training(ddp), "ddp-no-comm": training(no_comm)}
    for name in ("concurrent", "ddp", "ddp-no-comm"):
        for _ in range(warmup):
            run[name]()
    torch.pto.synchronize()
    # DDP rebuilt its buckets after the first step: all_reduce tensors of their sizes.
    logging = ddp._get_ddp_logging_data()
    sizes = logging.get("rebuilt_bucket_sizes") or logging.get("bucket_sizes", "")
    buckets = [int(b) for b in str(sizes).split(",") if b.strip()]
    flats = [torch.zeros(b // 4, device=device) for b in buckets]

    def allreduces():
        for flat in flats:
            dist.all_reduce(flat)

    run["comm-only"] = allreduces
    allreduces()
    torch.pto.synchronize()

    per_step = {name: [] for name in TRAINING_RUNS}
    for _ in range(repeats):
        for name in TRAINING_RUNS:
            _cpu_barrier()
            if name == "alone" and rank != 0:
                per_step[name].append(0.0)  # waits in the next barrier meanwhile
                continue
            start = time.perf_counter()
            for _ in range(steps):
                run[name]()
            torch.pto.synchronize()
            per_step[name].append((time.perf_counter() - start) / steps)
    # The slowest rank's time of each repeat.
    flat = torch.tensor([t for name in TRAINING_RUNS for t in per_step[name]], dtype=torch.float64)
    dist.all_reduce(flat, op=dist.ReduceOp.MAX)
    slowest = {name: flat[i * repeats:(i + 1) * repeats].tolist() for i, name in enumerate(TRAINING_RUNS)}
    return {"per_step": slowest, "params": sum(p.numel() for p in plain.parameters()), "buckets": buckets,
            "bucket_cap_mb": ddp.bucket_bytes_cap / MiB}


# Parent side: tables ---------------------------------------------------------------------

def _median(values: list) -> float:
    return statistics.median(values)


def _variant_rows(res: dict, kind: str, sizes: list, moved_bytes) -> list:
    """A row per size: each variant's median time, its GB/s (moved_bytes(nbytes) / time) and
    pccl-shm's time over gloo's."""
    rows = []
    for nbytes in sizes:
        t = {v: _median(res[(kind, v, nbytes)]) for v in VARIANTS}
        rows.append([size_name(nbytes)] + [f"{t[v] * 1e6:,.1f}" for v in VARIANTS]
                    + [f"{moved_bytes(nbytes) / t[v] / 1e9:.3f}" for v in VARIANTS]
                    + [f"{t['pccl-shm'] / t['gloo']:.2f}"])
    return rows


def report_allreduce(results: dict, sizes: list) -> None:
    aims = Aims("bench_distributed")
    for world, res in results.items():
        factor = 2 * (world - 1) / world
        rows = _variant_rows(res, "allreduce", sizes, lambda nbytes: nbytes * factor)
        for row, nbytes in zip(rows, sizes):
            ratio = round(_median(res[("allreduce", "pccl-gloo", nbytes)]) / _median(res[("allreduce", "gloo", nbytes)]), 2)
            mark = aims.aim(ratio <= 1.0, f"all_reduce {size_name(nbytes)}, {world} ranks: pccl over TCP / gloo time "
                                          f"{ratio} (aim <= 1.0)") if nbytes in TCP_AIM_SIZES else ""
            row += [f"{ratio:.2f} {mark}".strip()]
        table(f"1. all_reduce SUM float32, {world} ranks: median time per call, bus bandwidth "
              f"(busbw = bytes/time * 2(n-1)/n)",
              ["size", "gloo us", "pccl-shm us", "pccl-gloo us",
               "gloo GB/s", "pccl-shm GB/s", "pccl-gloo GB/s", "shm/gloo time", "tcp/gloo time"], rows)
    print("gloo: CPU tensors on the gloo backend; pccl-shm / pccl-gloo: pto tensors on pccl over shared memory /\n"
          "over its Gloo TCP transport (loopback, as between hosts). shm/gloo, tcp/gloo time > 1: pccl is slower\n"
          f"than gloo on CPU tensors; tcp/gloo is held to <= 1.0 at {', '.join(map(size_name, TCP_AIM_SIZES))}.")


def report_alltoall(results: dict, sizes: list) -> None:
    for world, res in results.items():
        rows = _variant_rows(res, "alltoall", sizes, lambda nbytes: res[("alltoall-bytes", "gloo", nbytes)])
        table(f"3. all_to_all_single, uneven splits, {world} ranks: median time per call, "
              f"GB/s = (bytes sent + received per rank) / time",
              ["sent per rank", "gloo us", "pccl-shm us", "pccl-gloo us",
               "gloo GB/s", "pccl-shm GB/s", "pccl-gloo GB/s", "shm/gloo time"], rows)
    print("splits: rank r sends rank q a share of its data proportional to ((q - r) mod n) + 1;\n"
          "every rank checks the blocks it received once per variant and size before the timing.")


def bench_ddp(quick: bool) -> None:
    warmup, steps, repeats = (3, 5, 3) if quick else (3, 10, 5)
    result = launch("training_rank", 2, warmup, steps, repeats)[0]
    t = {name: _median(result["per_step"][name]) for name in TRAINING_RUNS}
    alone, concurrent = t["alone"], t["concurrent"]

    def row(name, key, vs_alone=True, vs_concurrent=True):
        return [name, f"{t[key] * 1e3:.2f}", f"{(t[key] - alone) / alone * 100:+.1f} %" if vs_alone else "",
                f"{(t[key] - concurrent) / concurrent * 100:+.1f} %" if vs_concurrent else ""]

    params = result["params"]
    rows = [row("1 process, no DDP (the other rank idle)", "alone", False, False),
            row("2 processes, no DDP, at the same time", "concurrent", vs_concurrent=False),
            row("DDP, 2 ranks, pccl (shm), default buckets", "ddp"),
            row("DDP, 2 ranks, comm hook skipping all_reduce", "ddp-no-comm"),
            row("DDP's bucket all_reduces alone (no compute)", "comm-only", False, False)]
    table(f"2. DDP training step on pto: MLP {MLP_IN}-{MLP_WIDTH}-{MLP_WIDTH}-{MLP_WIDTH}-{MLP_IN} "
          f"({params / 1e6:.2f}M parameters, {params * 4 / MiB:.1f} MiB), batch {BATCH} per rank, SGD momentum; "
          f"median of {repeats} x {steps} steps",
          ["run", "ms / step", "vs alone", "vs concurrent"], rows)
    sizes = ", ".join(size_name(b) for b in result["buckets"]) or "?"
    print(f"DDP: bucket_cap_mb {result['bucket_cap_mb']:g} (the default), buckets all-reduced per step: {sizes}.\n"
          f"overhead = (ddp - single) / single: 'vs concurrent' is the fair one where the two ranks share the\n"
          f"machine's cores, 'vs alone' adds the sharing. The runs' repeats alternate in one set of 2 ranks.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter run (all_reduce up to 16 MiB, fewer repeats)")
    parser.add_argument("--only", choices=["collectives", "ddp"],
                        help="run only tables 1 and 3 (collectives) or only table 2 (ddp)")
    args = parser.parse_args()
    pypto_torch.set_fallback_mode("silent")
    # The ranks inherit it: c10d's warnings of every rank (no hooks of a group, DDP's timer
    # on a non-CUDA device) would bury the tables.
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    start = time.perf_counter()
    whole_run = RunLoad()

    context_header("pccl (torch.distributed on pto) benchmark", args.quick)
    print(f"  ranks: torch.multiprocessing spawn, 127.0.0.1, torch threads 1 per rank; "
          f"PTO_PCCL_BUFFER_BYTES {os.environ.get('PTO_PCCL_BUFFER_BYTES', 'unset (4 MiB)')}")
    sys.stdout.flush()

    allreduce_sizes = [s for s in ALLREDUCE_SIZES if not args.quick or s <= 16 * MiB]
    collectives = {}
    if args.only != "ddp":
        for world in WORLD_SIZES:
            during, began = RunLoad(), time.perf_counter()
            collectives[world] = launch("collectives_rank", world, args.quick, allreduce_sizes, ALLTOALL_SIZES)[0]
            print(f"  ({world} ranks: all_reduce and all_to_all_single took {time.perf_counter() - began:.0f} s; "
                  f"{during.describe()})")
            sys.stdout.flush()
        report_allreduce(collectives, allreduce_sizes)
        sys.stdout.flush()
    if args.only != "collectives":
        during = RunLoad()
        bench_ddp(args.quick)
        print(f"({during.describe()} during this table)")
        sys.stdout.flush()
    if args.only != "ddp":
        report_alltoall(collectives, ALLTOALL_SIZES)
    print(f"\ntotal time {time.perf_counter() - start:.1f} s; {whole_run.describe()}")


if __name__ == "__main__":
    main()
