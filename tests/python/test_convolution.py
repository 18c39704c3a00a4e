"""Convolutions on pto: plain and transposed ones (1 to 3 spatial dims, stride,
padding, dilation, groups, output padding) run natively as im2col (one tmov from an
overlapping strided view of the padded input) and tmatmul, backward included."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from opinfo_sweep import ONE_ULP, opinfo_tests

NAMES = {"nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d", "nn.functional.unfold",
         "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d", "nn.functional.conv_transpose3d"}
OPS = [op for op in op_db if op.name in NAMES and op.variant_test_name == ""]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# GEMMs sum in another order than oneDNN's direct convolution.
TOLERANCE = {torch.float32: {"rtol": 1e-4, "atol": 1e-4}, **ONE_ULP}
# The CPU's float16/bfloat16 transposed convolutions accumulate in the reduced type:
# against the float32 result they are off by up to ~1e-3 of the outputs' scale
# (0.19 on outputs near 200 in OpInfo's samples), where pto sums in float32 and
# rounds once; the two are compared within that scale.
TRANSPOSED_REDUCED = {"rtol": 2e-2, "atol": 0.25}


def tolerance(op, dtype):
    if "conv_transpose" in op.name and dtype in (torch.float16, torch.bfloat16):
        return TRANSPOSED_REDUCED
    return TOLERANCE.get(dtype, {})

test_opinfo_forward_matches_cpu, test_opinfo_gradients_match_cpu = opinfo_tests(
    OPS, DTYPES, tolerance=tolerance,
    gradient_tolerance={"rtol": 1e-4, "atol": 1e-4})


def test_the_sweep_covers_every_op():
    assert {op.name for op in OPS} == NAMES


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 1, 1, 1), (2, 0, 1, 2), (1, 2, 2, 3), (3, 1, 1, 6)])
def test_conv2d_trains_natively(stride, padding, dilation, groups):
    x = torch.randn(2, 6, 11, 9, requires_grad=True)
    w = torch.randn(6, 6 // groups, 3, 3, requires_grad=True)
    b = torch.randn(6, requires_grad=True)
    xp, wp, bp = (t.detach().to("pto").requires_grad_() for t in (x, w, b))
    before = pypto_torch.fallback_ops()
    out = F.conv2d(xp, wp, bp, stride, padding, dilation, groups)
    grad = torch.randn(out.shape)
    out.backward(grad.to("pto"))
    assert pypto_torch.fallback_ops() == before
    expected = F.conv2d(x, w, b, stride, padding, dilation, groups)
    expected.backward(grad)
    assert_close(out.detach().cpu(), expected.detach(), rtol=1e-4, atol=1e-4)
    for got, want in ((xp, x), (wp, w), (bp, b)):
        assert_close(got.grad.cpu(), want.grad, rtol=1e-4, atol=1e-4)


def test_a_small_cnn_matches_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(8, 4, 3, stride=2), torch.nn.Flatten(), torch.nn.Linear(4 * 7 * 7, 5))
    x = torch.randn(4, 3, 16, 16)
    expected = model(x)
    assert_close(model.to("pto")(x.to("pto")).cpu(), expected, rtol=1e-4, atol=1e-4)


def test_unfold_and_fold_run_natively():
    x = torch.randn(2, 3, 7, 8, requires_grad=True)
    xp = x.detach().to("pto").requires_grad_()
    before = pypto_torch.fallback_ops()
    cols = F.unfold(xp, (3, 2), dilation=(1, 2), padding=1, stride=(2, 1))
    back = F.fold(cols, (7, 8), (3, 2), dilation=(1, 2), padding=1, stride=(2, 1))
    back.sum().backward()
    assert pypto_torch.fallback_ops() == before
    want_cols = F.unfold(x, (3, 2), dilation=(1, 2), padding=1, stride=(2, 1))
    want = F.fold(want_cols, (7, 8), (3, 2), dilation=(1, 2), padding=1, stride=(2, 1))
    want.sum().backward()
    assert torch.equal(cols.detach().cpu(), want_cols.detach())
    assert_close(back.detach().cpu(), want.detach())
    assert_close(xp.grad.cpu(), x.grad)
    assert F.fold(F.unfold(xp[0], 2), (7, 8), 2).shape == (3, 7, 8)  # unbatched


@pytest.mark.parametrize("stride,padding,output_padding,dilation,groups", [(2, 1, 1, 1, 2), (1, 0, 0, 1, 1),
                                                                          (3, 2, 2, 2, 2)])
def test_transposed_convolution_trains_natively(stride, padding, output_padding, dilation, groups):
    x = torch.randn(2, 4, 5, 6, requires_grad=True)
    w = torch.randn(4, 6 // groups, 3, 3, requires_grad=True)
    b = torch.randn(6, requires_grad=True)
    xp, wp, bp = (t.detach().to("pto").requires_grad_() for t in (x, w, b))
    before = pypto_torch.fallback_ops()
    out = F.conv_transpose2d(xp, wp, bp, stride, padding, output_padding, groups, dilation)
    grad = torch.randn(out.shape)
    out.backward(grad.to("pto"))
    assert pypto_torch.fallback_ops() == before
    expected = F.conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation)
    expected.backward(grad)
    assert_close(out.detach().cpu(), expected.detach(), rtol=1e-4, atol=1e-4)
    for got, want in ((xp, x), (wp, w), (bp, b)):
        assert_close(got.grad.cpu(), want.grad, rtol=1e-4, atol=1e-4)


def test_a_channel_mismatch_raises_pytorchs_message():
    with pytest.raises(RuntimeError, match="expected input.* to have 3 channels, but got 2 channels"):
        F.conv2d(torch.randn(1, 2, 5, 5, device="pto"), torch.randn(4, 3, 3, 3, device="pto"))
    assert F.conv2d(torch.ones(1, 1, 3, 3, device="pto"), torch.ones(1, 1, 3, 3, device="pto")).item() == 9.0
