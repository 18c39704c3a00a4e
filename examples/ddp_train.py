"""Data-parallel training on pto devices with the pccl backend.

    torchrun --standalone --nproc-per-node 2 examples/ddp_train.py

Each process (rank) trains the same small model on its own batches; DDP averages
the gradients over the ranks in backward, so every rank's copy stays identical.
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import pypto_torch  # noqa: F401  (registers the pto device and the pccl backend)

STEPS = 30


def batch(generator: torch.Generator, device: torch.device, size: int = 64):
    """A regression problem: y = sin(3 x0) + x1 * x2, 8 input features."""
    x = torch.randn(size, 8, generator=generator)
    y = torch.sin(3 * x[:, :1]) + x[:, 1:2] * x[:, 2:3]
    return x.to(device), y.to(device)


def main() -> None:
    # torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT.
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.pto.set_device(local_rank % torch.pto.device_count())
    device = torch.device("pto", torch.pto.current_device())
    dist.init_process_group("pccl")
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)  # DDP also copies rank 0's parameters to every rank
    model = nn.Sequential(nn.Linear(8, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1))
    model = DDP(model.to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    generator = torch.Generator().manual_seed(1000 + rank)  # each rank its own data

    for step in range(STEPS):
        x, y = batch(generator, device)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()  # gradients all-reduced over the ranks here
        optimizer.step()
        if step % 10 == 0 or step == STEPS - 1:
            print(f"rank {rank} step {step:2d} loss {loss.item():.4f}", flush=True)

    final = loss.detach().clone()
    dist.all_reduce(final)  # the mean loss over the ranks
    if rank == 0:
        print(f"trained {STEPS} steps on {world} ranks, final loss {final.item() / world:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
