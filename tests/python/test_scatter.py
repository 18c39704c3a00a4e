"""Scatter and advanced indexing on pto: scatter / scatter_add / scatter_reduce (all forms), x[indices]
(index.Tensor: integer and boolean indices, broadcast, non-adjacent indices moved to the
front), x[indices] = values (index_put_, with accumulate), take / put_, nonzero, one_hot
and the index's gradient run natively; an index out of range raises at the next synchronising
call, naming the instruction, and the device stays usable."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from opinfo_sweep import ONE_ULP, opinfo_tests

NAMES = {"scatter", "scatter_add", "index_put", "__getitem__", "take", "put", "take_along_dim",
         "nn.functional.one_hot", "nonzero", "argwhere", "index_fill", "index_copy", "masked_scatter",
         "masked_select", "repeat_interleave", "bincount", "unique"}
OPS = [op for op in op_db if (op.name in NAMES and op.variant_test_name == "") or op.name == "scatter_reduce"]
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool]

# Scatter and indexing move elements without arithmetic, and sums of duplicates add
# in index order as the CPU does; but float16/bfloat16 sums accumulate in float32 and
# round once (as the CPU's scatter_add does, where its index_put rounds every step).
test_opinfo_forward_matches_cpu, test_opinfo_gradients_match_cpu = opinfo_tests(
    OPS, DTYPES, tolerance=lambda op, dtype: ONE_ULP.get(dtype, {"rtol": 0, "atol": 0}),
    gradient_tolerance={"rtol": 1e-6, "atol": 1e-6})


def pto(*tensors):
    return [t.to("pto") for t in tensors]


def assert_native(run):
    """Runs `run` and checks that no op took the CPU fallback."""
    before = pypto_torch.fallback_ops()
    result = run()
    assert pypto_torch.fallback_ops() == before
    return result


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool], ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_forms(dim, dtype):
    self = torch.randn(4, 5, 6).to(dtype)
    src = torch.randn(5, 6, 7).to(dtype)
    index = torch.randint(0, self.shape[dim], (3, 4, 5))
    self_p, src_p, index_p = pto(self, src, index)
    for name in ("scatter", "scatter_add"):
        expected = getattr(self, name)(dim, index, src)
        assert_close(assert_native(lambda: getattr(self_p, name)(dim, index_p, src_p)).cpu(), expected)
        in_place = self_p.clone()
        assert_native(lambda: getattr(in_place, name + "_")(dim, index_p, src_p))
        assert_close(in_place.cpu(), expected)
        out = torch.empty(0, dtype=dtype, device="pto")
        getattr(torch, name)(self_p, dim, index_p, src_p, out=out)
        assert_close(out.cpu(), expected)
    value = True if dtype == torch.bool else 3
    assert_close(assert_native(lambda: self_p.scatter(dim, index_p, value)).cpu(), self.scatter(dim, index, value))
    assert_close(assert_native(lambda: self_p.scatter(dim, index_p.int(), src_p)).cpu(), self.scatter(dim, index, src))


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce(reduce, include_self):
    self = torch.randn(4, 6)
    src = torch.randn(5, 6)
    src[1, 2] = float("nan")                              # amax / amin: NaN wins
    index = torch.randint(0, 4, (5, 6))
    expected = self.scatter_reduce(0, index, src, reduce, include_self=include_self)
    actual = assert_native(lambda: self.to("pto").scatter_reduce(0, *pto(index, src), reduce, include_self=include_self))
    assert_close(actual.cpu(), expected, equal_nan=True)
    for old_style in ("add", "multiply"):
        expected = self.scatter(0, index, src, reduce=old_style)
        assert_close(assert_native(lambda: self.to("pto").scatter(0, *pto(index, src), reduce=old_style)).cpu(),
                     expected, equal_nan=True)


def test_scatter_of_strided_broadcast_and_scalar_operands():
    self = torch.randn(8, 10).t()                         # transposed
    src = torch.randn(1, 8).expand(9, 8)                  # stride 0
    index = torch.randint(0, 8, (9, 1)).expand(9, 5)      # one index per row, repeated: the last write wins
    for name in ("scatter", "scatter_add"):
        expected = getattr(self, name)(1, index, src)
        actual = assert_native(lambda: getattr(self.to("pto"), name)(1, *pto(index, src)))
        assert_close(actual.cpu(), expected)
    scalar = torch.tensor(2.5)
    assert_close(scalar.to("pto").scatter_add(0, *pto(torch.tensor(0), torch.tensor(1.0))).cpu(),
                 scalar.scatter_add(0, torch.tensor(0), torch.tensor(1.0)))
    empty_index = torch.empty(0, 8, dtype=torch.long)
    assert_close(self.to("pto").scatter(0, *pto(empty_index, src)).cpu(), self)


def test_scatter_propagates_nan():
    self = torch.tensor([1.0, float("nan"), 3.0])
    src = torch.tensor([float("nan"), 2.0, 5.0])
    index = torch.tensor([0, 1, 1])
    for name in ("scatter", "scatter_add"):
        assert_close(getattr(self.to("pto"), name)(0, *pto(index, src)).cpu(), getattr(self, name)(0, index, src),
                     equal_nan=True)


def test_scatter_add_of_duplicates_is_exact_and_deterministic():
    src = torch.randn(200000)
    index = torch.randint(0, 7, (200000,))
    expected = torch.zeros(7, dtype=torch.float64).scatter_add_(0, index, src.double())
    first = torch.zeros(7, device="pto").scatter_add_(0, *pto(index, src)).cpu()
    for _ in range(3):  # the same sums, in the same order, every time
        assert torch.equal(torch.zeros(7, device="pto").scatter_add_(0, *pto(index, src)).cpu(), first)
    assert_close(first.double(), expected, rtol=1e-4, atol=1e-3)
    assert_close(first, torch.zeros(7).scatter_add_(0, index, src))


def test_bad_scatter_raises_pytorchs_error():
    self, index = torch.randn(3, 4, device="pto"), torch.zeros(3, 5, dtype=torch.long, device="pto")
    with pytest.raises(RuntimeError, match="Index tensor must have the same number of dimensions"):
        self.scatter_add(0, index[0], torch.randn(3, 5, device="pto"))
    with pytest.raises(RuntimeError, match="Expected index"):
        self.scatter_add(0, index, torch.randn(2, 2, device="pto"))
    with pytest.raises(RuntimeError, match="Expected dtype int32/int64 for index"):
        self.scatter(0, index[:, :4].float(), 1.0)
    with pytest.raises(RuntimeError, match="dtype"):
        self.scatter_add(0, index[:, :4], torch.randn(3, 4, device="pto", dtype=torch.float64))


INDEXINGS = {
    "x[i]": lambda x, i, j, m: x[i],
    "x[:, i]": lambda x, i, j, m: x[:, i],
    "x[..., i]": lambda x, i, j, m: x[..., i],
    "x[i, j]": lambda x, i, j, m: x[i, j],
    "x[:, i, j]": lambda x, i, j, m: x[:, i, j],
    "x[i, :, j]": lambda x, i, j, m: x[i, :, j],          # apart: the indexed dimensions go first
    "x[i, None, 1:, j]": lambda x, i, j, m: x[i, None, 1:, j],
    "x[m]": lambda x, i, j, m: x[m],
    "x[m[..., 0]]": lambda x, i, j, m: x[m[..., 0]],
    "x[:, m[0]]": lambda x, i, j, m: x[:, m[0]],
    "x[m[:, 0, 0], j[0]]": lambda x, i, j, m: x[m[:, 0, 0], j[0]],  # a mask beside a 0-dim index
    "x[m[..., 0], j[0]]": lambda x, i, j, m: x[m[..., 0], j[0]],
    "x[:, m[0].t()]": lambda x, i, j, m: x.transpose(1, 2)[:, m[0].t()],  # a mask over dimensions that do not merge
}


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32], ids=str)
@pytest.mark.parametrize("case", INDEXINGS)
def test_advanced_indexing(case, index_dtype):
    x = torch.randn(4, 5, 6)
    i = torch.tensor([[0, 3], [-1, 2]], dtype=index_dtype)    # negative indices count from the end
    j = torch.tensor([3, -4], dtype=index_dtype)              # broadcasts against i
    m = torch.rand(4, 5, 6) > 0.5
    expected = INDEXINGS[case](x, i, j, m)
    actual = assert_native(lambda: INDEXINGS[case](*pto(x, i, j, m)))
    assert_close(actual.cpu(), expected)


def test_indexing_strided_and_empty():
    x = torch.randn(6, 5, 4).permute(2, 0, 1)[:, ::2]     # non-contiguous, offset strides
    i = torch.tensor([2, 0, 2])
    assert_close(assert_native(lambda: x.to("pto")[:, i.to("pto")]).cpu(), x[:, i])
    xp = x.to("pto")
    assert_close(xp[:, i.to("pto"), i.to("pto")].cpu(), x[:, i, i])
    empty = torch.empty(0, dtype=torch.long)
    assert_close(xp[empty.to("pto")].cpu(), x[empty])
    nothing = torch.zeros(3, 5, dtype=torch.bool)
    assert_close(xp[:, nothing.to("pto")].cpu(), x[:, nothing])
    one = [torch.tensor([k], device="pto") for k in (1, 0, 3)]
    assert_close(xp[one[0], one[1], one[2]].cpu(), x[1, 0, 3].reshape(1))


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool], ids=str)
def test_index_put(dtype, accumulate):
    x = torch.randn(5, 6, 7).to(dtype)
    i = torch.tensor([4, 0, -1, 2])
    j = torch.tensor([[1], [5]])
    for indices, values in [((i, j), torch.randn(2, 4, 7)),     # the selection's shape: [2, 4, 7]
                            ((i,), torch.randn(6, 1)),           # broadcast to [4, 6, 7]
                            ((i,), torch.tensor(1)), ((x.float() > 0,), torch.tensor(0))]:
        values = values.to(dtype)
        expected = x.clone().index_put_(indices, values, accumulate=accumulate)
        if accumulate and dtype == torch.bfloat16:  # sums in float32, rounded once (the CPU rounds every step)
            expected = x.float().index_put_(indices, values.float(), accumulate=True).to(dtype)
        actual = x.to("pto")
        assert_native(lambda: actual.index_put_(tuple(pto(*indices)), values.to("pto"), accumulate=accumulate))
        assert_close(actual.cpu(), expected)
    expected = x.clone()
    expected[:, i] = values = torch.randn(5, 4, 7).to(dtype)     # x[:, i] = v: index_put_ with a None first
    actual = x.to("pto")
    assert_native(lambda: actual.__setitem__((slice(None), i.to("pto")), values.to("pto")))
    assert_close(actual.cpu(), expected)


def test_index_put_with_duplicates_accumulates_exactly():
    x = torch.zeros(4, 3)
    i = torch.tensor([1, 1, 3, 1, 0, 3])
    values = torch.randn(6, 3)
    expected = x.index_put((i,), values, accumulate=True)
    assert_close(x.to("pto").index_put((i.to("pto"),), values.to("pto"), accumulate=True).cpu(), expected)
    last = x.to("pto").index_put((i.to("pto"),), values.to("pto"))  # the last write wins, as on the CPU
    assert_close(last.cpu(), x.index_put((i,), values))


def test_setitem_forms_are_native():
    x = torch.randn(4, 5)
    xp = x.to("pto")
    i, m = torch.tensor([3, 1]), x > 0
    x[i] = 2.0
    x[m] = -1.0
    x[:, i] = torch.arange(8.0).reshape(4, 2)
    assert_native(lambda: xp.__setitem__(i.to("pto"), 2.0))
    assert_native(lambda: xp.__setitem__(m.to("pto"), -1.0))
    assert_native(lambda: xp.__setitem__((slice(None), i.to("pto")), torch.arange(8.0, device="pto").reshape(4, 2)))
    assert_close(xp.cpu(), x)


def test_nonzero():
    x = torch.tensor([[0.0, float("nan"), -0.0], [2.0, 0.0, 1.0]])
    for t in (x, x.t(), x > 0, x.to(torch.int32), torch.tensor(3.0), torch.tensor(0), torch.zeros(0, 3)):
        assert_close(assert_native(lambda: torch.nonzero(t.to("pto"))).cpu(), torch.nonzero(t))
        assert_close(torch.argwhere(t.to("pto")).cpu(), torch.argwhere(t))
    out = torch.empty(7, 7, dtype=torch.long, device="pto")
    torch.nonzero(x.to("pto"), out=out)
    assert_close(out.cpu(), torch.nonzero(x))
    big = torch.rand(300, 700) > 0.3
    assert_close(torch.nonzero(big.to("pto")).cpu(), torch.nonzero(big))
    assert_close(torch.where(big.to("pto"))[1].cpu(), torch.where(big)[1])


def test_take_and_put_are_native():
    x = torch.randn(3, 4)
    index = torch.tensor([[11, -1], [0, 5]])
    assert_close(assert_native(lambda: torch.take(x.to("pto"), index.to("pto"))).cpu(), torch.take(x, index))
    values = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    for accumulate in (False, True):
        actual = x.to("pto")
        assert_native(lambda: actual.put_(index.to("pto"), values.to("pto"), accumulate=accumulate))
        assert_close(actual.cpu(), x.clone().put_(index, values, accumulate=accumulate))


def test_one_hot_is_native():
    labels = torch.tensor([[3, 0], [1, 3]])
    assert_close(assert_native(lambda: F.one_hot(labels.to("pto"), 5)).cpu(), F.one_hot(labels, 5))
    assert_close(assert_native(lambda: F.one_hot(labels.to("pto"))).cpu(), F.one_hot(labels))


def test_index_backward_is_native():
    x = torch.randn(6, 4, requires_grad=True)
    i = torch.tensor([[5, 0, 5], [1, 5, 2]])
    x[i].pow(2).sum().backward()
    xp = x.detach().to("pto").requires_grad_()
    assert_native(lambda: xp[i.to("pto")].pow(2).sum().backward())
    assert_close(xp.grad.cpu(), x.grad)


def test_the_common_forms_are_native():
    """x[idx], x[idx] = v, x.scatter_add_(0, i, s), one_hot: no op takes the CPU fallback."""
    x = torch.randn(8, 3, device="pto")
    idx = torch.tensor([7, 0, 7], device="pto")
    before = pypto_torch.fallback_ops()
    picked = x[idx]
    x[idx] = picked * 2
    x.scatter_add_(0, idx.unsqueeze(1).expand(3, 3), picked)
    F.one_hot(idx, 8)
    torch.pto.synchronize()
    assert pypto_torch.fallback_ops() == before


@pytest.mark.parametrize("statement,message", [
    ("x.scatter_add_(0, torch.full((1, 4), 9, device='pto'), torch.ones(1, 4, device='pto'))",
     ("tscatteradd failed", "index 9 is out of bounds for dimension 0 with size 3")),
    ("x.scatter_(1, torch.full((1, 1), -1, device='pto'), 2.0)",
     ("tscatter failed", "index -1 is out of bounds for dimension 1 with size 4")),
    ("x[:, torch.tensor([0, 4], device='pto')]",
     ("tgather failed", "index 4 is out of bounds for dimension 1 with size 4")),
    ("x[torch.tensor([-4], device='pto')] = 1.0",
     ("tscatter failed", "index -4 is out of bounds for dimension 0 with size 3")),
    ("x[torch.tensor([-1, 0], device='pto'), torch.tensor([4], device='pto')]",
     ("twrapindex failed", "index 4 is out of bounds for dimension 1 with size 4")),
    ("x[torch.tensor([-4], device='pto'), torch.tensor([0], device='pto')] += 1.0",
     ("twrapindex failed", "index -4 is out of bounds for dimension 0 with size 3")),
    ("x.reshape(3, 2, 2)[torch.ones(3, 2, dtype=torch.bool, device='pto'), torch.tensor([9], device='pto')]",
     ("twrapindex failed", "index 9 is out of bounds for dimension 2 with size 2")),   # after a merged mask
])
def test_out_of_range_index_raises_at_the_next_sync(fails_at_next_sync, statement, message):
    out = fails_at_next_sync(statement)
    assert all(part in out for part in message), out


def test_index_fill_copy_masked_scatter_repeat_interleave_and_bincount_are_native():
    x = torch.randn(4, 5)
    index = torch.tensor([3, -1, 0])
    source = torch.randn(4, 3)
    mask = torch.rand(4, 5) > 0.5
    counts = torch.tensor([2, 0, 3, 1])
    values = torch.tensor([1, 4, 4, 0, 7])
    cases = [
        lambda t, i, s, m, c, v: t.clone().index_fill_(1, i, -2.0),
        lambda t, i, s, m, c, v: t.index_copy(1, i.remainder(5), s),
        lambda t, i, s, m, c, v: t.clone().masked_scatter_(m, t * 10),
        lambda t, i, s, m, c, v: torch.masked_select(t, m),
        lambda t, i, s, m, c, v: torch.repeat_interleave(c),
        lambda t, i, s, m, c, v: torch.repeat_interleave(t, c, dim=0),
        lambda t, i, s, m, c, v: torch.bincount(v, minlength=9),
        lambda t, i, s, m, c, v: torch.bincount(v, weights=t[0]),
    ]
    before = pypto_torch.fallback_ops()
    for case in cases:
        got = case(*(a.to("pto") for a in (x, index, source, mask, counts, values)))
        assert_close(got.cpu(), case(x, index, source, mask, counts, values))
    assert pypto_torch.fallback_ops() == before


def test_data_dependent_sizes_check_like_the_cpu():
    with pytest.raises(RuntimeError, match="repeats can not be negative"):
        torch.repeat_interleave(torch.tensor([1, -1], device="pto"))
    with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative integral inputs"):
        torch.bincount(torch.tensor([1, -1], device="pto"))
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones in mask"):
        torch.zeros(3, device="pto").masked_scatter_(torch.ones(3, dtype=torch.bool, device="pto"),
                                                     torch.ones(2, device="pto"))
    assert torch.bincount(torch.tensor([2, 2], device="pto")).tolist() == [0, 0, 2]
