"""Ways to start the pccl process group: init_process_group("pccl"),
"cpu:gloo,pto:pccl", no backend at all (pto tensors then go to pccl), new_group,
and a world of one rank. Each way runs the common collectives on pto tensors.
One spawned group of 2 ranks starts and destroys the three default groups in turn
(each on its own port); world size 1 is a second launch."""

import os
import traceback

import pytest
import torch
from torch.testing import assert_close

import harness

WORLD = 2
D, B = harness.DEVICE, harness.BACKEND
INITS = {  # name -> the backend argument of init_process_group (None: no argument)
    "backend": B,
    "per_device": f"cpu:gloo,{D}:{B}" if D != "cpu" else "cpu:gloo",
    "no_backend": None,
}


def _backend_name(group, device_type: str) -> str:
    backend = group._get_backend(torch.device(device_type))
    try:
        return backend.name()
    except Exception:
        return type(backend).__name__


def _collectives(device, group=None) -> dict:
    """The common collectives on this rank's device; results (on the CPU) by name."""
    import torch.distributed as dist

    rank, world = dist.get_rank(group), dist.get_world_size(group)
    out = {}
    x = torch.arange(6, dtype=torch.float32, device=device) + 10 * rank
    y = x.clone()
    dist.all_reduce(y, group=group)
    out["all_reduce"] = y
    out["all_reduce_device"] = str(y.device)
    m = x.clone()
    dist.all_reduce(m, op=dist.ReduceOp.MAX, group=group)
    out["all_reduce_max"] = m
    b = x.clone()
    dist.broadcast(b, src=dist.get_global_rank(group, 0) if group is not None else 0, group=group)
    out["broadcast"] = b
    gathered = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(gathered, x, group=group)
    out["all_gather"] = torch.stack(gathered)
    flat = torch.empty(world * 6, device=device)
    dist.all_gather_into_tensor(flat, x, group=group)
    out["all_gather_into_tensor"] = flat
    rs = torch.empty(6 // world, device=device)
    dist.reduce_scatter_tensor(rs, x, group=group)
    out["reduce_scatter_tensor"] = rs
    work = dist.all_reduce(x.clone(), group=group, async_op=True)
    work.wait()
    dist.barrier(group=group)
    return out


def _point_to_point(device) -> dict:
    """all_to_all_single, and a ring exchange with batch_isend_irecv and send/recv."""
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    out = {}
    a2a = torch.empty(2 * world, device=device)
    dist.all_to_all_single(a2a, torch.arange(2 * world, dtype=torch.float32, device=device) + 100 * rank)
    out["all_to_all_single"] = a2a
    # Collectives right after an all_to_all_single (whose transfer makes a variable
    # number of exchanges) read their contributions where they arrived.
    after = torch.arange(4 * world, dtype=torch.float32, device=device) + rank
    dist.all_reduce(after)
    scattered = torch.empty(4, device=device)
    dist.reduce_scatter_tensor(scattered, after)
    out["after_all_to_all"] = scattered
    send = torch.full((3,), float(rank), device=device)
    recv = torch.empty(3, device=device)
    ops = [dist.P2POp(dist.isend, send, (rank + 1) % world), dist.P2POp(dist.irecv, recv, (rank - 1) % world)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    out["batch_isend_irecv"] = recv
    message = torch.full((4,), 7.0 + rank, device=device)
    if rank == 0:
        dist.send(message, 1)
        dist.recv(message, 1)
    elif rank == 1:
        received = torch.empty(4, device=device)
        dist.recv(received, 0)
        dist.send(received * 2, 0)
    out["send_recv"] = message
    return out


def _expected(world: int) -> dict:
    xs = [torch.arange(6, dtype=torch.float32) + 10 * r for r in range(world)]
    total = sum(xs)
    return {"all_reduce": total, "all_reduce_max": xs[-1], "broadcast": xs[0],
            "all_gather": torch.stack(xs), "all_gather_into_tensor": torch.cat(xs),
            "reduce_scatter_tensor": lambda rank: total.chunk(world)[rank]}


def init_rank(ports) -> dict:
    import torch.distributed as dist

    device = harness.local_device()
    results = {}
    for (name, backend), port in zip(INITS.items(), ports):
        os.environ["MASTER_PORT"] = str(port)
        try:
            if backend is None:
                dist.init_process_group()
            else:
                dist.init_process_group(backend)
            result = {"get_backend": str(dist.get_backend()),
                      "device_backend": _backend_name(dist.group.WORLD, D),
                      "cpu_backend": _backend_name(dist.group.WORLD, "cpu") if name == "per_device" else None,
                      "rank": dist.get_rank(), "world": dist.get_world_size()}
            result["collectives"] = _collectives(device)
            if name == "per_device":  # a CPU tensor goes to gloo in the same group
                c = torch.ones(3) * (dist.get_rank() + 1)
                dist.all_reduce(c)
                result["cpu_all_reduce"] = c
            if name == "backend":
                subgroup = dist.new_group([0, 1])
                result["new_group_backend"] = str(dist.get_backend(subgroup))
                result["new_group"] = _collectives(device, subgroup)
                result["p2p"] = _point_to_point(device)
            results[name] = result
        except Exception:
            results[name] = {"error": traceback.format_exc()}
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
    return results


def world_of_one_rank() -> dict:
    import torch.distributed as dist

    device = harness.init()
    out = {"get_backend": str(dist.get_backend()), "collectives": _collectives(device)}
    group = dist.new_group([0])
    out["new_group"] = _collectives(device, group)
    model = torch.nn.Linear(4, 2).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    ddp(torch.ones(3, 4, device=device)).sum().backward()
    out["ddp_grad"] = model.weight.grad
    return out


@pytest.fixture(scope="module")
def ranks():
    return harness.run(init_rank, WORLD, args=([harness.free_port() for _ in INITS],), timeout=300)


def _check_collectives(out, world, rank):
    expected = _expected(world)
    assert out["all_reduce_device"].startswith(D)
    for name, value in expected.items():
        value = value(rank) if callable(value) else value
        assert_close(out[name], value, msg=lambda s: f"{name}: {s}")


@pytest.mark.parametrize("name", list(INITS))
def test_init_process_group(ranks, name):
    for rank, results in enumerate(ranks):
        result = results[name]
        if "error" in result:
            pytest.fail(f"rank {rank}, init {INITS[name]!r}:\n{result['error']}", pytrace=False)
        assert (result["rank"], result["world"]) == (rank, WORLD)
        assert result["device_backend"].lower() == B, result
        # With no backend argument torch's get_backend() says "undefined" (so for cuda):
        # which backend serves pto is what counts.
        assert B in result["get_backend"] or (name == "no_backend" and result["get_backend"] == "undefined"), result
        _check_collectives(result["collectives"], WORLD, rank)
        # No backend: torch maps only the accelerator (as pto -> pccl, so cuda -> nccl).
        if name == "per_device":
            assert result["cpu_backend"].lower() == "gloo", result
            assert_close(result["cpu_all_reduce"], torch.full((3,), 3.0))


def test_new_group(ranks):
    for rank, results in enumerate(ranks):
        result = results["backend"]
        if "error" in result:
            pytest.fail(f"rank {rank}:\n{result['error']}", pytrace=False)
        assert result["new_group_backend"] == B
        _check_collectives(result["new_group"], WORLD, rank)


def test_point_to_point(ranks):
    for rank, results in enumerate(ranks):
        result = results["backend"]
        if "error" in result:
            pytest.fail(f"rank {rank}:\n{result['error']}", pytrace=False)
        p2p = result["p2p"]
        expected = torch.cat([torch.arange(2 * rank, 2 * rank + 2, dtype=torch.float32) + 100 * q for q in range(WORLD)])
        assert_close(p2p["all_to_all_single"], expected)
        assert_close(p2p["batch_isend_irecv"], torch.full((3,), float((rank - 1) % WORLD)))
        assert_close(p2p["send_recv"], torch.full((4,), 14.0 if rank == 0 else 8.0))
        summed = sum(torch.arange(4 * WORLD, dtype=torch.float32) + q for q in range(WORLD))
        assert_close(p2p["after_all_to_all"], WORLD * summed.chunk(WORLD)[rank])


def test_world_size_one():
    (out,) = harness.run(world_of_one_rank, 1, timeout=120)
    assert out["get_backend"] == B
    _check_collectives(out["collectives"], 1, 0)
    _check_collectives(out["new_group"], 1, 0)
    assert_close(out["ddp_grad"], torch.full((2, 4), 3.0))
