"""torch.ops.pto: the origin's operators as a PyTorch library, with CPU, pto
and Meta kernels and autograd; torch.library.opcheck passes for every one."""

import pytest
import torch
import torch.nn.functional as F
from torch.library import opcheck
from torch.testing import assert_close

import pypto_torch
from error_bounds import (assert_within_bound, matmul_bound, multilinear_gradient_bounds, normalization_bounds,
                          normalize_bound, rms_norm_bound, softmax_bound, sum_bound)


def _x(*shape):
    return torch.randn(*shape)


# name -> (arguments, the same computation in plain torch)
CASES = {
    "add": ((_x(4, 6), _x(4, 6)), torch.add),
    "sub": ((_x(4, 6), _x(6)), torch.sub),
    "mul": ((_x(4, 6), _x(4, 1)), torch.mul),
    "div": ((_x(4, 6), _x(4, 6).abs() + 0.5), torch.div),
    "exp": ((_x(4, 6),), torch.exp),
    "log": ((_x(4, 6).abs() + 0.1,), torch.log),
    "relu": ((_x(4, 6),), torch.relu),
    "gelu": ((_x(4, 6), "tanh"), lambda x, a: F.gelu(x, approximate=a)),
    "matmul": ((_x(3, 4, 5), _x(5, 2)), torch.matmul),
    "reduce_sum": ((_x(4, 6), 1, True), lambda x, a, k: x.sum(a, keepdim=k)),
    "reduce_mean": ((_x(4, 6), 0), lambda x, a: x.mean(a)),
    "reduce_max": ((_x(4, 6), 1), lambda x, a: x.amax(a)),
    "reduce_min": ((_x(4, 6), -1, True), lambda x, a, k: x.amin(a, keepdim=k)),
    "softmax": ((_x(4, 6), 0), lambda x, a: torch.softmax(x, a)),
    "transpose": ((_x(4, 6, 2), 0, 2), lambda x, a, b: x.transpose(a, b)),
    "normalize": ((_x(4, 6), -1), lambda x, a: F.normalize(x, dim=a, eps=1e-12)),
    "layer_norm": ((_x(4, 6), [6], _x(6), _x(6)), lambda x, s, w, b: F.layer_norm(x, s, w, b)),
    "rms_norm": ((_x(4, 6), [6], _x(6)), lambda x, s, w: F.rms_norm(x, s, w, eps=1e-6)),
}


# The ops that accumulate compare within their error_bounds bound (growing with the count
# summed); the elementwise ones within rtol = atol = 1e-5, a few ulps.
BOUNDS = {
    "matmul": lambda a, b: matmul_bound(a, b),
    "reduce_sum": lambda x, a, k: sum_bound(x, a, k),
    "reduce_mean": lambda x, a: sum_bound(x, a, mean=True),
    "softmax": lambda x, a: softmax_bound(x, a),
    "normalize": lambda x, a: normalize_bound(x, a),
    "layer_norm": lambda x, s, w, b: normalization_bounds(x, (-1,), w, b)[0],
    "rms_norm": lambda x, s, w: rms_norm_bound(x, (-1,), w, 1e-6),
}


def _assert_matches(name, result, args, expected):
    if name in BOUNDS:
        assert_within_bound(result, expected, BOUNDS[name](*args), name)
    else:
        assert_close(result, expected, rtol=1e-5, atol=1e-5)


def _on(args, device):
    return tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)


def test_the_library_has_the_origins_ops():
    for name in CASES:
        assert hasattr(torch.ops.pto, name)


@pytest.mark.parametrize("name", list(CASES))
def test_cpu_and_pto_match_plain_torch(name):
    args, reference = CASES[name]
    op = getattr(torch.ops.pto, name)
    expected = reference(*args)
    _assert_matches(name, op(*args), args, expected)
    before = pypto_torch.fallback_ops()
    result = op(*_on(args, "pto"))
    assert result.device.type == "pto"
    _assert_matches(name, result.cpu(), args, expected)
    assert pypto_torch.fallback_ops() == before, f"pto.{name} left the device"


@pytest.mark.parametrize("name", list(CASES))
def test_meta_kernels_give_shapes(name):
    args, reference = CASES[name]
    result = getattr(torch.ops.pto, name)(*_on(args, "meta"))
    assert result.device.type == "meta"
    assert result.shape == reference(*args).shape


@pytest.mark.parametrize("name", [n for n in CASES if n != "transpose"])
def test_gradients_on_pto_match_cpu(name):
    args, _ = CASES[name]
    op = getattr(torch.ops.pto, name)
    cpu_args = tuple(a.clone().requires_grad_() if isinstance(a, torch.Tensor) else a for a in args)
    pto_args = tuple(a.detach().to("pto").requires_grad_() if isinstance(a, torch.Tensor) else a for a in args)
    out = op(*cpu_args)
    out.sum().backward()
    op(*pto_args).sum().backward()
    if name == "matmul":  # sums of products again: within multilinear_gradient_bounds
        bounds = multilinear_gradient_bounds(torch.matmul, args, {}, torch.ones(out.shape))
        for want, got, bound in zip(cpu_args, pto_args, bounds):
            assert_within_bound(got.grad.cpu(), want.grad, bound, "matmul's gradient")
        return
    # The rest sum over at most 6 elements (24 for reduce_*, whose gradients are exact):
    # softmax's and the norms' backward add 6 terms of size up to ~|x^|^2 r, within
    # 2 gamma_8 x 10 ~ 1e-5 to first order for these randn rows; rtol = atol = 1e-4 is above.
    for want, got in zip(cpu_args, pto_args):
        if isinstance(want, torch.Tensor):
            assert_close(got.grad.cpu(), want.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", ["cpu", "pto"])
@pytest.mark.parametrize("name", list(CASES))
def test_opcheck(name, device):
    args, _ = CASES[name]
    opcheck(getattr(torch.ops.pto, name), _on(args, device))


def test_bad_input_is_a_clear_error():
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.ops.pto.matmul(torch.ones(2, 3, device="pto"), torch.ones(4, 2, device="pto"))
    assert torch.ops.pto.reduce_sum(torch.ones(3, device="pto"), 0).item() == 3
