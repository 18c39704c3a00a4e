"""DTensor on device meshes of pto devices: distribute_tensor, redistribute between
Shard, Replicate and Partial, full_tensor; tensor parallelism of an MLP (ColwiseParallel
then RowwiseParallel) against the single-device MLP on the CPU. A 1-D mesh on 2 ranks,
a 2-D (2, 2) mesh on 4 ranks (two ranks per simulated device). Three launches:
the 1-D redistributions, the 1-D tensor parallelism, the 2-D mesh."""

import pytest
import torch
from torch import nn
from torch.testing import assert_close

import harness

FULL_SEED, MLP_SEED, INPUT_SEED = 11, 12, 13


def _full(rows=6, cols=4):
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(FULL_SEED))


def _mlp():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(MLP_SEED)
        return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))


def _inputs(batches=1):
    return torch.randn(batches, 4, 16, generator=torch.Generator().manual_seed(INPUT_SEED))


def _reference_mlp(x):
    mlp = _mlp()
    x = x.clone().requires_grad_()
    y = mlp(x)
    (y * y).sum().backward()
    grads = {name: p.grad for name, p in mlp.named_parameters()}
    return y.detach(), x.grad, grads


def _tensor_parallel_mlp(mesh, x, device):
    """y, dL/dx and the full parameter gradients of the MLP parallelised over `mesh`."""
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mlp = parallelize_module(_mlp().to(device), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    assert isinstance(mlp[0].weight, DTensor) and mlp[0].weight.to_local().shape == (32 // mesh.size(), 16)
    x = x.to(device).requires_grad_()
    y = mlp(x)
    assert not isinstance(y, DTensor) and y.device.type == device.type
    (y * y).sum().backward()
    grads = {name: p.grad.full_tensor() for name, p in mlp.named_parameters()}
    return {"y": y, "x_grad": x.grad, "grads": grads}


def dtensor_1d_rank() -> dict:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    device = harness.init()
    rank = dist.get_rank()
    mesh = init_device_mesh(harness.DEVICE, (2,))
    full = _full().to(device)
    out = {}
    d = distribute_tensor(full, mesh, [Shard(0)])
    assert d.to_local().device.type == device.type
    out["shard0_local"] = d.to_local()
    out["shard0_full"] = d.full_tensor()
    r = d.redistribute(mesh, [Replicate()])                          # all-gather
    out["replicate_local"] = r.to_local()
    out["replicate_to_shard1_local"] = r.redistribute(mesh, [Shard(1)]).to_local()
    out["shard0_to_shard1_local"] = d.redistribute(mesh, [Shard(1)]).to_local()   # all-to-all
    partial = DTensor.from_local(full * (rank + 1), mesh, [Partial()])  # sum: 3 * full
    out["partial_to_replicate_local"] = partial.redistribute(mesh, [Replicate()]).to_local()  # all-reduce
    out["partial_to_shard0_local"] = partial.redistribute(mesh, [Shard(0)]).to_local()        # reduce-scatter
    out["partial_full"] = partial.full_tensor()
    uneven = distribute_tensor(_full(5, 3).to(device), mesh, [Shard(0)])
    out["uneven_local"], out["uneven_full"] = uneven.to_local(), uneven.full_tensor()
    # Ops on DTensors: the sharded matmul gives Partial sums, reduced by full_tensor().
    w = distribute_tensor(_full(4, 6).to(device), mesh, [Shard(0)])
    out["matmul_full"] = (d.redistribute(mesh, [Shard(1)]) @ w).full_tensor()
    return out


def tensor_parallel_1d_rank() -> dict:
    from torch.distributed.device_mesh import init_device_mesh

    device = harness.init()
    return _tensor_parallel_mlp(init_device_mesh(harness.DEVICE, (2,)), _inputs()[0], device)


def dtensor_2d_rank() -> dict:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    device = harness.init()
    rank = dist.get_rank()
    mesh = init_device_mesh(harness.DEVICE, (2, 2), mesh_dim_names=("dp", "tp"))
    dp, tp = mesh.get_coordinate()
    full = _full(8, 4).to(device)
    out = {"coordinate": (dp, tp), "device": str(device)}
    d = distribute_tensor(full, mesh, [Shard(0), Shard(1)])
    out["s0s1_local"], out["s0s1_full"] = d.to_local(), d.full_tensor()
    out["rs0_local"] = d.redistribute(mesh, [Replicate(), Shard(0)]).to_local()
    out["s1r_local"] = d.redistribute(mesh, [Shard(1), Replicate()]).to_local()
    out["rr_local"] = d.redistribute(mesh, [Replicate(), Replicate()]).to_local()
    partial = DTensor.from_local(full.chunk(2, 0)[dp] * (rank + 1), mesh, [Shard(0), Partial()])
    out["s0p_to_s0r_local"] = partial.redistribute(mesh, [Shard(0), Replicate()]).to_local()
    out["s0p_full"] = partial.full_tensor()
    # Tensor parallelism over the "tp" dimension, each "dp" row its own batch.
    out["mlp"] = _tensor_parallel_mlp(mesh["tp"], _inputs(2)[dp], device)
    return out


@pytest.fixture(scope="module")
def ranks_1d():
    return harness.run(dtensor_1d_rank, 2, timeout=300)


@pytest.fixture(scope="module")
def tp_1d():
    return harness.run(tensor_parallel_1d_rank, 2, timeout=300)


@pytest.fixture(scope="module")
def ranks_2d():
    return harness.run(dtensor_2d_rank, 4, timeout=400)


def _check_mlp(result, x):
    y, x_grad, grads = _reference_mlp(x)
    assert_close(result["y"], y, atol=1e-5, rtol=1e-5)
    assert_close(result["x_grad"], x_grad, atol=1e-5, rtol=1e-5)
    for name, grad in grads.items():
        assert_close(result["grads"][name], grad, atol=1e-5, rtol=1e-5, msg=lambda s: f"{name}: {s}")


def test_dtensor_1d_distribute_and_full_tensor(ranks_1d):
    full = _full()
    for rank, out in enumerate(ranks_1d):
        assert torch.equal(out["shard0_local"], full.chunk(2, 0)[rank])
        assert torch.equal(out["shard0_full"], full)
        assert torch.equal(out["uneven_local"], _full(5, 3).chunk(2, 0)[rank])
        assert torch.equal(out["uneven_full"], _full(5, 3))


def test_dtensor_1d_redistribute(ranks_1d):
    full = _full()
    for rank, out in enumerate(ranks_1d):
        assert torch.equal(out["replicate_local"], full)
        assert torch.equal(out["replicate_to_shard1_local"], full.chunk(2, 1)[rank])
        assert torch.equal(out["shard0_to_shard1_local"], full.chunk(2, 1)[rank])
        assert_close(out["partial_to_replicate_local"], 3 * full)
        assert_close(out["partial_to_shard0_local"], (3 * full).chunk(2, 0)[rank])
        assert_close(out["partial_full"], 3 * full)
        assert_close(out["matmul_full"], full @ _full(4, 6), atol=1e-5, rtol=1e-5)


def test_tensor_parallel_mlp_1d(tp_1d):
    for out in tp_1d:
        _check_mlp(out, _inputs()[0])


def test_dtensor_2d_mesh(ranks_2d):
    full = _full(8, 4)
    for rank, out in enumerate(ranks_2d):
        dp, tp = out["coordinate"]
        assert (dp, tp) == (rank // 2, rank % 2)
        assert torch.equal(out["s0s1_local"], full.chunk(2, 0)[dp].chunk(2, 1)[tp])
        assert torch.equal(out["s0s1_full"], full)
        assert torch.equal(out["rs0_local"], full.chunk(2, 0)[tp])
        assert torch.equal(out["s1r_local"], full.chunk(2, 1)[dp])
        assert torch.equal(out["rr_local"], full)
        # Rank (dp, tp) held (rank + 1) * rows dp: the tp pair sums to (2 dp + 1) + (2 dp + 2).
        rows = [full.chunk(2, 0)[i] * (4 * i + 3) for i in range(2)]
        assert_close(out["s0p_to_s0r_local"], rows[dp])
        assert_close(out["s0p_full"], torch.cat(rows))


def test_tensor_parallel_mlp_2d(ranks_2d):
    for out in ranks_2d:
        dp, _ = out["coordinate"]
        _check_mlp(out["mlp"], _inputs(2)[dp])
