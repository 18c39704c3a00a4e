"""torch.ops.pto: the origin's operators as a PyTorch library, with CPU, pto
and Meta kernels and autograd; torch.library.opcheck passes for every one."""

import pytest
import torch
import torch.nn.functional as F
from torch.library import opcheck
from torch.testing import assert_close

import pypto_torch


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
    assert_close(op(*args), expected, rtol=1e-5, atol=1e-5)
    before = pypto_torch.fallback_ops()
    result = op(*_on(args, "pto"))
    assert result.device.type == "pto"
    assert_close(result.cpu(), expected, rtol=1e-5, atol=1e-5)
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
    op(*cpu_args).sum().backward()
    op(*pto_args).sum().backward()
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
