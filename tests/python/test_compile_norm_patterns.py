"""Compiled normalisations: F.layer_norm over the last dimension is one tlayernorm, and an
RMS norm written out op by op (x * rsqrt(mean(x ** 2) + eps) * w) becomes one trmsnorm;
each case against eager CPU, with odd lengths, non-contiguous inputs, no weight, and the
cases that must stay written out. Results within error_bounds.rms_norm_bound /
normalization_bounds, which grow with the length normalised over."""
import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import pypto_torch
from error_bounds import assert_within_bound, normalization_bounds, rms_norm_bound, sum_bound


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def mnemonics(program: str) -> set:
    lines = (line.strip() for line in program.splitlines())
    return {line.split()[0] for line in lines if line and not line.startswith(("#", "buffer"))}


def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def rms_norm_without_weight(x):
    return torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * x


def rms_norm_and_its_mean_square(x, w):
    mean_square = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(mean_square + 1e-6) * w, mean_square


@pytest.mark.parametrize("length", [1, 3, 17, 1000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_a_written_out_rms_norm_is_one_trmsnorm(length, dtype):
    torch.manual_seed(0)
    x, w = torch.randn(5, length, dtype=dtype), torch.randn(length, dtype=dtype)
    for fn, args in ((rms_norm, (x, w)), (rms_norm_without_weight, (x,))):
        on_pto = [a.to("pto") for a in args]
        report = pypto_torch.explain(fn, *on_pto)
        assert "trmsnorm" in mnemonics(report.program), report.program
        assert not {"tsum", "trsqrt"} & mnemonics(report.program), report.program
        bound = rms_norm_bound(x, (-1,), w if fn is rms_norm else None, 1e-6 if fn is rms_norm else 1e-5)
        assert_within_bound(torch.compile(fn, backend="pypto")(*on_pto).cpu(), fn(*args), bound, fn.__name__)
        torch._dynamo.reset()


def test_rms_norm_of_a_non_contiguous_input():
    torch.manual_seed(0)
    x, w = torch.randn(33, 6).t(), torch.randn(33)
    assert_within_bound(torch.compile(rms_norm, backend="pypto")(x.to("pto"), w.to("pto")).cpu(), rms_norm(x, w),
                        rms_norm_bound(x, (-1,), w, 1e-6))


def test_an_rms_norm_whose_parts_are_read_stays_written_out():
    torch.manual_seed(0)
    x, w = torch.randn(4, 24), torch.randn(24)
    report = pypto_torch.explain(rms_norm_and_its_mean_square, x.to("pto"), w.to("pto"))
    assert "trmsnorm" not in mnemonics(report.program), report.program
    actual = torch.compile(rms_norm_and_its_mean_square, backend="pypto")(x.to("pto"), w.to("pto"))
    # The mean of squares: positive terms, each square one rounding: sum_bound's mean.
    bounds = (rms_norm_bound(x, (-1,), w, 1e-6), sum_bound(x.pow(2), -1, True, mean=True))
    for got, want, bound in zip(actual, rms_norm_and_its_mean_square(x, w), bounds):
        assert_within_bound(got.cpu(), want, bound)


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_compiled_layer_norm_is_one_tlayernorm(affine, dtype):
    torch.manual_seed(0)
    x = torch.randn(3, 7, 65, dtype=dtype)
    w, b = (torch.randn(65, dtype=dtype), torch.randn(65, dtype=dtype)) if affine else (None, None)

    def norm(x, w, b):
        return F.layer_norm(x, (65,), w, b, 1e-5)

    on_pto = [None if a is None else a.to("pto") for a in (x, w, b)]
    report = pypto_torch.explain(norm, *on_pto)
    assert mnemonics(report.program) <= {"tlayernorm", "texpands"}, report.program
    actual, expected = torch.compile(norm, backend="pypto")(*on_pto).cpu(), norm(x, w, b)
    assert_within_bound(actual, expected, normalization_bounds(x, (-1,), w, b, 1e-5, actual, expected)[0])


def test_compiled_layer_norm_gradients_read_its_statistics():
    torch.manual_seed(0)
    x, w, b = torch.randn(6, 40, requires_grad=True), torch.randn(40, requires_grad=True), torch.randn(40, requires_grad=True)
    leaves = [t.detach().to("pto").requires_grad_() for t in (x, w, b)]

    def loss(x, w, b):
        return (F.layer_norm(x, (40,), w, b) ** 2).sum()

    torch.compile(loss, backend="pypto")(*leaves).backward()
    loss(x, w, b).backward()
    # The backward sums 40 terms a row (6 rows for the weight's and bias's): first order
    # 2 gamma_44 (r |g w| + r |x^| sum|g w x^| / 40) with g = 2 y up to ~10 for these randn
    # rows, r ~ 1: ~5e-6 x 20 ~ 1e-4, within rtol 1e-4 plus atol 1e-4 of gradients that size.
    for leaf, reference in zip(leaves, (x, w, b)):
        assert_close(leaf.grad.cpu(), reference.grad, rtol=1e-4, atol=1e-4)
