"""Sorting and scans on pto: sort (stable or not; argsort and msort through it),
topk, cumsum and cumprod run natively, in every form (functional, out=, in place,
dtype=); NaN, infinities and signed zeros
sort as on the CPU, equal values keep their order, topk picks among them as the
CPU does, and bad arguments raise PyTorch's own errors."""

import pytest
import torch
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from opinfo_sweep import ONE_ULP, op_id, opinfo_tests, to_cpu, to_device

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool]
# sort and argsort with stable=False may order equal values any way; CPU's unstable
# sort has its own order, pto's is always the stable one.
UNSTABLE = {"sort", "argsort"}
# kthvalue and median may return the index of any of several equal values
# (PyTorch leaves it unspecified; CPU's quickselect picks its own).
ORDER_STATISTICS = {"kthvalue", "median", "nanmedian"}
OPS = [op for op in op_db if op.variant_test_name == "" and
       op.name in {"msort", "topk", "cumsum", "cumprod"} | UNSTABLE | ORDER_STATISTICS]
SORTS = [op for op in OPS if op.name in UNSTABLE]
PICKS = [op for op in OPS if op.name in ORDER_STATISTICS]


def tolerance(op, dtype):
    return ONE_ULP.get(dtype, {})


test_opinfo_forward_matches_cpu, test_opinfo_gradients_match_cpu = opinfo_tests(
    [op for op in OPS if op not in SORTS + PICKS], DTYPES, tolerance=tolerance)
_, test_opinfo_pick_gradients_match_cpu = opinfo_tests(PICKS, DTYPES)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", PICKS, ids=op_id)
def test_opinfo_order_statistics_pick_an_equal_element(op, dtype):
    """Values as on the CPU; indices point at elements equal to them (NaN to NaN)."""
    if dtype not in op.supported_dtypes("cpu"):
        pytest.skip(f"{op.name} does not support {dtype} on CPU either")
    count = 0
    before = pypto_torch.fallback_ops()
    for sample in op.sample_inputs("cpu", dtype, requires_grad=False):
        expected = op(sample.input.clone(), *sample.args, **sample.kwargs)
        actual = op(sample.input.to("pto"), *sample.args, **sample.kwargs)
        if isinstance(expected, torch.Tensor):  # median() of everything: values only
            assert_close(actual.cpu(), expected, equal_nan=True)
        else:
            assert_close(actual.values.cpu(), expected.values, equal_nan=True)
            names = ("k", "dim", "keepdim") if op.name == "kthvalue" else ("dim", "keepdim")
            given = {**dict(zip(names, sample.args)), **sample.kwargs}
            dim, keepdim = given.get("dim", -1), given.get("keepdim", False)
            indices = actual.indices.cpu()
            source = sample.input if sample.input.dim() > 0 else sample.input.view(1)
            picked = source.gather(dim, indices if keepdim or sample.input.dim() == 0 else indices.unsqueeze(dim))
            assert_close(picked.reshape(expected.values.shape), expected.values, equal_nan=True)
        count += 1
    assert count > 0 and pypto_torch.fallback_ops() == before
_, test_opinfo_sort_gradients_match_cpu = opinfo_tests(SORTS, DTYPES)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", SORTS, ids=op_id)
def test_opinfo_sorts_match_the_stable_cpu_sort(op, dtype):
    """Every sample as given on pto, against the CPU with stable=True."""
    count = 0
    for sample in op.sample_inputs("cpu", dtype, requires_grad=False):
        stable = {**dict(zip(("dim", "descending"), sample.args)), **sample.kwargs, "stable": True}  # keywords only
        expected = op(sample.input.clone(), **stable)
        actual = op(to_device(sample.input, "pto"), *to_device(sample.args, "pto"), **to_device(sample.kwargs, "pto"))
        assert_close(to_cpu(actual), expected, equal_nan=True)
        count += 1
    assert count > 0


SPECIALS = [2.0, float("nan"), -0.0, 1.0, 0.0, float("-inf"), float("nan"), 1.0, float("inf"), -0.0, -3.5]


def assert_same(actual, expected):
    """Equal values (NaN to NaN) with the same signs: -0.0 is not 0.0 here."""
    assert_close(actual.cpu(), expected, equal_nan=True, rtol=0, atol=0)
    assert torch.equal(actual.cpu().signbit(), expected.signbit())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("descending", [False, True])
def test_nan_infinity_and_signed_zero_order(dtype, descending):
    x = torch.tensor(SPECIALS, dtype=dtype)
    values, indices = x.to("pto").sort(descending=descending, stable=True)
    want_values, want_indices = x.sort(descending=descending, stable=True)
    assert_same(values, want_values)
    assert torch.equal(indices.cpu(), want_indices)  # NaN last (first descending), ties in input order
    for k in (1, 3, 6, len(SPECIALS)):
        top, positions = x.to("pto").topk(k, largest=descending)
        want_top, want_positions = x.topk(k, largest=descending)
        assert_same(top, want_top)
        assert torch.equal(positions.cpu(), want_positions)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int8, torch.float16, torch.bool], ids=str)
def test_equal_values_keep_their_order(dtype):
    x = torch.randint(0, 3, (50, 300)).to(dtype)
    for dim in (0, 1):
        for descending in (False, True):
            want = x.sort(dim=dim, descending=descending, stable=True)
            for stable in (False, True):
                got = x.to("pto").sort(dim=dim, descending=descending, stable=stable)
                assert torch.equal(got.values.cpu(), want.values)
                assert torch.equal(got.indices.cpu(), want.indices)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16, torch.bfloat16], ids=str)
def test_topk_picks_among_ties_as_the_cpu_does(dtype):
    for n, k in [(10, 3), (10, 10), (300, 2), (300, 7), (1000, 15), (1000, 400)]:
        x = torch.randint(-3, 3, (6, n)).to(dtype)
        for largest in (True, False):
            want = x.topk(k, dim=1, largest=largest)
            got = x.to("pto").topk(k, dim=1, largest=largest)
            assert torch.equal(got.values.cpu(), want.values)
            assert torch.equal(got.indices.cpu(), want.indices), (n, k, largest)


@pytest.mark.parametrize("dim", [0, 1])
def test_large_random_tensors_match_cpu(dim):
    x = torch.randn(1000, 1000)
    x[torch.rand(1000, 1000) < 0.001] = float("nan")
    p = x.to("pto")
    want = x.sort(dim=dim, stable=True)
    got = p.sort(dim=dim)
    assert_close(got.values.cpu(), want.values, equal_nan=True)
    assert torch.equal(got.indices.cpu(), want.indices)
    for k in (5, 600):
        want = x.topk(k, dim=dim)
        got = p.topk(k, dim=dim, largest=True)
        assert_close(got.values.cpu(), want.values, equal_nan=True)
        assert torch.equal(got.indices.cpu(), want.indices)
    y = torch.rand(1000, 1000) + 0.5
    assert_close(y.to("pto").cumsum(dim).cpu(), y.cumsum(dim))
    assert_close(y.to("pto").cumprod(dim).cpu(), y.cumprod(dim))


def test_typical_use_is_native():
    x = torch.randn(64, 100).to("pto")
    before = pypto_torch.fallback_ops()
    values, indices = x.sort(dim=-1)
    top, positions = x.topk(5)
    running = x.cumsum(0)
    x.argsort(dim=0, descending=True)
    x.msort()
    x.cumprod(1)
    assert pypto_torch.fallback_ops() == before
    cpu = x.cpu()
    assert_close(values.cpu(), cpu.sort(dim=-1).values)
    assert_close(top.cpu(), cpu.topk(5).values)
    assert_close(running.cpu(), cpu.cumsum(0))


def test_out_in_place_and_dtype_forms():
    x = torch.randn(6, 7)
    p = x.to("pto")
    def outputs():
        return torch.empty(0, device="pto"), torch.empty(0, dtype=torch.long, device="pto")

    values, indices = outputs()
    torch.sort(p, 1, True, out=(values, indices))
    assert torch.equal(indices.cpu(), x.sort(1, True).indices) and torch.equal(values.cpu(), x.sort(1, True).values)
    values, indices = outputs()
    torch.topk(p, 3, 0, out=(values, indices))
    assert torch.equal(indices.cpu(), x.topk(3, 0).indices) and values.shape == (3, 7)
    strided = torch.empty(7, 6, device="pto").t()  # non-contiguous outputs
    torch.cumsum(p, 0, out=strided)
    assert_close(strided.cpu(), x.cumsum(0))
    torch.sort(p, 0, out=(strided, torch.empty(7, 6, dtype=torch.long, device="pto").t()))
    assert torch.equal(strided.cpu(), x.sort(0).values)
    alias, (_, indices) = p.clone(), outputs()
    torch.sort(alias, 0, out=(alias, indices))  # values written over the input
    assert torch.equal(alias.cpu(), x.sort(0).values) and torch.equal(indices.cpu(), x.sort(0).indices)
    q = p.clone()
    q.cumsum_(1)
    assert_close(q.cpu(), x.cumsum(1))
    q.cumprod_(0)
    assert_close(q.cpu(), x.cumsum(1).cumprod(0))
    assert_close(p.cumsum(0, dtype=torch.float64).cpu(), x.cumsum(0, dtype=torch.float64))
    counts = torch.tensor([[100, 100, 100]], dtype=torch.int8)
    assert p.to(torch.int32).cumsum(1).dtype == torch.int64  # integers and bools sum in int64
    assert torch.equal(counts.to("pto").cumsum(1).cpu(), counts.cumsum(1))
    assert torch.equal(counts.to("pto").cumsum(1, dtype=torch.int8).cpu(), counts.cumsum(1, dtype=torch.int8))  # wraps
    assert torch.equal(counts.to("pto").cumprod(1).cpu(), counts.cumprod(1))
    flags = torch.rand(4, 9) < 0.5
    assert torch.equal(flags.to("pto").cumsum(1).cpu(), flags.cumsum(1))
    assert torch.equal(flags.to("pto").argsort(dim=1, stable=True).cpu(), flags.argsort(dim=1, stable=True))


@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (0, 4)], ids=str)
def test_scalars_and_empty_tensors(shape):
    x = torch.randn(shape)
    p = x.to("pto")
    for dim in ([0, -1] if len(shape) < 2 else [0, 1]):
        assert torch.equal(p.sort(dim).indices.cpu(), x.sort(dim).indices)
        assert torch.equal(p.cumsum(dim).cpu(), x.cumsum(dim))
        assert torch.equal(p.cumprod(dim).cpu(), x.cumprod(dim))
        size = x.size(dim) if x.dim() else 1
        for k in {0, size}:
            got, want = p.topk(k, dim), x.topk(k, dim)
            assert torch.equal(got.values.cpu(), want.values) and torch.equal(got.indices.cpu(), want.indices)


def test_strided_and_broadcast_inputs():
    x = torch.randn(5, 8)
    for view in (lambda t: t.t(), lambda t: t[:, ::2], lambda t: t[0:1].expand(6, 8), lambda t: t[:, 0:1].expand(5, 9)):
        cpu, pto = view(x), view(x.to("pto"))
        for dim in (0, 1):
            assert torch.equal(pto.sort(dim).indices.cpu(), cpu.sort(dim=dim, stable=True).indices)
            assert torch.equal(pto.topk(2, dim).indices.cpu(), cpu.topk(2, dim).indices)
            assert_close(pto.cumsum(dim).cpu(), cpu.cumsum(dim))
            assert_close(pto.cumprod(dim).cpu(), cpu.cumprod(dim))


def cpu_error(fn, *args):
    with pytest.raises(Exception) as raised:
        fn(*args)
    return raised.type, str(raised.value)


@pytest.mark.parametrize("call", [
    lambda t: t.topk(9, 1),                                  # k larger than the dimension
    lambda t: t.topk(-1),
    lambda t: t.sort(dim=5),
    lambda t: t.cumsum(2),
    lambda t: torch.cumsum(t, 0, dtype=torch.float64, out=torch.empty(0, dtype=t.dtype, device=t.device)),
    lambda t: torch.sort(t, out=(torch.empty(0, device=t.device), torch.empty(0, dtype=torch.int32, device=t.device))),
], ids=["topk_k_too_large", "topk_negative_k", "sort_bad_dim", "cumsum_bad_dim", "cumsum_out_dtype",
        "sort_int32_indices"])
def test_bad_arguments_raise_pytorchs_errors(call):
    x = torch.randn(3, 4)
    want_type, want_message = cpu_error(call, x)
    with pytest.raises(want_type) as raised:
        call(x.to("pto"))
        torch.pto.synchronize()
    assert str(raised.value) == want_message
    assert torch.equal(x.to("pto").sort().values.cpu(), x.sort().values)  # the device stays usable
