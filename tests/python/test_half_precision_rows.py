"""float16/bfloat16 on the kernels' vector path (csrc/runtime/sim/kernels/vector_widen-inl.h):
runs are widened to float a vector at a time and rounded back to nearest even, bit-exact with
the CPU, on every vector target (PTO_SIM_VECTOR_ISA caps an AVX-512 host to the others);
softmax and log_softmax of float16/bfloat16 rows are within an ulp of the exact value, and
their sums over rows and columns match the CPU's."""
import os
import pathlib
import subprocess
import sys

import pytest
import torch

import pypto_torch  # noqa: F401

HALVES = [torch.float16, torch.bfloat16]


def every_value(dtype: torch.dtype) -> torch.Tensor:
    """All 65,536 values of a 16-bit float type, NaNs and infinities included."""
    return torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)


def assert_same_bits(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal bit for bit where the CPU's value is a number; NaN where it is NaN (a NaN's
    payload is the converting instruction's choice, on the CPU too)."""
    actual, expected = actual.cpu(), expected.cpu()
    nan = expected.isnan()
    assert torch.equal(actual.isnan(), nan)
    assert torch.equal(actual[~nan].view(torch.int16), expected[~nan].view(torch.int16))


@pytest.mark.parametrize("dtype", HALVES)
def test_every_value_widens_and_rounds_back_unchanged(dtype):
    # a + 0 * (0 / 1) computes in float: each value widened, then rounded back to itself.
    a = every_value(dtype)
    zeros, ones = torch.zeros_like(a), torch.ones_like(a)
    expected = torch.addcdiv(a, zeros, ones, value=0)
    assert_same_bits(torch.addcdiv(a.to("pto"), zeros.to("pto"), ones.to("pto"), value=0), expected)


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("divisor", [3.0, 0.1, 1e-3, 6e4])
def test_every_quotient_rounds_to_nearest_even_as_on_the_cpu(dtype, divisor):
    # 0 + x / d in float, rounded once: ties, subnormals, overflow to infinity and NaNs
    # exercise the rounding back (d is a value of the type; the quotient is IEEE's on both sides).
    x = every_value(dtype)
    zeros, d = torch.zeros_like(x), torch.full_like(x, divisor)
    expected = torch.addcdiv(zeros, x, d)
    assert_same_bits(torch.addcdiv(zeros.to("pto"), x.to("pto"), d.to("pto")), expected)


@pytest.mark.parametrize("dtype", HALVES)
def test_vector_math_of_special_values_matches_the_cpu(dtype):
    x = torch.tensor([float("inf"), -float("inf"), float("nan"), 0.0, -0.0, 6e-8, -6e-8, 1e-5, 60000.0, -60000.0,
                      11.0, -11.0, 0.5] * 3, dtype=dtype)
    for op in (torch.exp, torch.tanh, torch.sigmoid):
        torch.testing.assert_close(op(x.to("pto")).cpu(), op(x), equal_nan=True, msg=op.__name__)


def ulp(dtype: torch.dtype) -> float:
    """The spacing of the type's values at 1: a rounding to it is within half of this, relatively."""
    return torch.finfo(dtype).eps


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("shape", [(64, 1000), (3, 4097), (5, 7)])
@pytest.mark.parametrize("op", [torch.softmax, torch.log_softmax])
def test_softmax_rows_are_within_an_ulp_of_the_exact_value(dtype, shape, op):
    # Computed in float and rounded once: the float result is within a few float ulps of
    # the exact one (Sleef's exp within 1 ulp, a float sum; log_softmax as (x - max) -
    # log(sum), which does not cancel), far below one ulp of the 16-bit result, so the
    # result is within one ulp of the float64 value. The CPU's float16 log_softmax is not:
    # in this very test it is 3% off on outputs near 0, so the reference is float64.
    generator = torch.Generator().manual_seed(0)
    x = (4 * torch.randn(shape, generator=generator)).to(dtype)
    x[0, :3] = torch.tensor([float("inf"), -float("inf"), 1.0])  # a row with an infinity
    x[1, :] = -float("inf")  # a row of -inf
    x[-1, -1] = float("nan")
    exact = op(x.double(), -1)
    torch.testing.assert_close(op(x.to("pto"), -1).cpu().double(), exact, rtol=ulp(dtype), atol=ulp(dtype) * 2**-10,
                               equal_nan=True)
    nans = op(x, -1).isnan()  # where the CPU's result is NaN, so is pto's
    assert torch.equal(op(x.to("pto"), -1).cpu().isnan(), nans)


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("shape", [(300, 2000), (4097, 9)])
def test_sums_over_rows_and_columns_match_the_cpu(dtype, dim, shape):
    # Float partial sums each side, in different orders: the float sums differ by at most
    # n * 2^-24 * sum(|x|) (Higham's bound for any order); one ulp of the rounded result.
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=generator).to(dtype)
    x[2, 3] = float("inf")
    expected = x.sum(dim)
    n = x.shape[dim]
    bound = n * 2**-24 * x.float().abs().sum(dim).max().item()
    torch.testing.assert_close(x.to("pto").sum(dim).cpu(), expected, rtol=ulp(dtype), atol=bound, equal_nan=True)
    means = x.to("pto").mean(dim).cpu()
    torch.testing.assert_close(means, x.mean(dim), rtol=ulp(dtype), atol=bound / n, equal_nan=True)


@pytest.mark.parametrize("cap", ["avx2", "sse4", "scalar"])
def test_each_capped_target_converts_and_folds_as_the_cpu(cap):
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-k", "not capped", __file__],
        capture_output=True, text=True, cwd=pathlib.Path(__file__).parents[2],
        env={**os.environ, "PTO_SIM_VECTOR_ISA": cap})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("op", [torch.amax, torch.amin])
def test_maxima_and_minima_over_rows_and_columns_are_the_cpus(dtype, dim, op):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(300, 2000, generator=generator).to(dtype)
    x[2, 3], x[4, 5], x[7, :] = float("inf"), -float("inf"), -float("inf")
    x[9, 100], x[200, 11] = float("nan"), float("nan")
    torch.testing.assert_close(op(x.to("pto"), dim).cpu(), op(x, dim), rtol=0, atol=0, equal_nan=True)
