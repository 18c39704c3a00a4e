"""The small transformer the distributed tests train, its data, and single-process
reference training on the CPU.

Everything is built from fixed seeds on the CPU and then moved, so every rank and
the reference start from the same parameters and see the same global batches: rank
r of W trains on rows [r * B/W, (r + 1) * B/W) of each global batch of B sequences.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, D_MODEL, HEADS, SEQ, LAYERS = 64, 32, 4, 8, 2
GLOBAL_BATCH = 8
STEPS = 20
LR, MOMENTUM = 0.1, 0.9
MODEL_SEED, DATA_SEED = 1234, 4321


class Attention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.register_buffer("causal", torch.ones(SEQ, SEQ, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        scores = scores.masked_fill(~self.causal[:t, :t], float("-inf"))
        y = scores.softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    """Embedding + positions, LAYERS pre-norm blocks (causal attention, GELU MLP),
    final LayerNorm and a vocabulary head. `unused_branch` adds a Linear that the
    forward never calls (for DDP's find_unused_parameters)."""

    def __init__(self, unused_branch: bool = False):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.pos = nn.Parameter(0.1 * torch.randn(SEQ, D_MODEL))
        self.layers = nn.ModuleList(Block(D_MODEL, HEADS) for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, VOCAB)
        self.unused = nn.Linear(D_MODEL, D_MODEL) if unused_branch else None

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        for layer in self.layers:
            x = layer(x)
        return self.head(self.ln_f(x))


def make_model(seed: int = MODEL_SEED, **kwargs) -> TinyTransformer:
    """The same parameters wherever it is called: built on the CPU from `seed`."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return TinyTransformer(**kwargs)


def make_batches(steps: int = STEPS, batch: int = GLOBAL_BATCH, seed: int = DATA_SEED):
    """`steps` global batches of (inputs, targets): next-token prediction, CPU tensors.
    Each sequence starts at a random token and follows t -> (5 t + 3) mod VOCAB, with
    one token in eight random: learnable, so the loss falls within 20 steps."""
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.empty(steps, batch, SEQ + 1, dtype=torch.long)
    tokens[..., 0] = torch.randint(VOCAB, (steps, batch), generator=generator)
    for i in range(1, SEQ + 1):
        tokens[..., i] = (5 * tokens[..., i - 1] + 3) % VOCAB
    noise = torch.rand(tokens.shape, generator=generator) < 1 / 8
    tokens[noise] = torch.randint(VOCAB, (int(noise.sum()),), generator=generator)
    return [(t[:, :-1].contiguous(), t[:, 1:].contiguous()) for t in tokens]


def shard(batch, rank: int, world_size: int):
    """Rank `rank`'s rows of a global (inputs, targets) batch."""
    inputs, targets = batch
    rows = inputs.shape[0] // world_size
    return inputs[rank * rows:(rank + 1) * rows], targets[rank * rows:(rank + 1) * rows]


def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


def make_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def cpu_params(model: nn.Module) -> dict[str, torch.Tensor]:
    """name -> parameter on the CPU (full tensors of DTensors; DDP/compile prefixes removed)."""
    out = {}
    for name, p in model.named_parameters():
        if hasattr(p, "full_tensor"):
            p = p.full_tensor()
        for prefix in ("module.", "_orig_mod."):
            name = name.replace(prefix, "")
        out[name] = p.detach().cpu().clone()
    return out


def reference_training(steps: int = STEPS, micro_steps: int = 1, unused_branch: bool = False):
    """Single-process training on the whole global batch, on the CPU: the per-step
    losses and the final parameters. With micro_steps=k each optimizer step
    accumulates the gradients of k consecutive global batches."""
    model = make_model(unused_branch=unused_branch)
    optimizer = make_optimizer(model)
    batches = make_batches(steps * micro_steps)
    losses = []
    for step in range(steps):
        optimizer.zero_grad()
        for micro in range(micro_steps):
            inputs, targets = batches[step * micro_steps + micro]
            loss = loss_fn(model(inputs), targets)
            loss.backward()
        losses.append(loss.item())
        optimizer.step()
    return torch.tensor(losses), cpu_params(model)


def reference_bf16_compressed_ddp(world_size: int, steps: int = STEPS, device: str = "cpu"):
    """What DDP with bf16_compress_hook computes, emulated in one process on the CPU:
    each rank's fp32 gradient of its own shard is cast to bf16 and divided by the
    world size (as the hook does), the ranks' bf16 values are summed in bf16 (for two
    ranks a single rounding of the exact sum, whatever the order), and the result,
    cast back to fp32, is the gradient the optimizer steps with. On `device`."""
    model = make_model().to(device)
    optimizer = make_optimizer(model)
    losses = []
    for batch in make_batches(steps):
        per_rank, step_loss = [], 0.0
        for rank in range(world_size):
            model.zero_grad()
            inputs, targets = (t.to(device) for t in shard(batch, rank, world_size))
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            step_loss += loss.item() / world_size
            per_rank.append([p.grad.to(torch.bfloat16).div_(world_size) for p in model.parameters()])
        for p, *grads in zip(model.parameters(), *per_rank):
            total = grads[0]
            for g in grads[1:]:
                total = total + g
            p.grad = total.float()
        optimizer.step()
        losses.append(step_loss)
    return torch.tensor(losses), cpu_params(model)


def reference_fsdp2_bf16(world_size: int, steps: int = STEPS, device: str = "cpu"):
    """What FSDP2 with MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)
    computes, emulated in one process on `device`: each rank's forward and backward
    of its shard on a bf16 copy of the fp32 parameters, the bf16 gradients cast to
    fp32 and averaged over the ranks (a sum and a division by a power of two: exact
    in any order for two ranks), the fp32 update. Losses: the mean of the ranks'."""
    master = make_model().to(device)
    optimizer = make_optimizer(master)
    losses = []
    for batch in make_batches(steps):
        low = make_model().to(device)
        low.load_state_dict(master.state_dict())
        low = low.to(torch.bfloat16)
        per_rank, step_loss = [], 0.0
        for rank in range(world_size):
            low.zero_grad()
            inputs, targets = (t.to(device) for t in shard(batch, rank, world_size))
            loss = loss_fn(low(inputs), targets)
            loss.backward()
            step_loss += loss.item() / world_size
            per_rank.append([q.grad.float() for q in low.parameters()])
        for p, *grads in zip(master.parameters(), *per_rank):
            p.grad = sum(grads[1:], grads[0]) / world_size
        optimizer.step()
        losses.append(step_loss)
    return torch.tensor(losses), cpu_params(master)
