"""softmax and log_softmax run natively on pto as fused row instructions,
forward and backward, along any dimension."""

import pytest
import torch
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from opinfo_sweep import check_forward, check_gradients

NATIVE = {("softmax", ""), ("log_softmax", ""), ("_softmax_backward_data", ""),
          ("nn.functional.softmin", ""), ("nn.functional.log_softmax", "")}
OPS = [op for op in op_db if (op.name, op.variant_test_name) in NATIVE]
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
# pto computes a float16/bfloat16 row in float32 and rounds once; PyTorch's CPU
# kernel rounds some intermediates to the storage type: up to one ulp apart.
ONE_ULP = {torch.float16: {"atol": 2e-3, "rtol": 2e-3}, torch.bfloat16: {"atol": 1.6e-2, "rtol": 1.6e-2}}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_opinfo_forward_matches_cpu(op, dtype):
    if dtype not in op.supported_dtypes("cpu"):
        pytest.skip(f"{op.name} does not support {dtype} on CPU either")
    assert check_forward(op, dtype, **ONE_ULP.get(dtype, {})) > 0


@pytest.mark.parametrize("op", [op for op in OPS if op.supports_autograd], ids=lambda op: op.name)
def test_opinfo_gradients_match_cpu(op):
    check_gradients(op)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_is_native_forward_and_backward(dim):
    x = torch.randn(6, 7, 8, requires_grad=True)
    p = x.detach().to("pto").requires_grad_()
    before = pypto_torch.fallback_ops()
    y = torch.softmax(p, dim)
    y.backward(torch.ones_like(y))
    torch.log_softmax(p, dim).sum().backward()
    assert pypto_torch.fallback_ops() == before
    torch.softmax(x, dim).backward(torch.ones(6, 7, 8))
    torch.log_softmax(x, dim).sum().backward()
    assert_close(p.grad.cpu(), x.grad)


def test_extreme_rows():
    x = torch.tensor([[1000.0, 1000.0, -1000.0], [-float("inf"), 0.0, -float("inf")],
                      [-float("inf")] * 3, [float("nan"), 1.0, 2.0]])
    for fn in (torch.softmax, torch.log_softmax):
        assert_close(fn(x.to("pto"), -1).cpu(), fn(x, -1), equal_nan=True)
