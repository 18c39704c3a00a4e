"""Ops pto runs as a few native instructions (cat, masked_fill, var/std, logsumexp,
fmod, remainder, atan2, attention, losses, glu, prelu, logit): OpInfo
samples match CPU, forward and backward, and none of them falls back. The ops that are
one instruction (clamp, the activations with numbers) are test_elementwise.py's."""

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from opinfo_sweep import opinfo_tests

NAMES = {"cat", "stack", "masked_fill", "var", "std", "logsumexp", "fmod", "remainder", "atan2",
         "nn.functional.scaled_dot_product_attention", "nn.functional.smooth_l1_loss", "nn.functional.huber_loss",
         "nn.functional.binary_cross_entropy", "nn.functional.binary_cross_entropy_with_logits",
         "nn.functional.glu", "nn.functional.prelu", "logit", "var_mean",
         "std_mean", "nansum", "count_nonzero", "trace"}
OPS = [op for op in op_db if op.name in NAMES and op.variant_test_name == ""]
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool]
# Compositions round at each step in float16/bfloat16 where CPU kernels fuse:
# at most an ulp or two apart.
TOLERANCES = {torch.float32: {"rtol": 1e-5, "atol": 1e-5}, torch.float16: {"rtol": 2e-3, "atol": 2e-3},
              torch.bfloat16: {"rtol": 1.6e-2, "atol": 1.6e-2}}


def test_the_sweep_covers_every_composite():
    assert {op.name for op in OPS} == NAMES


def _tolerance(op, dtype):
    if op.name == "nn.functional.scaled_dot_product_attention" and dtype == torch.float32:
        return {"rtol": 1e-4, "atol": 1e-4}  # two matmuls: BLAS's summation order
    return TOLERANCES.get(dtype, {})


test_opinfo_forward_matches_cpu, test_opinfo_gradients_match_cpu = opinfo_tests(
    OPS, DTYPES, tolerance=_tolerance, gradient_tolerance={"rtol": 1e-4, "atol": 1e-4})


def test_attention_block_stays_native():
    q, k, v = (torch.randn(2, 4, 8, 16, device="pto", requires_grad=True) for _ in range(3))
    before = pypto_torch.fallback_ops()
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    torch.cat([out, out.clamp(-1, 1)], -1).var(-1).sum().backward()
    assert pypto_torch.fallback_ops() == before


def test_losses_norms_and_activations_train_without_fallback():
    x = torch.rand(8, 5, device="pto", requires_grad=True)
    target = torch.rand(8, 5, device="pto")
    before = pypto_torch.fallback_ops()
    loss = (torch.nn.functional.smooth_l1_loss(x, target, beta=0.5) + torch.nn.functional.huber_loss(x, target)
            + torch.nn.functional.smooth_l1_loss(x, target, beta=0.0) + torch.nn.functional.l1_loss(x, target)
            + torch.nn.functional.binary_cross_entropy(x, target) + torch.nn.functional.relu6(x * 9).sum()
            + torch.linalg.vector_norm(x, 3, dim=1).sum() + x.norm() + x.prod(1).sum()
            + torch.nn.functional.hardtanh(x, -0.5, 0.5).sum() + torch.nn.functional.elu(x - 0.5).sum()
            + torch.nn.functional.hardswish(x * 8 - 4).sum() + torch.nn.functional.mish(x).sum()
            + torch.nn.functional.hardsigmoid(x * 8 - 4).sum() + torch.nn.functional.selu(x - 0.5).sum())
    loss.backward()
    assert pypto_torch.fallback_ops() == before
    assert x.grad.device.type == "pto"


def test_binary_cross_entropy_checks_its_input_is_a_probability():
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        torch.nn.functional.binary_cross_entropy(torch.full((3,), 1.5, device="pto"), torch.ones(3, device="pto"))


def test_glu_prelu_logit_softshrink_logaddexp_and_statistics_are_native():
    x = torch.randn(6, 8, device="pto", requires_grad=True)
    prelu = torch.nn.PReLU(8).to("pto")
    before = pypto_torch.fallback_ops()
    total = (torch.nn.functional.glu(x).sum() + prelu(x).sum() + torch.logit(x.sigmoid(), 1e-3).sum()
             + torch.nn.functional.softshrink(x).sum() + torch.logaddexp(x, x.flip(0)).sum()
             + sum(t.sum() for t in torch.var_mean(x, 1)) + sum(t.sum() for t in torch.std_mean(x, 0))
             + torch.nansum(x) + torch.trace(x[:, :6]))
    total.backward()
    assert torch.count_nonzero(x > 0, dim=1).dtype == torch.int64
    assert pypto_torch.fallback_ops() == before
