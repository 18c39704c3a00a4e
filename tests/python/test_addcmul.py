"""torch.addcmul / torch.addcdiv as one taddcmul / taddcdiv instruction: every form
(functional, in-place, out=), broadcasting, mixed dtypes, values, and float16 /
bfloat16 rounded once from float32, against PyTorch's CPU kernels."""

import itertools

import pytest
import torch
from torch.testing import assert_close

import pypto_torch  # noqa: F401  (registers the pto device)
from pypto_torch.profiler import Profiler

OPS = {"addcmul": torch.addcmul, "addcdiv": torch.addcdiv}
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def _inputs(shapes, dtype, seed, positive_divisor=False):
    generator = torch.Generator().manual_seed(seed)
    tensors = [torch.randn(shape, generator=generator, dtype=torch.float64) for shape in shapes]
    if positive_divisor:
        tensors[2] = tensors[2].abs() + 0.5
    return [t.to(dtype) for t in tensors]


def _pto(tensors):
    return [t.to("pto") for t in tensors]


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("value", [1, 0.5, -3])
def test_matches_cpu_bit_for_bit_in_float(name, dtype, value):
    """The kernel computes (value * t1) then * or / t2, then + self, in float32 for
    float16/bfloat16 with one rounding, as PyTorch's CPU kernels do: the same bits."""
    self, t1, t2 = _inputs([(7, 133)] * 3, dtype, seed=1, positive_divisor=name == "addcdiv")
    expected = OPS[name](self, t1, t2, value=value)
    got = OPS[name](*_pto([self, t1, t2]), value=value)
    assert got.dtype == expected.dtype
    assert_close(got.cpu(), expected, rtol=0, atol=0)


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("shapes", [
    [(4, 1, 5), (3, 1), (5,)],          # every operand broadcast somewhere
    [(), (6, 7), (7,)],                 # self a 0-dim tensor
    [(2, 3, 4), (2, 3, 4), ()],         # t2 a 0-dim tensor
    [(1,), (1,), (1000,)],              # self and t1 repeated along the whole row
])
def test_broadcasts_as_cpu(name, shapes):
    self, t1, t2 = _inputs(shapes, torch.float32, seed=2, positive_divisor=name == "addcdiv")
    expected = OPS[name](self, t1, t2, value=0.75)
    assert_close(OPS[name](*_pto([self, t1, t2]), value=0.75).cpu(), expected, rtol=0, atol=0)


def test_integer_addcmul_wraps_as_cpu():
    generator = torch.Generator().manual_seed(3)
    for dtype in (torch.int8, torch.uint8, torch.int32, torch.int64):
        self, t1, t2 = (torch.randint(0, 100, (5, 9), generator=generator).to(dtype) for _ in range(3))
        expected = torch.addcmul(self, t1, t2, value=3)
        assert_close(torch.addcmul(*_pto([self, t1, t2]), value=3).cpu(), expected, rtol=0, atol=0)


def test_mixed_dtypes_promote_as_cpu():
    self = torch.arange(12, dtype=torch.int64).reshape(3, 4)
    t1 = torch.randn(3, 4, generator=torch.Generator().manual_seed(4))
    t2 = torch.randn(4, dtype=torch.float16, generator=torch.Generator().manual_seed(5))
    for name, op in OPS.items():
        expected = op(self, t1, t2.abs() + 1 if name == "addcdiv" else t2, value=2)
        got = op(*_pto([self, t1, t2.abs() + 1 if name == "addcdiv" else t2]), value=2)
        assert got.dtype == expected.dtype
        assert_close(got.cpu(), expected)


PROMOTED = [torch.bool, torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64]


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("zero_dim", [(False, True, False), (False, True, True), (True, True, False),
                                      (False, False, True)], ids=str)
def test_zero_dim_operands_promote_as_cpu(name, zero_dim):
    """All three operands promote at once, as torch.result_type does: a 0-dim operand's
    dtype counts only where no dimensioned operand is of its category. Promoting pairs
    made addcdiv(bfloat16 (3,), float32 (), int64 (3,)) a float32 result, not bfloat16."""
    for dtypes in itertools.product(PROMOTED, repeat=3):
        operands = [torch.full(() if zero else (3,), 2.0).to(dtype) for dtype, zero in zip(dtypes, zero_dim)]
        try:
            expected = OPS[name](*operands, value=1)
        except (RuntimeError, NotImplementedError) as error:
            with pytest.raises(type(error)):
                OPS[name](*_pto(operands), value=1)
            continue
        got = OPS[name](*_pto(operands), value=1)
        assert got.dtype == expected.dtype, dtypes
        assert_close(got.cpu(), expected, rtol=0, atol=0)


def test_bool_addcmul_is_refused_as_on_cpu():
    a = torch.ones(3, dtype=torch.bool)
    for call in (lambda t: torch.addcmul(t, t, t), lambda t: t.addcmul_(t, t),
                 lambda t: torch.addcmul(t, t, t, out=torch.empty_like(t))):
        with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
            call(a)
        with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
            call(a.to("pto"))


@pytest.mark.parametrize("name", OPS)
def test_inplace_and_out_forms(name):
    self, t1, t2 = _inputs([(5, 8), (8,), (5, 1)], torch.float32, seed=6, positive_divisor=name == "addcdiv")
    expected = OPS[name](self, t1, t2, value=-1.5)

    inplace = self.to("pto")
    returned = getattr(inplace, name + "_")(t1.to("pto"), t2.to("pto"), value=-1.5)
    assert returned is inplace
    assert_close(inplace.cpu(), expected, rtol=0, atol=0)

    out = torch.empty(0, device="pto")
    OPS[name](*_pto([self, t1, t2]), value=-1.5, out=out)
    assert_close(out.cpu(), expected, rtol=0, atol=0)

    wider = torch.empty(5, 8, dtype=torch.float64, device="pto")  # out's dtype differs: converted
    OPS[name](*_pto([self, t1, t2]), value=-1.5, out=wider)
    assert_close(wider.cpu(), expected.double(), rtol=0, atol=0)

    transposed = torch.empty(8, 5, device="pto").t()  # a strided out
    OPS[name](*_pto([self, t1, t2]), value=-1.5, out=transposed)
    assert_close(transposed.cpu(), expected, rtol=0, atol=0)


@pytest.mark.parametrize("name", OPS)
def test_inplace_refuses_a_wider_broadcast_as_cpu(name):
    self, t1, t2 = _inputs([(1, 4), (3, 4), (4,)], torch.float32, seed=7, positive_divisor=True)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        getattr(self.clone(), name + "_")(t1, t2)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        getattr(self.to("pto"), name + "_")(t1.to("pto"), t2.to("pto"))


def test_integer_addcdiv_is_refused_as_on_cpu():
    a = torch.ones(3, dtype=torch.int64)
    with pytest.raises(RuntimeError, match="Integer division with addcdiv is no longer supported"):
        torch.addcdiv(a.to("pto"), a.to("pto"), a.to("pto"))


def test_one_instruction_per_call():
    """One taddcmul, no temporaries or copies (it used to be tmul, tadd and a tmov)."""
    self, t1, t2 = _pto(_inputs([(64, 64)] * 3, torch.float32, seed=8))
    out = torch.empty_like(self)
    torch.addcmul(self, t1, t2, value=0.1, out=out)
    torch.pto.synchronize()
    with Profiler() as profiler:
        torch.addcmul(self, t1, t2, value=0.1, out=out)
        torch.pto.synchronize()
    assert [a.name for a in profiler.activities if a.kind == "instruction"] == ["taddcmul"]


def test_complex_takes_the_composition():
    a = torch.randn(4, dtype=torch.complex64, generator=torch.Generator().manual_seed(9))
    expected = torch.addcmul(a, a, a, value=2)
    assert_close(torch.addcmul(*_pto([a, a, a]), value=2).cpu(), expected)
