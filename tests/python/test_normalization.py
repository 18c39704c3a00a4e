"""layer_norm, batch_norm and rms_norm (its _fused_rms_norm, which the CPU runs as a
composite of native pieces) run on pto without the CPU fallback, forward and backward,
matching CPU.

The statistics are two-pass here and Welford on the CPU: forward results compare within
error_bounds.normalization_bounds / rms_norm_bound, first-order bounds that grow with the
count reduced over (gamma_{N+6} max|x| for the mean, gamma_{N+10} for the variance)."""

import copy

import pytest
import torch
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from error_bounds import assert_within_bound, bounded_opinfo_tests, normalization_bounds, rms_norm_bound
from opinfo_sweep import check_forward, opinfo_tests

OPS = [op for op in op_db if op.name in ("nn.functional.layer_norm", "nn.functional.rms_norm",
                                        "nn.functional.batch_norm") and op.variant_test_name == ""]
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
# native_batch_norm's output and statistics at float16/bfloat16, a tuple the bounds above
# do not take: the output's final rounding on each side, u_out (|y1| + |y2|) (2^-11 and
# 2^-8 relative), plus the float32 statistics' first-order bound (N <= 75 in OpInfo's
# samples, values in [-9, 9]: 2 gamma_85 x 9 ~ 1e-4, times r), within these.
TOLERANCES = {torch.float16: {"rtol": 2e-3, "atol": 2e-3}, torch.bfloat16: {"rtol": 1.6e-2, "atol": 1.6e-2}}


def sample_bound(op, args, kwargs, got, expected):
    """The bound of an OpInfo sample of layer_norm, rms_norm or batch_norm."""
    x = args[0]
    if op.name == "nn.functional.layer_norm":
        shape = args[1]
        weight, bias = (list(args[2:]) + [None, None])[:2]
        dims = tuple(range(x.dim() - len(shape), x.dim()))
        return normalization_bounds(x, dims, weight, bias, kwargs.get("eps", 1e-5), got, expected)[0]
    if op.name == "nn.functional.rms_norm":
        shape = args[1]
        weight = args[2] if len(args) > 2 else None
        return rms_norm_bound(x, tuple(range(x.dim() - len(shape), x.dim())), weight, kwargs.get("eps"), got, expected)
    running_mean, running_var, weight, bias = (list(args[1:]) + [None] * 4)[:4]
    weight, bias = kwargs.get("weight", weight), kwargs.get("bias", bias)
    eps = kwargs.get("eps", 1e-5)
    dims = tuple(d for d in range(x.dim()) if d != 1)
    if kwargs.get("training", False) or running_mean is None:
        # The CPU's batch norm gathers float16/bfloat16 statistics at that precision.
        return normalization_bounds(x, dims, weight, bias, eps, got, expected, per_channel=True,
                                    statistics_dtype=x.dtype if x.dtype in (torch.float16, torch.bfloat16) else None)[0]
    return normalization_bounds(x, dims, weight, bias, eps, got, expected, mean=running_mean, var=running_var,
                                per_channel=True)[0]


test_opinfo_forward_matches_cpu, _ = bounded_opinfo_tests(OPS, DTYPES, bound=sample_bound)
# Gradients (float32): the backward's two row sums (of g w and of g w x^), N <= 36 terms in
# OpInfo's samples, values in [-9, 9], give a first-order bound of about
# 2 gamma_40 r (|g w| + |x^| sum|g w x^| / N) ~ 4.8e-6 x 20 ~ 1e-4 where the terms are
# largest (r ~ 0.2 for their variance ~27); atol 2e-4 on top of rtol 1e-4 is not below it.
_, test_opinfo_gradients_match_cpu = opinfo_tests(OPS, DTYPES, gradient_tolerance={"rtol": 1e-4, "atol": 2e-4})


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


def test_rms_norm_is_one_trmsnorm_and_its_gradient_runs_on_pto():
    """F.rms_norm calls aten._fused_rms_norm, which the CPU runs as its composite (pow, mean,
    add, rsqrt, mul): on pto it is one trmsnorm beside the saved 1 / rms, and nothing is read
    back to the host; its gradient (_fused_rms_norm_backward, which the CPU has no kernel
    for) runs on pto too. Results against the CPU's composite and its autograd within the
    bounds of the OpInfo tests above (the output: rms_norm_bound; gradients: their note)."""
    generator = torch.Generator().manual_seed(5)
    x, weight, grad = (torch.randn(*shape, generator=generator) for shape in ((6, 7, 32), (32,), (6, 7, 32)))
    x_pto, weight_pto = (t.to("pto").requires_grad_() for t in (x, weight))
    before = pypto_torch.fallback_ops()
    with torch.profiler.profile() as profile:
        y_pto = torch.nn.functional.rms_norm(x_pto, [32], weight_pto)
        torch.pto.synchronize()
    names = {event.name for event in profile.events()}
    assert "trmsnorm" in names and not names & {"aten::item", "aten::pow", "aten::rsqrt"}, sorted(names)
    y_pto.backward(grad.to("pto"))
    assert pypto_torch.fallback_ops() == before

    x_cpu, weight_cpu = (t.clone().requires_grad_() for t in (x, weight))
    y_cpu = torch.nn.functional.rms_norm(x_cpu, [32], weight_cpu)
    y_cpu.backward(grad)
    assert_within_bound(y_pto.detach().cpu(), y_cpu.detach(),
                        rms_norm_bound(x, (-1,), weight, None, y_pto.detach().cpu(), y_cpu.detach()))
    for got, want in ((x_pto.grad, x_cpu.grad), (weight_pto.grad, weight_cpu.grad)):
        assert_close(got.cpu(), want, rtol=1e-4, atol=2e-4)


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
    u = torch.finfo(torch.float32).eps / 2
    mean_bound = var_bound = torch.zeros(3, dtype=torch.float64)
    for _ in range(3):
        if training:
            stats_bounds = normalization_bounds(x, (0, 2, 3), cpu.weight, cpu.bias, cpu.eps, per_channel=True)
        else:
            stats_bounds = normalization_bounds(x, (0, 2, 3), cpu.weight, cpu.bias, cpu.eps, per_channel=True,
                                                mean=cpu.running_mean, var=cpu.running_var)
        assert_within_bound(pto(x.to("pto")).cpu().detach(), cpu(x).detach(), stats_bounds[0], "batch norm")
        if training:
            # running = (1 - m) running + m stat, the variance unbiased (n / (n - 1)): each
            # update carries the last one's bound and adds m times the statistic's (the
            # variance's: 2 r^-3 dr, from r's bound) and three roundings of the result.
            n = x.numel() // 3
            var = x.double().var((0, 2, 3), unbiased=False)
            r_bound = stats_bounds[2].value.flatten()
            var_stat_bound = 2 * (var + cpu.eps) ** 1.5 * r_bound * n / (n - 1)
            mean_bound = (1 - cpu.momentum) * mean_bound + cpu.momentum * stats_bounds[1].value.flatten() \
                + 6 * u * cpu.running_mean.double().abs()
            var_bound = (1 - cpu.momentum) * var_bound + cpu.momentum * var_stat_bound \
                + 6 * u * cpu.running_var.double().abs()
    assert pypto_torch.fallback_ops() == before
    from error_bounds import Bound
    assert_within_bound(pto.running_mean.cpu(), cpu.running_mean, Bound(mean_bound, "running mean's"), "running mean")
    assert_within_bound(pto.running_var.cpu(), cpu.running_var, Bound(var_bound, "running var's"), "running var")


def _to_pto(t):
    return None if t is None else t.to("pto")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("length", [1, 3, 17, 1000])
@pytest.mark.parametrize("affine", ["both", "none", "weight", "bias"])
def test_native_layer_norm_matches_cpu(dtype, length, affine):
    torch.manual_seed(0)
    x = torch.randn(7, length, dtype=dtype) * 3 + 2
    weight = torch.randn(length, dtype=dtype) if affine in ("both", "weight") else None
    bias = torch.randn(length, dtype=dtype) if affine in ("both", "bias") else None
    expected = torch.native_layer_norm(x, (length,), weight, bias, 1e-5)
    actual = torch.native_layer_norm(x.to("pto"), (length,), _to_pto(weight), _to_pto(bias), 1e-5)
    # (A row of one element normalises to 0, exactly here; the CPU's float16/bfloat16
    # kernel leaves its rounding noise (~1e-5) there: the mean's bound, times r.)
    bounds = normalization_bounds(x, (1,), weight, bias, 1e-5, actual[0].cpu(), expected[0])
    for a, e, bound, what in zip(actual, expected, bounds, ("output", "mean", "rstd")):
        assert a.dtype == e.dtype and a.shape == e.shape
        assert_within_bound(a.cpu(), e, bound, what)


@pytest.mark.parametrize("eps", [0.0, 1e-5, 0.5])
def test_layer_norm_over_several_dims_non_contiguous_input_and_eps(eps):
    torch.manual_seed(0)
    x = torch.randn(6, 5, 9).transpose(0, 2)  # [9, 5, 6], not contiguous
    weight, bias = torch.randn(5, 6), torch.randn(5, 6)
    expected = torch.nn.functional.layer_norm(x, (5, 6), weight, bias, eps)
    actual = torch.nn.functional.layer_norm(x.to("pto"), (5, 6), weight.to("pto"), bias.to("pto"), eps)
    assert_within_bound(actual.cpu(), expected, normalization_bounds(x, (1, 2), weight, bias, eps)[0], "over (5, 6)")
    expected = torch.nn.functional.layer_norm(x, (6,), weight[0], bias[0], eps)
    actual = torch.nn.functional.layer_norm(x.to("pto"), (6,), weight[0].to("pto"), bias[0].to("pto"), eps)
    assert_within_bound(actual.cpu(), expected, normalization_bounds(x, (2,), weight[0], bias[0], eps)[0], "over 6")


def test_layer_norm_rows_with_nan_and_inf_and_empty_inputs():
    x = torch.randn(4, 8)
    x[1, 3] = float("nan")
    x[2, 0] = float("inf")
    expected = torch.native_layer_norm(x, (8,), None, None, 1e-5)
    actual = torch.native_layer_norm(x.to("pto"), (8,), None, None, 1e-5)
    assert_close(actual[0].cpu(), expected[0], equal_nan=True)
    assert_close(actual[2].cpu(), expected[2], equal_nan=True)
    # The mean of the row holding inf is inf here (a sum), NaN on the CPU (Welford's
    # updates subtract inf from inf); the other rows' agree.
    assert_close(actual[1].cpu()[[0, 1, 3]], expected[1][[0, 1, 3]], equal_nan=True)
    assert actual[1].cpu()[2].item() == float("inf")
    empty = torch.randn(0, 8)
    for a, e in zip(torch.native_layer_norm(empty.to("pto"), (8,), None, None, 1e-5),
                    torch.native_layer_norm(empty, (8,), None, None, 1e-5)):
        assert a.shape == e.shape


def test_layer_norm_mixed_dtype_parameters_keep_float32_statistics():
    torch.manual_seed(0)
    x = torch.randn(5, 12, dtype=torch.bfloat16)
    weight, bias = torch.randn(12), torch.randn(12)
    expected = torch.native_layer_norm(x, (12,), weight, bias, 1e-5)
    actual = torch.native_layer_norm(x.to("pto"), (12,), weight.to("pto"), bias.to("pto"), 1e-5)
    bound = normalization_bounds(x, (1,), weight, bias, 1e-5, actual[0].cpu(), expected[0])[0]
    assert_within_bound(actual[0].cpu(), expected[0], bound)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_layer_norm_gradients_match_cpu(dtype):
    torch.manual_seed(0)
    x = torch.randn(6, 33, dtype=dtype, requires_grad=True)
    weight = torch.randn(33, dtype=dtype, requires_grad=True)
    bias = torch.randn(33, dtype=dtype, requires_grad=True)
    grad = torch.randn(6, 33, dtype=dtype)
    torch.nn.functional.layer_norm(x, (33,), weight, bias, 1e-5).backward(grad)
    leaves = [t.detach().to("pto").requires_grad_() for t in (x, weight, bias)]
    torch.nn.functional.layer_norm(leaves[0], (33,), leaves[1], leaves[2], 1e-5).backward(grad.to("pto"))
    # The backward sums N = 33 products per row (d weight, d bias: 6 rows): first order,
    # about 2 gamma_40 (r |g w| + r |x^| sum|g w x^| / N) ~ 4.8e-6 x 10 for randn values
    # and r ~ 1, which assert_close's float32 defaults (rtol 1.3e-6, atol 1e-5) do not cover
    # where the terms cancel: atol 1e-4. float64: gamma_40 ~ 4.4e-15 x 10, within its defaults.
    tolerance = {"rtol": 1e-5, "atol": 1e-4} if dtype == torch.float32 else {}
    for leaf, reference in zip(leaves, (x, weight, bias)):
        assert_close(leaf.grad.cpu(), reference.grad, **tolerance)


@pytest.mark.parametrize("offset", [1e4, -3e5])
def test_layer_norm_of_rows_far_from_zero_keeps_their_variance(offset):
    torch.manual_seed(0)
    x = torch.randn(16, 1000) + offset  # a one-pass sum of squares would cancel here
    x[3, 0] = offset + 40.0  # an outlier where the row's statistics start
    reference = x.double()
    mean = reference.mean(-1, keepdim=True)
    rstd = ((reference - mean).pow(2).mean(-1, keepdim=True) + 1e-5).rsqrt()
    _, actual_mean, actual_rstd = torch.native_layer_norm(x.to("pto"), (1000,), None, None, 1e-5)
    assert_close(actual_mean.cpu().double(), mean, rtol=1e-6, atol=0)
    assert_close(actual_rstd.cpu().double(), rstd, rtol=1e-4, atol=0)
