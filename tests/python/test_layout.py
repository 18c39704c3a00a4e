"""Reordering on pto: flip reads its input backwards (one tmov over negative
strides, no copy of the input), roll moves two slices per dimension; fliplr,
flipud and rot90 come through them. All match CPU on PyTorch's OpInfo samples."""

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from opinfo_sweep import opinfo_tests

NAMES = {"flip", "fliplr", "flipud", "roll", "rot90"}
OPS = [op for op in op_db if op.name in NAMES and op.variant_test_name == ""]
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool]

test_opinfo_forward_matches_cpu, test_opinfo_gradients_match_cpu = opinfo_tests(OPS, DTYPES)


def test_the_sweep_covers_every_op():
    assert {op.name for op in OPS} == NAMES


def test_flip_and_roll_of_views_run_natively():
    x = torch.randn(4, 5, 6)
    p = x.to("pto")
    before = pypto_torch.fallback_ops()
    cases = [
        (lambda t: t.flip(0, 2), "flip"),
        (lambda t: t.transpose(0, 2)[1:, ::2].flip(-1), "flip of a strided view"),
        (lambda t: t.expand(3, 4, 5, 6).flip(0, 3), "flip of a broadcast"),
        (lambda t: t.roll(7, 1), "roll"),
        (lambda t: t.roll((-1, 2), (2, 0)), "roll over two dims"),
        (lambda t: t.roll(5), "roll of the flattened tensor"),
        (lambda t: torch.rot90(t, 3, (1, 2)), "rot90"),
    ]
    for fn, what in cases:
        assert torch.equal(fn(p).cpu(), fn(x)), what
    assert pypto_torch.fallback_ops() == before


def test_empty_and_zero_dim_tensors():
    assert torch.flip(torch.empty(0, 3, device="pto"), (0,)).shape == (0, 3)
    assert torch.roll(torch.empty(0, device="pto"), 2).shape == (0,)
    assert torch.flip(torch.tensor(3.0, device="pto"), ()).item() == 3.0


@pytest.mark.parametrize("call,message", [
    (lambda x: x.flip(0, 0), "appears multiple times"),
    (lambda x: x.flip(3), "Dimension out of range"),
    (lambda x: x.roll((1, 2), (0,)), "shifts and dimensions must align"),
])
def test_bad_arguments_raise_pytorchs_message(call, message):
    x = torch.randn(2, 3, device="pto")
    with pytest.raises((RuntimeError, IndexError), match=message):
        call(x)
    assert torch.equal(x.flip(1).flip(1).cpu(), x.cpu())  # still usable
