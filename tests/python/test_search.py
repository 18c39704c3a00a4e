"""torch.searchsorted and torch.bucketize on pto: one tsearchsorted, in every form
(functional, out=, a number searched for, side=/right=, out_int32, sorter=), with the
CPU's positions in every dtype it takes: lines with ties, signed zeros, infinities
and NaN, lines that are not sorted (PyTorch's halving gives their answer), strided
operands, the sequence and the values of two dtypes (compared in the promoted one).
Bad arguments raise the CPU's errors; none of the valid calls falls back."""

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from opinfo_sweep import assert_raises_as_cpu, assert_same_outcome, opinfo_tests, same_bytes

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
          torch.int8, torch.uint8]
OPS = [op for op in op_db if op.name in ("searchsorted", "bucketize")]

test_opinfo_forward_matches_cpu, _ = opinfo_tests(OPS, DTYPES)

SPECIALS = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1.0, -1.0, 2.5]


def values_of(dtype, shape, generator):
    """Random values of dtype: small integers (so that ties are common) and, for floats,
    the specials above too."""
    x = torch.randint(-6, 7, shape, generator=generator).to(torch.float64) / 2
    if dtype.is_floating_point:
        specials = torch.tensor(SPECIALS, dtype=torch.float64)
        pick = torch.randint(0, 4, shape, generator=generator) == 0
        x = torch.where(pick, specials[torch.randint(0, len(SPECIALS), shape, generator=generator)], x)
    elif dtype == torch.uint8:
        x = x.abs()
    return x.to(dtype)


def no_new_fallbacks(before):
    return pypto_torch.fallback_ops() == before


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("lines", ["one", "per row", "unsorted"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_positions_equal_the_cpus(dtype, lines, side):
    """Sorted lines (NaN last, as torch.sort puts it) shared by every value or one per
    row, and unsorted ones; the values transposed; each side and both result dtypes."""
    generator = torch.Generator().manual_seed(DTYPES.index(dtype) * 6 + ["one", "per row", "unsorted"].index(lines) * 2
                                              + (side == "right"))
    values = values_of(dtype, (7, 33), generator).t()
    sequence = values_of(dtype, (1 if lines == "one" else 33, 19), generator)
    if lines != "unsorted":
        sequence = torch.sort(sequence, dim=-1).values
    if lines == "one":
        sequence = sequence[0]
    before = pypto_torch.fallback_ops()
    for out_int32 in (False, True):
        for right in ((side == "right"), False):
            assert_same_outcome(lambda d: torch.searchsorted(sequence.to(d), values.to(d), side=side,
                                                             right=right, out_int32=out_int32))
        if lines == "one":
            assert_same_outcome(lambda d: torch.bucketize(values.to(d), sequence.to(d), right=side == "right",
                                                          out_int32=out_int32))
    assert no_new_fallbacks(before)


def test_long_lines_and_many_values_split_over_the_cores():
    """200k values in 4096-element lines, strided lines (every other element); a line of
    4 MiB (searched with prefetches)."""
    generator = torch.Generator().manual_seed(5)
    sequence = torch.sort(torch.randn(4, 8192, generator=generator), dim=-1).values[:, ::2]
    values = torch.randn(4, 50000, generator=generator)
    before = pypto_torch.fallback_ops()
    assert_same_outcome(lambda d: torch.searchsorted(sequence.to(d), values.to(d)))
    assert_same_outcome(lambda d: torch.searchsorted(sequence.to(d)[0], values.to(d), right=True))
    long_line = torch.sort(torch.randn(1 << 20, generator=generator)).values
    assert_same_outcome(lambda d: torch.searchsorted(long_line.to(d), values.to(d)))
    assert no_new_fallbacks(before)


@pytest.mark.parametrize("sequence_dtype, values_dtype", [(torch.int32, torch.float32), (torch.float16, torch.float64),
                                                          (torch.uint8, torch.int8), (torch.bfloat16, torch.float16),
                                                          (torch.int64, torch.float32)])
def test_two_dtypes_compare_in_the_promoted_one(sequence_dtype, values_dtype):
    """PyTorch converts both to their common dtype: 2.5 between int32 2 and 3, float16's
    rounding of 0.1 apart from float64's 0.1."""
    sequence = torch.tensor([-3, 0, 0.1, 2, 3, 100]).to(sequence_dtype).sort().values
    values = torch.tensor([-4, 0.1, 0.10000001, 2.5, 3, 99.5, 101]).to(values_dtype)
    before = pypto_torch.fallback_ops()
    for right in (False, True):
        assert_same_outcome(lambda d: torch.searchsorted(sequence.to(d), values.to(d), right=right))
    assert no_new_fallbacks(before)


@pytest.mark.parametrize("number", [2, 2.5, -1, 0.1, True, 300])
@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8, torch.float32, torch.bfloat16])
def test_a_number_searched_for_promotes_as_a_number(number, dtype):
    """searchsorted(seq, number) and bucketize(number, seq): the number takes the
    sequence's dtype unless its category is higher (a float number in an integer
    sequence: the default float dtype), as in PyTorch's binary ops."""
    sequence = torch.tensor([0, 1, 2, 3, 5, 200]).to(dtype)
    before = pypto_torch.fallback_ops()
    for right in (False, True):
        assert_same_outcome(lambda d: torch.searchsorted(sequence.to(d), number, right=right))
        assert_same_outcome(lambda d: torch.bucketize(number, sequence.to(d), right=right, out_int32=True))
        assert_same_outcome(lambda d: torch.searchsorted(sequence.to(d), number, right=right,
                                                         out=torch.empty((), dtype=torch.long, device=d)))
    assert no_new_fallbacks(before)


@pytest.mark.parametrize("shape", [(10,), (3, 10)])
def test_a_sorter_orders_the_sequence(shape):
    """sorter=argsort(sequence): the positions in the sorted order, as on the CPU."""
    generator = torch.Generator().manual_seed(3)
    sequence = torch.randint(-5, 5, shape, generator=generator).float()
    sorter = torch.argsort(sequence, dim=-1, stable=True)
    values = torch.randint(-6, 6, shape[:-1] + (8,), generator=generator).float()
    before = pypto_torch.fallback_ops()
    for side in ("left", "right"):
        assert_same_outcome(lambda d: torch.searchsorted(sequence.to(d), values.to(d), side=side, sorter=sorter.to(d)))
    assert no_new_fallbacks(before)


def test_out_is_resized_strided_or_the_values_themselves():
    """out= of the wrong shape is resized (PyTorch's rule); a strided out keeps its strides;
    out may be the (int64) values being searched for."""
    sequence = torch.tensor([0, 2, 4, 6])
    values = torch.tensor([[5, -1, 6], [2, 9, 3]])
    expected = torch.searchsorted(sequence, values)
    before = pypto_torch.fallback_ops()
    out = torch.empty(7, dtype=torch.long, device="pto")
    torch.searchsorted(sequence.to("pto"), values.to("pto"), out=out)
    assert same_bytes(out.cpu(), expected)
    base = torch.full((3, 2), -7, dtype=torch.long, device="pto")
    strided = base.t()
    torch.searchsorted(sequence.to("pto"), values.to("pto"), out=strided)
    assert strided.stride() == (1, 2) and same_bytes(strided.cpu(), expected)
    in_place = values.to("pto")
    torch.searchsorted(sequence.to("pto"), in_place, out=in_place)
    assert same_bytes(in_place.cpu(), expected)
    empty = torch.searchsorted(sequence.to("pto"), torch.empty(2, 0, device="pto", dtype=torch.long))
    assert empty.shape == (2, 0) and empty.dtype == torch.long
    assert no_new_fallbacks(before)


BAD_CALLS = {
    "side neither left nor right": lambda d: torch.searchsorted(torch.arange(4., device=d), torch.ones(2, device=d),
                                                                side="middle"),
    "side left while right": lambda d: torch.searchsorted(torch.arange(4., device=d), torch.ones(2, device=d),
                                                          right=True, side="left"),
    "rows that do not match": lambda d: torch.searchsorted(torch.zeros(3, 4, device=d), torch.zeros(2, 5, device=d)),
    "a 0-dim sequence": lambda d: torch.searchsorted(torch.tensor(1., device=d), torch.ones(2, device=d)),
    "a number with rows of lines": lambda d: torch.searchsorted(torch.zeros(3, 4, device=d), 1.0),
    "a bool sequence": lambda d: torch.searchsorted(torch.tensor([False, True], device=d),
                                                    torch.tensor([True], device=d)),
    "a complex sequence": lambda d: torch.searchsorted(torch.zeros(3, dtype=torch.cfloat, device=d),
                                                       torch.zeros(2, dtype=torch.cfloat, device=d)),
    "out of the wrong dtype": lambda d: torch.searchsorted(torch.arange(4., device=d), torch.ones(2, device=d),
                                                           out=torch.empty(2, dtype=torch.int32, device=d)),
    "a sorter of another size": lambda d: torch.searchsorted(torch.arange(4., device=d), torch.ones(2, device=d),
                                                             sorter=torch.arange(3, device=d)),
    "a sorter not int64": lambda d: torch.searchsorted(torch.arange(4., device=d), torch.ones(2, device=d),
                                                       sorter=torch.arange(4, device=d, dtype=torch.int32)),
    "a sorter out of range": lambda d: torch.searchsorted(torch.arange(4., device=d), torch.ones(2, device=d),
                                                          sorter=torch.tensor([0, 1, 2, 4], device=d)),
    "a negative sorter": lambda d: torch.searchsorted(torch.arange(4., device=d), torch.ones(2, device=d),
                                                      sorter=torch.tensor([0, -1, 2, 3], device=d)),
    "bucketize over rows": lambda d: torch.bucketize(torch.ones(2, device=d), torch.zeros(2, 3, device=d)),
}


@pytest.mark.parametrize("call", BAD_CALLS.values(), ids=BAD_CALLS.keys())
def test_bad_arguments_raise_the_cpus_error(call):
    """The CPU's exception and message, and the device stays usable."""
    assert_raises_as_cpu(call, RuntimeError)
    assert torch.searchsorted(torch.arange(4., device="pto"), torch.tensor([1.5], device="pto")).item() == 2
