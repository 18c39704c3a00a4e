"""Reductions run natively on pto (tsum, tamax, targmax, tany ...), matching CPU
on PyTorch's OpInfo samples, forward and backward."""

import pytest
import torch
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from opinfo_sweep import opinfo_tests

NATIVE = {("sum", ""), ("mean", ""), ("amax", ""), ("amin", ""), ("argmax", ""), ("argmin", ""),
          ("any", ""), ("all", ""), ("max", "reduction_no_dim"), ("max", "reduction_with_dim"),
          ("min", "reduction_no_dim"), ("min", "reduction_with_dim"), ("max", "binary"),
          ("min", "binary"), ("prod", ""), ("linalg.vector_norm", ""), ("norm", ""), ("norm", "inf"),
          ("nn.functional.normalize", "")}
OPS = [op for op in op_db if (op.name, op.variant_test_name) in NATIVE]
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool]
# float16/bfloat16 sums: torch's CPU accumulates in float32, pto in double, so the
# two round differently once per output, by up to one unit in the last place.
REDUCED_PRECISION = {torch.float16: {"atol": 1e-3, "rtol": 2e-3}, torch.bfloat16: {"atol": 1e-2, "rtol": 1.6e-2}}


def _id(op):
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


test_opinfo_forward_matches_cpu, test_opinfo_gradients_match_cpu = opinfo_tests(
    OPS, DTYPES, tolerance=lambda op, dtype: REDUCED_PRECISION.get(dtype, {}))


@pytest.mark.parametrize("expression", [
    lambda x: x.sum(), lambda x: x.sum(1), lambda x: x.mean((0, 1), keepdim=True), lambda x: x.amax(-1),
    lambda x: x.max(1), lambda x: x.argmax(), lambda x: (x > 0).any(), lambda x: (x > 0).all(0),
])
def test_common_reductions_do_not_fall_back(expression):
    x = torch.randn(16, 32, device="pto")
    before = pypto_torch.fallback_ops()
    expression(x)
    assert pypto_torch.fallback_ops() == before


@pytest.mark.parametrize("shape,dims", [((4096, 512), 1), ((4096, 512), 0), ((64, 33, 17), (0, 2)),
                                        ((300000,), 0), ((7, 1, 5), 1)])
def test_large_and_strided_reductions(shape, dims):
    x = torch.randn(shape, dtype=torch.float64).float()
    p = x.to("pto")
    assert_close(p.sum(dims).cpu(), x.sum(dims), rtol=1e-5, atol=1e-4)
    assert_close(p.amax(dims).cpu(), x.amax(dims))
    assert_close(p.transpose(0, -1).sum(dims).cpu(), x.transpose(0, -1).sum(dims), rtol=1e-5, atol=1e-4)


def test_nan_propagates_through_max_and_argmax():
    x = torch.tensor([[1.0, float("nan"), 3.0], [2.0, 5.0, 4.0]])
    p = x.to("pto")
    assert_close(p.amax(1).cpu(), x.amax(1), equal_nan=True)
    assert torch.equal(p.argmax(1).cpu(), x.argmax(1))


def test_empty_reductions_follow_torch():
    empty = torch.empty(0, 3, device="pto")
    assert torch.equal(empty.sum(0).cpu(), torch.zeros(3))
    with pytest.raises((RuntimeError, IndexError)):
        empty.amax(0)
    assert torch.ones(2, device="pto").sum().item() == 2  # the device stays usable
