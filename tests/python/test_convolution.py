"""Convolutions on pto: plain and transposed ones (1 to 3 spatial dims, stride,
padding, dilation, groups, output padding) run natively as im2col (one tmov from an
overlapping strided view of the padded input) and tmatmul, backward included.

pto's GEMMs sum each output's C_in/groups * prod(kernel_size) products (and the bias) in
another order than the CPU's convolutions: every comparison is within
error_bounds.conv_bound (2 gamma_m times the convolution of |input| with |weight|, plus
|bias|, m each output's term count; plus each side's final rounding for float16/bfloat16),
its gradients within multilinear_gradient_bounds, and a model's output within
sequential_bound, layer by layer. unfold only moves values: it compares equal."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from error_bounds import (assert_within_bound, bounded_opinfo_tests, check_forward_within_bound, conv_bound,
                          multilinear_bound, multilinear_gradient_bounds, sequential_bound)

NAMES = {"nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d", "nn.functional.unfold",
         "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d", "nn.functional.conv_transpose3d"}
OPS = [op for op in op_db if op.name in NAMES and op.variant_test_name == ""]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def reference_dtype(op, dtype):
    """pto's float16/bfloat16 transposed convolutions sum in float32 and round once, bias
    included. The CPU's own result at those dtypes depends on the machine (OpInfo seeds
    every sample itself, so the inputs do not): where oneDNN takes bfloat16 (AVX512-BF16)
    it rounds once too; elsewhere PyTorch's slow path adds the kernel's taps into the
    bfloat16 output one at a time, each add off by up to half an ulp of the partial sum.
    OpInfo's inputs lie in [-9, 9], conv_transpose3d's outputs reach ~900, where half a
    bfloat16 ulp is 2, and an output gathers up to 27 taps (3x3x3 at stride 1): up to
    27 x 2 = 54 off at worst, 7.5 measured; near-zero outputs make that an absolute
    error, which is how 2 of the 648 elements of its first sample fell beyond atol 0.25
    in CI. A tolerance that admits this no longer checks pto's rounding, so the reference
    is the CPU's float32 result of the same inputs, rounded once, as conv_bound assumes
    of both sides: pto then differs only by float32 sums in another order, and each
    side's one final rounding."""
    return torch.float32 if "conv_transpose" in op.name and dtype in (torch.float16, torch.bfloat16) else None


test_opinfo_forward_matches_cpu, test_opinfo_gradients_match_cpu = bounded_opinfo_tests(
    OPS, DTYPES, reference_dtype=reference_dtype, exact={"nn.functional.unfold"})


@pytest.mark.parametrize("op", [op for op in OPS if "conv_transpose" in op.name], ids=lambda op: op.name)
def test_transposed_reduced_precision_holds_where_the_cpu_lacks_onednn_bfloat16(op):
    """The CPU without oneDNN (as on machines without AVX512-BF16): the reference holds."""
    with torch.backends.mkldnn.flags(enabled=False):
        for dtype in (torch.float16, torch.bfloat16):
            assert check_forward_within_bound(op, dtype, reference_dtype(op, dtype)) > 0


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
    kwargs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    assert_within_bound(out.detach().cpu(), expected.detach(), conv_bound(x, w, b, **kwargs), "conv2d")
    bounds = multilinear_gradient_bounds(F.conv2d, (x, w, b), kwargs, grad)
    for (got, want), bound, name in zip(((xp, x), (wp, w), (bp, b)), bounds, ("input", "weight", "bias")):
        assert_within_bound(got.grad.cpu(), want.grad, bound, f"gradient of the {name}")


def test_a_small_cnn_matches_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(8, 4, 3, stride=2), torch.nn.Flatten(), torch.nn.Linear(4 * 7 * 7, 5))
    x = torch.randn(4, 3, 16, 16)
    expected = model(x)
    bound = sequential_bound(model, x)
    assert_within_bound(model.to("pto")(x.to("pto")).cpu().detach(), expected.detach(), bound, "the CNN's output")


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
    # fold sums the overlapping taps: within their sum's bound. The input's gradient
    # counts the patches each element falls in, sums of ones: exact.
    fold = dict(output_size=(7, 8), kernel_size=(3, 2), dilation=(1, 2), padding=1, stride=(2, 1))
    assert_within_bound(back.detach().cpu(), want.detach(), multilinear_bound(F.fold, (want_cols,), fold), "fold")
    assert_close(xp.grad.cpu(), x.grad, rtol=0, atol=0)
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
    kwargs = dict(stride=stride, padding=padding, output_padding=output_padding, groups=groups, dilation=dilation)
    assert_within_bound(out.detach().cpu(), expected.detach(), conv_bound(x, w, b, transposed=True, **kwargs),
                        "conv_transpose2d")
    bounds = multilinear_gradient_bounds(F.conv_transpose2d, (x, w, b), kwargs, grad)
    for (got, want), bound, name in zip(((xp, x), (wp, w), (bp, b)), bounds, ("input", "weight", "bias")):
        assert_within_bound(got.grad.cpu(), want.grad, bound, f"gradient of the {name}")


def test_a_channel_mismatch_raises_pytorchs_message():
    with pytest.raises(RuntimeError, match="expected input.* to have 3 channels, but got 2 channels"):
        F.conv2d(torch.randn(1, 2, 5, 5, device="pto"), torch.randn(4, 3, 3, 3, device="pto"))
    assert F.conv2d(torch.ones(1, 1, 3, 3, device="pto"), torch.ones(1, 1, 3, 3, device="pto")).item() == 9.0
