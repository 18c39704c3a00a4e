"""Reordering on pto: flip reads its input backwards (one tmov over negative
strides, no copy of the input), roll moves two slices per dimension; fliplr,
flipud and rot90 come through them; reflection and replication padding gather
each padded dimension. All match CPU on PyTorch's OpInfo samples. linspace counts
from both ends, as the CPU does."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from opinfo_sweep import opinfo_tests

NAMES = {"flip", "fliplr", "flipud", "roll", "rot90", "nn.functional.pad"}
OPS = [op for op in op_db if op.name in NAMES and op.variant_test_name in ("", "reflect", "replicate", "circular")]
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool]

test_opinfo_forward_matches_cpu, test_opinfo_gradients_match_cpu = opinfo_tests(OPS, DTYPES)


def test_the_sweep_covers_every_op():
    assert {op.name for op in OPS} == NAMES and len(OPS) == len(NAMES) + 2  # pad: three modes


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


@pytest.mark.parametrize("mode,pad", [("reflect", (2, 1, 3, 0)), ("replicate", (1, 2, 0, 3)), ("reflect", (1, 1)),
                                      ("replicate", (1, 0, 2, 1, 0, 2)), ("circular", (1, 2, 1, 1))])
def test_padding_modes_and_their_gradients_run_natively(mode, pad):
    x = torch.randn(2, 3, 4, 5, 6)
    x = (x[0] if len(pad) == 4 else x[0, 0] if len(pad) == 2 else x).requires_grad_()
    xp = x.detach().to("pto").requires_grad_()
    before = pypto_torch.fallback_ops()
    got = F.pad(xp, pad, mode=mode)
    grad = torch.randn(got.shape)
    got.backward(grad.to("pto"))
    assert pypto_torch.fallback_ops() == before
    want = F.pad(x, pad, mode=mode)
    want.backward(grad)
    assert torch.equal(got.detach().cpu(), want.detach())
    assert_close(xp.grad.cpu(), x.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("start,end,steps", [(-3.3, 7.1, 1001), (0, 1, 5), (2, -2, 4), (1, 5, 1), (0, 1, 0)])
def test_linspace_matches_cpu(dtype, start, end, steps):
    before = pypto_torch.fallback_ops()
    got = torch.linspace(start, end, steps, device="pto", dtype=dtype)
    assert pypto_torch.fallback_ops() == before
    want = torch.linspace(start, end, steps, dtype=dtype)
    assert_close(got.cpu(), want)  # within an ulp: CPU's vector lanes round their own way
    if steps > 1:
        assert got[0].item() == want[0].item() and got[-1].item() == want[-1].item()


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


def test_an_elementwise_result_keeps_its_inputs_layout():
    """As TensorIterator does: views the CPU allows on such a result work on pto too."""
    x = torch.randn(2, 12, 4, 8).transpose(1, 2)
    on_pto = x.to("pto")
    for op in (lambda t: t * 2, torch.exp, lambda t: t + t):
        assert op(on_pto).stride() == op(x).stride()
        assert_close(op(on_pto).transpose(1, 2).view(2, 12, 32).cpu(), op(x).transpose(1, 2).view(2, 12, 32))
