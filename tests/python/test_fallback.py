"""The CPU fallback: every op works on pto, and it says which ones fell back."""

import pytest
import torch
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch


def test_fallback_ops_lists_what_ran_on_cpu():
    x = torch.ones(3, device="pto")
    torch.histc(x)
    assert pypto_torch.fallback_ops().get("aten::histc", 0) >= 1


def test_default_mode_warns_once_per_op(python):
    result = python("""
        import warnings, torch
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as caught:
            x = torch.ones(3, device="pto")
            torch.histc(x); torch.histc(x)
        print(sum("histc" in str(w.message) for w in caught))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"


def test_error_mode_refuses_to_fall_back(python):
    result = python("""
        import torch
        x = torch.empty(3, device="pto")   # native: fine
        try:
            torch.histc(x)
        except NotImplementedError as error:
            print("refused:", error)
        print(x.cpu().shape)               # the device stays usable
    """, PTO_FALLBACK="error")
    assert result.returncode == 0, result.stderr
    assert "refused: aten::histc" in result.stdout and "PTO_FALLBACK=error" in result.stdout
    assert "torch.Size([3])" in result.stdout


def test_mode_can_be_switched_at_run_time():
    previous = pypto_torch.set_fallback_mode("error")
    try:
        with pytest.raises(NotImplementedError):
            torch.histc(torch.ones(2, device="pto"))
        with pypto_torch.fallback_mode("silent"):
            torch.histc(torch.ones(2, device="pto"))
    finally:
        pypto_torch.set_fallback_mode(previous)
    with pytest.raises(ValueError):
        pypto_torch.set_fallback_mode("loud")


def test_view_ops_stay_views_of_device_memory():
    x = torch.arange(12.0).to("pto")
    windows = x.unfold(0, 4, 2)
    assert windows.data_ptr() == x.data_ptr()
    x.add_(1)
    assert torch.equal(windows.cpu(), (torch.arange(12.0) + 1).unfold(0, 4, 2))
    real = torch.view_as_real(torch.randn(3, dtype=torch.complex64, device="pto"))
    assert real.dtype == torch.float32 and real.shape == (3, 2)


# A sweep over PyTorch's own OpInfo samples: through the fallback, every op's
# pto result must equal its CPU result.
SWEPT = ["abs", "add", "sub", "mul", "div", "exp", "log", "sqrt", "sin", "tanh", "sigmoid", "pow",
         "matmul", "mm", "bmm", "sum", "mean", "amax", "argmax", "var", "cumsum", "softmax",
         "log_softmax", "nn.functional.relu", "nn.functional.gelu", "nn.functional.layer_norm",
         "nn.functional.linear", "nn.functional.embedding", "cat", "stack", "transpose", "flip",
         "where", "clamp", "gather", "index_select", "sort", "topk", "tril", "masked_fill",
         "nn.functional.conv2d", "nn.functional.max_pool2d", "eq", "lt", "maximum", "logsumexp"]
OPS = [op for op in op_db if op.name in SWEPT and op.variant_test_name == ""]
# On pto, layer_norm reaches the CPU through torch's composite decomposition,
# while CPU tensors take CPU's fused kernel: same maths, other rounding.
TOLERANCES = {"nn.functional.layer_norm": {"atol": 2e-4, "rtol": 2e-4}}


def _to(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    return value


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_opinfo_samples_match_cpu(op):
    checked = 0
    for sample in op.sample_inputs("cpu", torch.float32, requires_grad=False):
        expected = op(sample.input, *sample.args, **sample.kwargs)
        actual = op(_to(sample.input, "pto"), *_to(sample.args, "pto"), **_to(sample.kwargs, "pto"))
        assert_close(_to(actual, "cpu"), expected, equal_nan=True, **TOLERANCES.get(op.name, {}))
        checked += 1
        if checked == 8:
            break
    assert checked > 0
