"""layer_norm, batch_norm (and rms_norm, which PyTorch decomposes into native
pieces) run on pto without the CPU fallback, forward and backward, matching CPU."""

import copy

import pytest
import torch
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from opinfo_sweep import check_forward, opinfo_tests

OPS = [op for op in op_db if op.name in ("nn.functional.layer_norm", "nn.functional.rms_norm",
                                        "nn.functional.batch_norm") and op.variant_test_name == ""]
# The statistics are two-pass here and Welford on the CPU: equal maths, rounding
# apart by a few ulps on badly scaled samples; float16/bfloat16 by one ulp.
TOLERANCES = {torch.float32: {"rtol": 1e-5, "atol": 1e-5}, torch.float64: {},
              torch.float16: {"rtol": 2e-3, "atol": 2e-3}, torch.bfloat16: {"rtol": 1.6e-2, "atol": 1.6e-2}}


test_opinfo_forward_matches_cpu, test_opinfo_gradients_match_cpu = opinfo_tests(
    OPS, list(TOLERANCES), tolerance=lambda op, dtype: TOLERANCES[dtype],
    gradient_tolerance={"rtol": 1e-4, "atol": 1e-4})


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_native_batch_norm_saves_statistics_in_the_cpus_dtype(dtype):
    """The input's dtype, or float32 when the parameters are float32 (mixed type)."""
    op = next(op for op in op_db if op.name == "native_batch_norm")
    assert check_forward(op, dtype, **TOLERANCES[dtype]) > 0
    x = torch.randn(4, 3, 5).to(dtype)
    for parameters in (dtype, torch.float32):
        weight, bias, mean, var = (torch.ones(3, dtype=parameters) for _ in range(4))
        want = torch.native_batch_norm(x, weight, bias, mean, var, True, 0.1, 1e-5)
        got = torch.native_batch_norm(*(t.to("pto") for t in (x, weight, bias, mean, var)), True, 0.1, 1e-5)
        assert [t.dtype for t in got] == [t.dtype for t in want]


def test_layer_norm_is_native():
    layer = torch.nn.LayerNorm(16).to("pto")
    x = torch.randn(4, 16, device="pto", requires_grad=True)
    before = pypto_torch.fallback_ops()
    layer(x).sum().backward()
    assert pypto_torch.fallback_ops() == before


def test_normalized_shape_mismatch_is_a_clear_error():
    with pytest.raises(RuntimeError, match="expected input with shape"):
        torch.nn.functional.layer_norm(torch.ones(2, 3, device="pto"), (4,))


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_module_updates_running_stats_like_cpu(training):
    torch.manual_seed(0)
    cpu = torch.nn.BatchNorm2d(3, momentum=0.3).train(training)
    cpu.running_mean.uniform_()
    cpu.running_var.uniform_(0.5, 1.5)
    pto = copy.deepcopy(cpu).to("pto")
    x = torch.randn(4, 3, 5, 5)
    before = pypto_torch.fallback_ops()
    for _ in range(3):
        assert_close(pto(x.to("pto")).cpu(), cpu(x), rtol=1e-5, atol=1e-5)
    assert pypto_torch.fallback_ops() == before
    assert_close(pto.running_mean.cpu(), cpu.running_mean)
    assert_close(pto.running_var.cpu(), cpu.running_var)
