"""Pooling and nearest upsampling on pto: max and average pooling are reductions
over a strided view of the padded input's windows (tamax, targmax, tsum); their
backward adds each kernel offset's share into a strided view of the gradient."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from opinfo_sweep import ONE_ULP, check_forward, opinfo_tests

NAMES = {"nn.functional.max_pool2d", "nn.functional.avg_pool2d", "nn.functional.adaptive_avg_pool2d",
         "nn.functional.interpolate"}
OPS = [op for op in op_db if op.name in NAMES and op.variant_test_name in ("", "nearest", "bilinear")]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]

test_opinfo_forward_matches_cpu, test_opinfo_gradients_match_cpu = opinfo_tests(
    OPS, DTYPES, tolerance=lambda op, dtype: ONE_ULP.get(dtype, {}))


def test_the_sweep_covers_every_op():
    assert {op.name for op in OPS} == NAMES


@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode", [
    (2, 2, 0, 1, False), (3, 2, 1, 1, False), (3, 2, 1, 2, True), ((2, 3), (1, 2), (1, 0), 1, True)])
def test_max_pool_values_indices_and_gradient(kernel, stride, padding, dilation, ceil_mode):
    x = torch.randn(2, 3, 9, 10, requires_grad=True)
    xp = x.detach().to("pto").requires_grad_()
    before = pypto_torch.fallback_ops()
    out, indices = F.max_pool2d(xp, kernel, stride, padding, dilation, ceil_mode, return_indices=True)
    grad = torch.randn(out.shape)
    out.backward(grad.to("pto"))
    assert pypto_torch.fallback_ops() == before
    want, want_indices = F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True)
    want.backward(grad)
    assert torch.equal(out.detach().cpu(), want.detach())
    assert torch.equal(indices.cpu(), want_indices)
    assert_close(xp.grad.cpu(), x.grad)


@pytest.mark.parametrize("ceil_mode,count_include_pad,divisor", [(False, True, None), (True, False, None),
                                                                   (True, True, None), (False, False, 5)])
def test_avg_pool_divisors_and_gradient(ceil_mode, count_include_pad, divisor):
    x = torch.randn(2, 3, 9, 10, requires_grad=True)
    xp = x.detach().to("pto").requires_grad_()
    before = pypto_torch.fallback_ops()
    out = F.avg_pool2d(xp, 3, 2, 1, ceil_mode, count_include_pad, divisor)
    out.sum().backward()
    assert pypto_torch.fallback_ops() == before
    want = F.avg_pool2d(x, 3, 2, 1, ceil_mode, count_include_pad, divisor)
    want.sum().backward()
    assert_close(out.detach().cpu(), want.detach())
    assert_close(xp.grad.cpu(), x.grad)


def test_global_pooling_and_upsampling_run_natively():
    x = torch.randn(2, 4, 6, 8)
    xp = x.to("pto")
    before = pypto_torch.fallback_ops()
    pooled = F.adaptive_avg_pool2d(xp, 1)
    up = F.interpolate(xp, scale_factor=2, mode="nearest")
    odd = F.interpolate(xp, size=(7, 5), mode="nearest")
    assert pypto_torch.fallback_ops() == before
    assert_close(pooled.cpu(), F.adaptive_avg_pool2d(x, 1))
    assert torch.equal(up.cpu(), F.interpolate(x, scale_factor=2, mode="nearest"))
    assert torch.equal(odd.cpu(), F.interpolate(x, size=(7, 5), mode="nearest"))


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size,scale", [((9, 13), None), (None, 2.0), (None, 0.6)])
def test_bilinear_upsampling_and_gradient_run_natively(align_corners, size, scale):
    x = torch.randn(2, 3, 6, 8, requires_grad=True)
    xp = x.detach().to("pto").requires_grad_()
    before = pypto_torch.fallback_ops()
    out = F.interpolate(xp, size=size, scale_factor=scale, mode="bilinear", align_corners=align_corners)
    out.sum().backward()
    assert pypto_torch.fallback_ops() == before
    want = F.interpolate(x, size=size, scale_factor=scale, mode="bilinear", align_corners=align_corners)
    want.sum().backward()
    assert_close(out.detach().cpu(), want.detach())
    assert_close(xp.grad.cpu(), x.grad)


def test_float64_bilinear_weights_are_doubles():
    """PyTorch computes the source positions and weights in the opmath type: double for
    float64 images (float weights were off by ~1e-6)."""
    op = next(op for op in OPS if op.variant_test_name == "bilinear")
    assert check_forward(op, torch.float64) > 0


def test_bad_pooling_arguments_raise_pytorchs_message():
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel size"):
        F.max_pool2d(torch.randn(1, 1, 4, 4, device="pto"), 2, padding=2)
    with pytest.raises(RuntimeError, match="Output size is too small"):
        F.avg_pool2d(torch.randn(1, 1, 2, 2, device="pto"), 3)
    assert F.max_pool2d(torch.ones(1, 1, 2, 2, device="pto"), 2).item() == 1.0
