"""A softmax written out op by op (row max, subtract, exp, row sum, divide) compiles to
one tsoftmax, whose kernel makes one pass per row statistic; each case against eager
CPU, with odd lengths, -inf and NaN rows, non-contiguous inputs, and the cases that
must stay written out."""
import pytest
import torch
from torch.testing import assert_close

import pypto_torch


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def written_out_softmax(x, dim=-1):
    shifted = x - x.amax(dim=dim, keepdim=True)
    e = shifted.exp()
    return e / e.sum(dim=dim, keepdim=True)


def mnemonics(program: str) -> set:
    """The instructions' mnemonics of a PTO-AS listing."""
    lines = (line.strip() for line in program.splitlines())
    return {line.split()[0] for line in lines if line and not line.startswith(("#", "buffer"))}


@pytest.mark.parametrize("shape", [(1, 1), (3, 15), (7, 17), (5, 33), (4, 1000), (2, 3, 257)])
def test_a_written_out_softmax_is_one_tsoftmax(shape):
    torch.manual_seed(0)
    x = torch.randn(shape)
    report = pypto_torch.explain(written_out_softmax, x.to("pto"))
    assert "tsoftmax" in mnemonics(report.program), report.program
    assert not {"tamax", "texp", "tsum"} & mnemonics(report.program), report.program
    actual = torch.compile(written_out_softmax, backend="pypto")(x.to("pto"))
    assert_close(actual.cpu(), written_out_softmax(x))


def test_rows_with_inf_and_nan_match_eager():
    torch.manual_seed(0)
    x = torch.randn(6, 37)
    x[1, 3] = float("inf")
    x[2, :] = float("-inf")
    x[3, 5] = float("nan")
    x[4, ::2] = float("-inf")
    actual = torch.compile(written_out_softmax, backend="pypto")(x.to("pto"))
    assert_close(actual.cpu(), written_out_softmax(x), equal_nan=True)


def test_other_dims_and_non_contiguous_inputs():
    torch.manual_seed(0)
    x = torch.randn(9, 21, 13)
    compiled = torch.compile(written_out_softmax, backend="pypto")
    assert_close(compiled(x.to("pto"), 1).cpu(), written_out_softmax(x, 1))
    transposed = x.transpose(0, 2)
    assert_close(compiled(transposed.to("pto")).cpu(), written_out_softmax(transposed))
    assert_close(compiled(x.to("pto")[:, ::2, 1:]).cpu(), written_out_softmax(x[:, ::2, 1:]))


def test_empty_rows():
    x = torch.randn(0, 8)
    actual = torch.compile(written_out_softmax, backend="pypto")(x.to("pto"))
    assert actual.shape == (0, 8)


def test_a_softmax_whose_parts_are_read_elsewhere_stays_written_out():
    def softmax_and_sum(x):
        e = (x - x.amax(dim=-1, keepdim=True)).exp()
        total = e.sum(dim=-1, keepdim=True)
        return e / total, total

    def max_over_another_dim(x):
        e = (x - x.amax(dim=0, keepdim=True)).exp()
        return e / e.sum(dim=-1, keepdim=True)

    torch.manual_seed(0)
    x = torch.randn(8, 24)
    for fn in (softmax_and_sum, max_over_another_dim):
        report = pypto_torch.explain(fn, x.to("pto"))
        assert "tsoftmax" not in mnemonics(report.program), report.program
        actual = torch.compile(fn, backend="pypto")(x.to("pto"))
        assert_close(pytree_cpu(actual), fn(x))
        torch._dynamo.reset()


def pytree_cpu(value):
    return tuple(v.cpu() for v in value) if isinstance(value, tuple) else value.cpu()
