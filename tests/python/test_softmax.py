"""softmax and log_softmax run natively on pto as fused row instructions,
forward and backward, along any dimension."""

import pytest
import torch
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from opinfo_sweep import ONE_ULP, opinfo_tests

NATIVE = {("softmax", ""), ("log_softmax", ""), ("_softmax_backward_data", ""),
          ("nn.functional.softmin", ""), ("nn.functional.log_softmax", "")}
OPS = [op for op in op_db if (op.name, op.variant_test_name) in NATIVE]
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
# pto computes a float16/bfloat16 row in float32 and rounds once; PyTorch's CPU
# kernel rounds some intermediates to the storage type: up to one ulp apart (ONE_ULP).


test_opinfo_forward_matches_cpu, test_opinfo_gradients_match_cpu = opinfo_tests(
    OPS, DTYPES, tolerance=lambda op, dtype: ONE_ULP.get(dtype, {}))


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


@pytest.mark.parametrize("length", [1, 15, 16, 17, 33, 100, 1000, 4099])
def test_float32_rows_of_every_tail_length(length):
    # A contiguous float32 row runs the vector kernels: full vectors, two at a time,
    # then a partial one; extreme rows past the first vector take the same paths.
    torch.manual_seed(length)
    x = torch.randn(5, length) * 20
    x[1, -1] = float("inf")
    x[2, :] = -float("inf")
    x[3, length // 2] = float("nan")
    for fn in (torch.softmax, torch.log_softmax):
        assert_close(fn(x.to("pto"), -1).cpu(), fn(x, -1), equal_nan=True)
