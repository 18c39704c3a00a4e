"""Reductions run natively on pto (tsum, tamax, targmax, tany ...), matching CPU
on PyTorch's OpInfo samples, forward and backward."""

import pytest
import torch
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from error_bounds import assert_within_bound, bounded_opinfo_tests, gamma, sum_bound
from opinfo_sweep import assert_raises_as_cpu, opinfo_tests

NATIVE = {("sum", ""), ("mean", ""), ("amax", ""), ("amin", ""), ("argmax", ""), ("argmin", ""),
          ("any", ""), ("all", ""), ("max", "reduction_no_dim"), ("max", "reduction_with_dim"),
          ("min", "reduction_no_dim"), ("min", "reduction_with_dim"), ("max", "binary"),
          ("min", "binary"), ("prod", ""), ("linalg.vector_norm", ""), ("norm", ""), ("norm", "inf"),
          ("nn.functional.normalize", ""), ("aminmax", "")}
OPS = [op for op in op_db if (op.name, op.variant_test_name) in NATIVE]
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool]
FLOATING = [torch.float32, torch.float16, torch.bfloat16]
SUMS = [op for op in OPS if op.name in ("sum", "mean")]
OTHERS = [op for op in OPS if op not in SUMS]
# Products and norms accumulate too: per side, prod's relative error is gamma_{N-1};
# a p-norm's (sum of |x|^p: gamma_N, each power within 4u; the 1/p-th root multiplies
# that by up to 2 for OpInfo's orders down to 0.5, and adds 4u) at most
# 2 (gamma_N + 4u) + 4u; normalize's gamma_N / 2 + 2u. Twice for the two sides, with N
# the largest count OpInfo's samples reduce over: the float32 rtol below, where
# assert_close's default (1.3e-6) would hold for N <= 4 only. float16/bfloat16: both
# sides accumulate in float32 (the above, < 1e-4) and round once, u_out (|y1| + |y2|),
# 2^-10 and 2^-7 relative: within these.
REDUCED_PRECISION = {torch.float16: {"atol": 1e-3, "rtol": 2e-3}, torch.bfloat16: {"atol": 1e-2, "rtol": 1.6e-2}}
ACCUMULATING = {"prod", "linalg.vector_norm", "norm", "nn.functional.normalize"}
with torch.random.fork_rng():
    LARGEST_COUNT = max(sample.input.numel() for op in OTHERS if op.name in ACCUMULATING
                        for sample in op.sample_inputs("cpu", torch.float32))
u32 = torch.finfo(torch.float32).eps / 2
FLOAT32_ACCUMULATING = {"rtol": 2 * (2 * (gamma(LARGEST_COUNT) + 4 * u32) + 4 * u32), "atol": 1e-5}


def _id(op):
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def _tolerance(op, dtype):
    if dtype == torch.float32 and op.name in ACCUMULATING:
        return FLOAT32_ACCUMULATING
    return REDUCED_PRECISION.get(dtype, {})


def sum_sample_bound(op, args, kwargs, got, expected):
    """sum/mean of an OpInfo sample: error_bounds.sum_bound over the sample's dims."""
    x = args[0]
    dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
    return sum_bound(x, dim, kwargs.get("keepdim", False), got, expected, mean=op.name == "mean")


test_opinfo_forward_matches_cpu, test_opinfo_gradients_match_cpu = opinfo_tests(OTHERS, DTYPES, tolerance=_tolerance)
# sum and mean: floating results within 2 gamma_N sum|x| (mean: 2 gamma_{N+1} sum|x| / N),
# plus each side's final rounding for float16/bfloat16; integers and bools exactly.
test_opinfo_sums_match_cpu_within_their_bound, _ = bounded_opinfo_tests(SUMS, FLOATING, bound=sum_sample_bound)
test_opinfo_integer_sums_match_cpu, test_opinfo_sum_gradients_match_cpu = opinfo_tests(
    SUMS, [torch.int64, torch.bool])


@pytest.mark.parametrize("expression", [
    lambda x: x.sum(), lambda x: x.sum(1), lambda x: x.mean((0, 1), keepdim=True), lambda x: x.amax(-1),
    lambda x: x.max(1), lambda x: x.argmax(), lambda x: (x > 0).any(), lambda x: (x > 0).all(0),
])
def test_common_reductions_do_not_fall_back(expression):
    x = torch.randn(16, 32, device="pto")
    before = pypto_torch.fallback_ops()
    expression(x)
    assert pypto_torch.fallback_ops() == before


@pytest.mark.parametrize("shape,dims", [((4096, 512), 1), ((4096, 512), 0), ((64, 33, 17), (0, 2)),
                                        ((300000,), 0), ((7, 1, 5), 1)])
def test_large_and_strided_reductions(shape, dims):
    """Sums within 2 gamma_N sum|x|, N the count summed (512 to 300000 here); amax exactly."""
    x = torch.randn(shape, dtype=torch.float64).float()
    p = x.to("pto")
    assert_within_bound(p.sum(dims).cpu(), x.sum(dims), sum_bound(x, dims), "sum")
    assert_close(p.amax(dims).cpu(), x.amax(dims), rtol=0, atol=0)
    transposed = x.transpose(0, -1)
    assert_within_bound(p.transpose(0, -1).sum(dims).cpu(), transposed.sum(dims), sum_bound(transposed, dims),
                        "sum of the transpose")


@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "transposed"])
def test_reductions_of_few_outputs_split_over_the_cores(layout):
    """A reduction to fewer outputs than cores, each of over 2^20 elements, folds its
    parts on every core and merges them in order (kernels/reduce.cpp), the reduced
    dimensions visited in memory order: sums within 2 gamma_N sum|x|, extrema exact, a
    NaN or the one True in the last part found, prod and argmax as the CPU's."""
    torch.manual_seed(0)
    x = torch.randn(16, 64, 33, 40, dtype=torch.float64).float()
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    elif layout == "transposed":
        x = x.transpose(1, 3)
    p = x.to("pto")
    for dims in (None, (0, 2, 3), (0, 1, 2, 3)):
        expected = x.sum() if dims is None else x.sum(dims)
        got = (p.sum() if dims is None else p.sum(dims)).cpu()
        assert_within_bound(got, expected, sum_bound(x, dims), f"sum over {dims}")
    assert_close(p.amax().cpu(), x.amax(), rtol=0, atol=0)
    assert_close(p.amin((0, 2, 3)).cpu(), x.amin((0, 2, 3)), rtol=0, atol=0)
    assert torch.equal(p.argmax().cpu(), x.argmax())
    ones = torch.ones_like(x) + x * 1e-7
    assert_close(ones.to("pto").prod().cpu(), ones.prod(), rtol=2 * gamma(x.numel()), atol=0)
    last = x.clone()
    last[-1, -1, -1, -1] = float("nan")
    assert torch.isnan(last.to("pto").amax().cpu())
    flags = torch.zeros_like(x, dtype=torch.bool)
    flags[-1, -1, -1, -1] = True
    assert flags.to("pto").any().item() and not flags.to("pto").all().item()
    assert (~flags).to("pto").any().item() and not (~flags).to("pto").all().item()


@pytest.mark.parametrize("rows", [1, 3, 4, 5, 67, 130])
def test_column_extrema_fold_rows_in_fours_exactly(rows):
    """amax/amin over dim 0 fold four rows per pass over their accumulators: a NaN, an
    infinity or a -0.0 in any row, the last rows of a count not a multiple of four
    included, gives the CPU's result exactly."""
    base = torch.randn(rows, 37, generator=torch.Generator().manual_seed(rows))
    for row in range(rows):
        x = base.clone()
        x[row, 0], x[row, 1], x[row, 2], x[row, 3] = float("nan"), float("inf"), -float("inf"), -0.0
        for reduction in (torch.amax, torch.amin):
            assert_close(reduction(x.to("pto"), 0).cpu(), reduction(x, 0), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("length", [7, 33, 64, 100])
def test_row_extrema_flag_a_nan_at_every_position(length):
    """amax/amin over rows flag NaNs one compare per pair of vectors, four vectors per
    step, then a vector at a time, then element by element: a NaN at any position of a
    row (an infinity beside it) gives the CPU's result, as do the rows without one."""
    base = torch.randn(4, length, generator=torch.Generator().manual_seed(length))
    for position in range(length):
        x = base.clone()
        x[1, position] = float("nan")
        x[2, position] = float("inf")
        x[3, position] = -float("inf")
        for reduction in (torch.amax, torch.amin):
            assert_close(reduction(x.to("pto"), 1).cpu(), reduction(x, 1), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("rows", [3, 67, 130])
def test_column_sums_add_rows_in_order(rows):
    """A column sum adds its rows in row order into float partial sums of 64 rows, each
    added into a double (kernels/reduce.cpp, the CPU's cascade): folding four rows per
    pass over the partials keeps that order, so these exact float32 sums are its bits."""
    x = torch.randn(rows, 37, generator=torch.Generator().manual_seed(rows))
    total = torch.zeros(37, dtype=torch.float64)
    for first in range(0, rows, 64):
        partial = torch.zeros(37)
        for row in x[first:first + 64]:
            partial = partial + row
        total += partial.double()
    assert torch.equal(x.to("pto").sum(0).cpu(), total.float())


def test_nan_propagates_through_max_and_argmax():
    x = torch.tensor([[1.0, float("nan"), 3.0], [2.0, 5.0, 4.0]])
    p = x.to("pto")
    assert_close(p.amax(1).cpu(), x.amax(1), equal_nan=True)
    assert torch.equal(p.argmax(1).cpu(), x.argmax(1))


def test_empty_reductions_follow_torch():
    empty = torch.empty(0, 3, device="pto")
    assert torch.equal(empty.sum(0).cpu(), torch.zeros(3))
    with pytest.raises((RuntimeError, IndexError)):
        empty.amax(0)
    assert torch.ones(2, device="pto").sum().item() == 2  # the device stays usable


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool], ids=str)
def test_aminmax_runs_natively_and_refuses_as_the_cpu(dtype):
    """aminmax (and its out=) is amin and amax: each dim and keepdim, NaN kept as the CPU
    keeps it; an empty reduction raises the CPU's error."""
    x = torch.tensor([[3.0, -1.0, float("nan")], [0.5, 7.0, -2.0]]).to(dtype)
    before = pypto_torch.fallback_ops()
    for dim, keepdim in ((None, False), (None, True), (0, False), (1, True), (-1, False)):
        want = torch.aminmax(x, dim=dim, keepdim=keepdim)
        got = torch.aminmax(x.to("pto"), dim=dim, keepdim=keepdim)
        assert_close(got.min.cpu(), want.min, equal_nan=True, rtol=0, atol=0)
        assert_close(got.max.cpu(), want.max, equal_nan=True, rtol=0, atol=0)
        low, high = torch.empty(5, dtype=dtype, device="pto"), torch.empty(0, dtype=dtype, device="pto")
        torch.aminmax(x.to("pto"), dim=dim, keepdim=keepdim, out=(low, high))
        assert torch.equal(low.cpu().nan_to_num(), want.min.nan_to_num()) and low.shape == want.min.shape
    assert pypto_torch.fallback_ops() == before
    assert_raises_as_cpu(lambda d: torch.aminmax(torch.empty(0, 3, dtype=dtype, device=d), dim=0), IndexError)

