"""pccl's allreduce between hosts (the Gloo transport) past one exchange of everything:
a reduce-scatter and an allgather by messages, chunk by chunk (allreduce_by_messages.h).
Its messages leave from and arrive in the tensors themselves where host code reaches
device memory (the simulated device), and are staged through host memory where it
does not (PTO_SIM_STRICT=1): staged on 2 and 4 ranks with a 64 KiB buffer (many
chunks, the last one short and some of its parts empty), in place with the default
one, against what every rank's inputs give; the values are chosen so that any order
of the reduction gives the same bits, and every rank must end with those bits. An uneven
all_to_all_single, also one message per peer between hosts, rides along."""

import zlib

import pytest
import torch

import harness

pytestmark = pytest.mark.skipif(harness.DEVICE != "pto", reason="pccl's own allreduce")

# name -> (dtype, reduce op, numel); inputs from _inputs().
CASES = {
    "sum_float32": (torch.float32, "SUM", 300_001),
    "sum_bfloat16": (torch.bfloat16, "SUM", 200_003),
    "max_float16": (torch.float16, "MAX", 250_007),
    "avg_float32": (torch.float32, "AVG", 131_071),
    "bxor_int32": (torch.int32, "BXOR", 100_003),
    "product_int64": (torch.int64, "PRODUCT", 70_001),
}


def _inputs(name: str, rank: int) -> torch.Tensor:
    dtype, op, numel = CASES[name]
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()) + rank)
    if op == "BXOR":
        return torch.randint(0, 2**30, (numel,), generator=g, dtype=dtype)
    if op == "PRODUCT":
        return torch.randint(-2, 3, (numel,), generator=g, dtype=dtype)
    if op == "AVG":  # multiples of 4: sums and their quarters are exact
        return (torch.randint(-64, 64, (numel,), generator=g) * 4).to(dtype)
    if op == "MAX":
        return torch.randn(numel, generator=g).to(dtype)
    return torch.randint(-8, 9, (numel,), generator=g).to(dtype)  # small integers: exact sums


def _expected(name: str, world: int) -> torch.Tensor:
    dtype, op, _ = CASES[name]
    rows = torch.stack([_inputs(name, r) for r in range(world)])
    if op == "BXOR":
        out = rows[0]
        for row in rows[1:]:
            out = out ^ row
        return out
    if op == "PRODUCT":
        return rows.prod(0)
    if op == "MAX":
        return rows.max(0).values
    total = rows.double().sum(0)
    return (total / world if op == "AVG" else total).to(dtype)


def _allreduce_each_case() -> dict:
    import torch.distributed as dist

    device = harness.init()
    assert dist.group.WORLD._get_backend(device).transport == "gloo"
    out = {}
    for name, (_, op, _) in CASES.items():
        x = _inputs(name, dist.get_rank()).to(device)
        dist.all_reduce(x, op=getattr(dist.ReduceOp, op))
        out[name] = x
    # all_to_all_single by messages too: rank r sends rank q (r + q + 1) * 1000 elements.
    rank, world = dist.get_rank(), dist.get_world_size()
    send = [(rank + q + 1) * 1000 for q in range(world)]
    recv = [(q + rank + 1) * 1000 for q in range(world)]
    source = (rank * 1e6 + torch.arange(sum(send), dtype=torch.float32)).to(device)
    out["all_to_all"] = torch.empty(sum(recv), device=device)
    dist.all_to_all_single(out["all_to_all"], source, recv, send)
    out["host_access"] = torch.pto.get_device_properties(device).host_access_to_device_memory
    return out


def _expected_all_to_all(rank: int, world: int) -> torch.Tensor:
    blocks = []
    for q in range(world):
        start = sum((q + d + 1) * 1000 for d in range(rank))  # where q's block for this rank begins
        blocks.append(q * 1e6 + torch.arange(start, start + (q + rank + 1) * 1000, dtype=torch.float32))
    return torch.cat(blocks)


# In place with the 64 KiB buffer is test_dist_collectives' gloo phase (every reduce op, 2 and 4 ranks).
@pytest.mark.parametrize("world,strict,buffer", [(2, "1", 65536), (4, "1", 65536), (2, "0", None)])
def test_allreduce_by_messages_gives_every_rank_the_exact_result(world, strict, buffer):
    env = {"PTO_PCCL_TRANSPORT": "gloo", "PTO_SIM_STRICT": strict}
    if buffer is not None:
        env["PTO_PCCL_BUFFER_BYTES"] = str(buffer)
    results = harness.run(_allreduce_each_case, world_size=world, env=env, timeout=180)
    for rank, result in enumerate(results):
        assert result.pop("host_access") is (strict == "0")
        assert torch.equal(result.pop("all_to_all"), _expected_all_to_all(rank, world)), f"rank {rank}: all_to_all"
        for name, got in result.items():
            want = _expected(name, world)
            assert got.dtype == want.dtype and torch.equal(got, want), \
                f"rank {rank}, {name}: {(got != want).sum().item()} of {want.numel()} elements differ"
