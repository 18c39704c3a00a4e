"""Small models shared by the torch.compile tests (test_compile_models.py) and the
compile benchmark (benchmarks/bench_compile.py). Every factory builds on the CPU from
a seed; callers move a copy to "pto" with `on_device`."""

import copy

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    """Linear layers with ReLU between them; the last layer has no activation."""

    def __init__(self, sizes=(32, 64, 64, 10)):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = F.relu(layer(x))
        return self.layers[-1](x)


class SmallCNN(nn.Module):
    """Two conv -> batchnorm -> relu -> maxpool stages, then a linear classifier.
    Input: (N, channels, size, size) with size divisible by 4."""

    def __init__(self, channels=3, size=16, classes=10, width=8):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(channels, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1, bias=False), nn.BatchNorm2d(2 * width), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Linear(2 * width * (size // 4) ** 2, classes)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


class TransformerBlock(nn.Module):
    """A pre-norm transformer encoder block written out by hand: multi-head attention
    through F.scaled_dot_product_attention, layer_norm, a GELU feed-forward, residuals.
    Input and output: (batch, sequence, dim)."""

    def __init__(self, dim=64, heads=4, hidden=128):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        # No bias: a key bias adds one number to every score of a query's row, which softmax
        # cancels; its gradient would be rounding noise, which Adam scales up to the learning rate.
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def attention(self, x):
        batch, seq, dim = x.shape
        q, k, v = self.qkv(x).view(batch, seq, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v)  # (batch, heads, seq, head_dim)
        return self.proj(out.transpose(1, 2).reshape(batch, seq, dim))

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


def handwritten_softmax(x):
    """Softmax over the last dim from its parts, as the project's origin wrote it:
    row max, subtract, exp, row sum, divide."""
    shifted = x - x.amax(dim=-1, keepdim=True)
    e = shifted.exp()
    return e / e.sum(dim=-1, keepdim=True)


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


def seeded(factory, seed=0, **kwargs):
    """factory(**kwargs) built under torch.manual_seed(seed): the same weights every time."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return factory(**kwargs)


# Hugging Face transformers: configs small enough for tests, random weights, no downloads.
# Dropout is off so that training mode is deterministic and comparable with eager.

def tiny_gpt2(seed=0, attn_implementation="sdpa", **config):
    """GPT2LMHeadModel (2 layers, 64 wide, 4 heads, vocabulary 1000), in eval mode."""
    from transformers import GPT2Config, GPT2LMHeadModel

    settings = dict(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=128,
                    bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    settings.update(config)
    cfg = GPT2Config(**settings, attn_implementation=attn_implementation)
    return seeded(GPT2LMHeadModel, seed, config=cfg).eval()


def tiny_bert(seed=0, attn_implementation="sdpa", **config):
    """BertModel (2 layers, 64 wide, 4 heads, feed-forward 128, vocabulary 1000), in eval mode."""
    from transformers import BertConfig, BertModel

    settings = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                    vocab_size=1000, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    settings.update(config)
    cfg = BertConfig(**settings, attn_implementation=attn_implementation)
    return seeded(BertModel, seed, config=cfg).eval()


def on_device(model, device="pto", dtype=None):
    """A copy of model on device (and in dtype), leaving model as it is.

    Module.to("pto") gives every parameter a new Parameter object (torch only converts in
    place, keeping the object, between devices it lists as dense: CPU, CUDA, ...), which
    unties tied weights such as GPT-2's lm_head and word embeddings; they are tied again here."""
    moved = copy.deepcopy(model).to(device=device, dtype=dtype)
    if hasattr(moved, "tie_weights"):
        moved.tie_weights()
    return moved
