"""Elementwise ops run natively on pto (PTO instructions), matching CPU on
PyTorch's own OpInfo samples across dtypes, forward and backward."""

import itertools
import math
import re

import mpmath
import numpy
import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from opinfo_sweep import check_forward, opinfo_tests, same_bytes

NATIVE = {
    "add", "sub", "mul", "div", "maximum", "minimum", "pow", "bitwise_and", "bitwise_or",
    "bitwise_xor", "eq", "ne", "lt", "le", "gt", "ge", "abs", "neg", "sign", "bitwise_not", "exp",
    "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan",
    "tanh", "sigmoid", "erf", "erfc", "log10", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
    "atanh", "lgamma", "floor", "ceil", "round", "trunc", "frac", "copysign", "hypot", "xlogy",
    "nn.functional.silu",
    "nn.functional.relu", "nn.functional.gelu", "where", "fill", "zero_", "addcmul", "addcdiv",
    "lerp", "nn.functional.mse_loss", "floor_divide", "bitwise_left_shift", "bitwise_right_shift", "sgn",
    "__rpow__", "clamp", "clamp_min", "clamp_max", "nn.functional.hardtanh", "nn.functional.relu6",
    "nn.functional.hardsigmoid", "nn.functional.hardswish", "nn.functional.leaky_relu", "nan_to_num",
    "nn.functional.elu", "nn.functional.selu", "nn.functional.celu", "nn.functional.softplus",
    "nn.functional.logsigmoid", "nn.functional.hardshrink", "nn.functional.softshrink", "fmax", "fmin",
    "logaddexp", "logaddexp2", "signbit", "nn.functional.mish",
}
OPS = [op for op in op_db
       if op.name in NATIVE and op.variant_test_name in ("", "no_rounding_mode", "trunc_rounding", "floor_rounding")]
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool]


def test_the_sweep_covers_every_native_family():
    assert {op.name for op in OPS} == NATIVE


test_opinfo_forward_matches_cpu, test_opinfo_gradients_match_cpu = opinfo_tests(
    OPS, DTYPES)


@pytest.mark.parametrize("op", [op for op in OPS if op.name in ("logaddexp", "logaddexp2")], ids=lambda op: op.name)
def test_complex_logaddexp_takes_the_cpus_kernel(op):
    """Complex operands have no maximum to shift by: they take the CPU's kernel (which
    has one for logaddexp, and for logaddexp2 its error)."""
    for dtype in (torch.complex64, torch.complex128):
        sample = next(iter(op.sample_inputs("cpu", dtype)))
        try:
            expected = op(sample.input, *sample.args, **sample.kwargs)
        except Exception as error:  # noqa: BLE001 -- the CPU's error, checked on pto
            with pytest.raises(type(error)):
                op(sample.input.to("pto"), *(a.to("pto") for a in sample.args), **sample.kwargs)
            continue
        got = op(sample.input.to("pto"), *(a.to("pto") for a in sample.args), **sample.kwargs)
        assert_close(got.cpu(), expected)


@pytest.mark.parametrize("op", [op for op in OPS if op.name in ("add", "sub", "lerp")], ids=lambda op: op.name)
def test_complex_alpha_and_weight_match_cpu(op):
    """The instructions' immediates are real: a complex alpha (add, sub) or weight
    (lerp) takes the CPU path instead of failing to convert to double."""
    for dtype in (torch.complex64, torch.complex128):
        assert check_forward(op, dtype, rtol=1e-5, atol=1e-5) > 0
    a, b = torch.randn(5, dtype=torch.complex64), torch.randn(5, dtype=torch.complex64)
    for alpha in (0.25 + 0.5j, 0.75 - 0.5j):
        assert_close(torch.add(a.to("pto"), b.to("pto"), alpha=alpha).cpu(), torch.add(a, b, alpha=alpha))
        assert_close(torch.lerp(a.to("pto"), b.to("pto"), alpha).cpu(), torch.lerp(a, b, alpha))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_lerp_with_a_tensor_weight_gives_the_cpus_bits(dtype):
    """lerp with a weight per element is one tlerpw, from the nearer end as the CPU's vector
    loop (weights across 0.5 and 1, NaN among them): the CPU's bits contiguous, broadcast
    (a weight per row, an end per column), in place, into out=, and with a CPU scalar
    weight; dtypes PyTorch refuses still raise its errors."""
    generator = torch.Generator().manual_seed(9)
    start = (torch.randn(64, 1031, generator=generator) * 4).to(dtype)
    end = (torch.randn(64, 1031, generator=generator) * 4).to(dtype)
    weight = (torch.rand(64, 1031, generator=generator) * 3 - 1).to(dtype)
    weight[0, :8] = torch.tensor([0.5, -0.5, 0.49, 1.0, 0.0, float("nan"), 2.0, -1.0]).to(dtype)
    before = pypto_torch.fallback_ops()
    cases = [(start, end, weight), (start, end[:1], weight[:, :1]), (start[:, ::3], end[:, ::3], weight[:, ::3])]
    for a, b, w in cases:
        want = torch.lerp(a, b, w)
        assert same_bytes(torch.lerp(a.to("pto"), b.to("pto"), w.to("pto")).cpu(), want)
        out = torch.empty(0, dtype=dtype, device="pto")
        torch.lerp(a.to("pto"), b.to("pto"), w.to("pto"), out=out)
        assert same_bytes(out.cpu(), want)
        in_place = a.to("pto")
        in_place.lerp_(b.to("pto"), w.to("pto"))
        assert same_bytes(in_place.cpu(), want)
    scalar = torch.tensor(0.7, dtype=dtype)
    assert same_bytes(torch.lerp(start.to("pto"), end.to("pto"), scalar).cpu(), torch.lerp(start, end, scalar))
    assert pypto_torch.fallback_ops() == before
    with pytest.raises(RuntimeError, match="expected dtype .* for `weight` but got dtype"):
        torch.lerp(start.to("pto"), end.to("pto"), weight.double().to("pto") if dtype != torch.float64 else
                   weight.float().to("pto"))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        start[:1].to("pto").lerp_(end.to("pto"), weight.to("pto"))


@pytest.mark.parametrize("expression", [
    lambda a, b: a + b * 2, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / b,
    lambda a, b: torch.maximum(a, b), lambda a, b: a > b, lambda a, b: torch.where(a > b, a, b),
    lambda a, b: a.exp(), lambda a, b: a.sigmoid(), lambda a, b: torch.nn.functional.gelu(a),
    lambda a, b: a.relu(), lambda a, b: a.abs().sqrt(), lambda a, b: a.to(torch.float16),
    lambda a, b: a.t().contiguous(), lambda a, b: a.add_(1), lambda a, b: a.fill_(3),
])
def test_common_ops_do_not_fall_back(expression):
    a, b = torch.randn(8, 8, device="pto"), torch.randn(8, 8, device="pto")
    before = pypto_torch.fallback_ops()
    expression(a, b)
    assert pypto_torch.fallback_ops() == before


def test_type_promotion_and_scalars_follow_torch():
    x = torch.arange(6).reshape(2, 3)
    p = x.to("pto")
    for result, expected in [(p + 1.5, x + 1.5), (p / 2, x / 2), (p * True, x * True),
                             (p.exp(), x.exp()), (p > 2.5, x > 2.5), (p.half() + p, x.half() + x),
                             (torch.tensor(2.0) * p, torch.tensor(2.0) * x)]:
        assert result.dtype == expected.dtype
        assert_close(result.cpu(), expected)


BROADCAST_SHAPES = [(), (1,), (4,), (1, 4), (4, 1), (3, 4), (1, 1), (3, 1, 4), (1, 3, 1), (2, 3, 4), (2, 1, 4),
                    (1, 1, 4), (2, 3, 1), (1, 3, 4)]


def test_a_binary_results_layout_is_the_cpus_for_every_broadcast():
    """The result's strides are TensorIterator's on the CPU (contiguous inputs of any
    broadcast give a contiguous result, which pto lays out without building one), also
    with size-1 dimensions and transposed operands."""
    generator = torch.Generator().manual_seed(0)
    cases = 0
    for shape_a, shape_b in itertools.product(BROADCAST_SHAPES, BROADCAST_SHAPES):
        a, b = torch.randn(shape_a, generator=generator), torch.randn(shape_b, generator=generator)
        for x, y in ((a, b), (a.mT if a.dim() >= 2 else a, b), (a, b.mT if b.dim() >= 2 else b)):
            try:
                expected = x + y
            except RuntimeError:
                continue  # shapes that do not broadcast: test_shape_mismatch_error_and_device_stays_usable
            actual = x.to("pto") + y.to("pto")
            assert actual.stride() == expected.stride(), (x.shape, x.stride(), y.shape, y.stride())
            assert_close(actual.cpu(), expected, rtol=0, atol=0)
            cases += 1
    assert cases > 300


def test_in_place_and_out_forms():
    x = torch.randn(4, 5)
    p = x.to("pto")
    p.mul_(2).add_(1, alpha=3)
    assert_close(p.cpu(), x * 2 + 3)
    out = torch.empty(0, device="pto")
    torch.add(p, p, out=out)
    assert out.shape == (4, 5)
    assert_close(out.cpu(), (x * 2 + 3) * 2)
    ints = torch.arange(4, device="pto")
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        ints.add_(1.5)
    with pytest.raises(RuntimeError, match="For integral input tensors, argument alpha must not be a floating"):
        torch.add(ints, ints, alpha=0.5)


def test_shape_mismatch_error_and_device_stays_usable():
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size of tensor b \(4\)"):
        torch.ones(3, device="pto") + torch.ones(4, device="pto")
    assert (torch.ones(3, device="pto") + 1).sum().item() == 6


def test_integer_overflow_wraps_like_cpu():
    x = torch.tensor([127, -128, 100], dtype=torch.int8)
    assert torch.equal((x.to("pto") + 100).cpu(), x + 100)
    big = torch.tensor([2**62, -(2**62)], dtype=torch.int64)
    assert torch.equal((big.to("pto") * 4).cpu(), big * 4)


def test_nan_inf_and_negative_zero():
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1.0])
    p = x.to("pto")
    for fn in [torch.exp, torch.log, torch.sqrt, torch.neg, torch.abs, torch.sign, torch.relu,
               torch.sigmoid, lambda t: torch.maximum(t, t.flip(0)), lambda t: t * 0]:
        assert_close(fn(p).cpu(), fn(x), equal_nan=True)
    assert torch.equal(torch.signbit(p.neg().cpu()), torch.signbit(x.neg()))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8, torch.float32])
def test_integer_division_family_matches_cpu_at_the_edges(dtype):
    info = torch.iinfo(dtype) if not dtype.is_floating_point else None
    values = [-7, -1, 0, 1, 7, 5, -6] + ([info.min, info.max] if info else [float("inf"), -0.0, float("nan")])
    a = torch.tensor(values, dtype=dtype).repeat_interleave(3)
    # Not the lowest value over -1: PyTorch's CPU floor division traps on it (pto wraps, as for trunc).
    b = torch.tensor([3, -2, -5], dtype=dtype).repeat(len(values)) if dtype != torch.uint8 else \
        torch.tensor([3, 2, 255], dtype=dtype).repeat(len(values))
    before = pypto_torch.fallback_ops()
    for op in (lambda x, y: torch.div(x, y, rounding_mode="floor"), lambda x, y: torch.div(x, y, rounding_mode="trunc"),
               torch.fmod, torch.remainder, lambda x, y: x // y):
        assert_close(op(a.to("pto"), b.to("pto")).cpu(), op(a, b), equal_nan=True)
    assert pypto_torch.fallback_ops() == before


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int64 if t.dtype == torch.float64 else torch.int32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_floating_fmod_remainder_floor_divide_rows_are_exact(dtype):
    """Contiguous rows run a vector fmod (Sleef's, libm's in the lanes where Sleef answers
    NaN); strided ones the scalar divisionOp. Both must agree bit for bit over
    random bit patterns, wide exponents and the special values, and match the CPU where the
    quotient is finite. Where it is not, the CPU's own vector loop answers NaN
    (fmod(1e38, 1e-30)); pto answers the exact remainder, as libm and the CPU's scalar tail."""
    g = torch.Generator().manual_seed(0)
    n = 1 << 14
    words = torch.randint(-2**31, 2**31 - 1, (n,), generator=g, dtype=torch.int64)
    raw = words.to(torch.int32).view(torch.float32) if dtype == torch.float32 else \
        (words * 2654435761 + words).view(torch.float64)
    scaled = torch.randn(n, generator=g, dtype=dtype) * torch.exp2(torch.randint(-30, 30, (n,), generator=g).to(dtype))
    special = torch.tensor([0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 1e38, 1e-38, 3.0, -3.0, 0.7],
                           dtype=dtype).repeat(20)
    a = torch.cat([raw, scaled, special])
    b = a[torch.randperm(a.numel(), generator=g)]
    for op in (torch.fmod, torch.remainder, torch.floor_divide):
        for divisor in (b, 0.7, -3.0):
            ap = a.to("pto")
            bp = b.to("pto") if isinstance(divisor, torch.Tensor) else divisor
            rows = op(ap, bp).cpu()
            strided_a = torch.stack([ap, ap], 1)[:, 0]
            strided_b = torch.stack([bp, bp], 1)[:, 0] if isinstance(divisor, torch.Tensor) else divisor
            assert not strided_a.is_contiguous()
            scalar = op(strided_a, strided_b).cpu()
            assert torch.equal(_bits(rows)[~rows.isnan()], _bits(scalar)[~rows.isnan()]), op
            assert torch.equal(rows.isnan(), scalar.isnan()), op
            expected = op(a, divisor)
            finite = (a / divisor).isfinite()
            assert_close(rows[finite], expected[finite], rtol=0, atol=0, equal_nan=True)
    huge = torch.full((64,), 1e38, dtype=dtype, device="pto")
    tiny = torch.full((64,), 1e-30, dtype=dtype, device="pto")
    exact = math.fmod(float(huge[0]), float(tiny[0]))
    assert torch.fmod(huge, tiny).cpu().tolist() == [exact] * 64


def test_integer_division_by_zero_raises_at_the_next_sync(fails_at_next_sync):
    out = fails_at_next_sync('y = x // torch.zeros(6, dtype=torch.int64, device="pto")',
                             setup='x = torch.arange(6, device="pto")')
    assert "tfloordiv failed" in out and "ZeroDivisionError" in out


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32, torch.int64])
def test_shifts_past_the_width_match_cpu(dtype):
    bits = torch.iinfo(dtype).bits
    a = torch.tensor([1, 5, 100, -8 if dtype.is_signed else 200, torch.iinfo(dtype).min], dtype=dtype)
    b = torch.tensor([0, 3, bits - 1, bits, bits + 3], dtype=dtype)
    before = pypto_torch.fallback_ops()
    for op in (lambda x, y: x << y, lambda x, y: x >> y, lambda x, y: x << 2, lambda x, y: x >> 1,
               torch.bitwise_left_shift, torch.bitwise_right_shift):
        assert torch.equal(op(a.to("pto"), b.to("pto")).cpu(), op(a, b))
    x = a.to("pto")
    x <<= 1
    assert torch.equal(x.cpu(), a << 1)
    assert pypto_torch.fallback_ops() == before


def test_outputs_past_the_last_level_cache_match_cpu_and_small_pieces():
    # 80 MiB outputs, more than half of any host's last-level cache: the kernels stream
    # them out with non-temporal stores (csrc/runtime/sim/kernels/stream_copy.h). Sums are
    # exact IEEE operations, so equal to the CPU's; exp, addcmul and sigmoid must equal
    # the same kernels run on pieces too small to stream. The views start one element
    # in, so their rows start off the vector boundaries.
    n = 20 * 2**20
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n + 1, generator=g), torch.randn(n + 1, generator=g)
    a_pto, b_pto = a.to("pto")[1:], b.to("pto")[1:]
    assert torch.equal(torch.add(a_pto, b_pto, alpha=0.5).cpu(), torch.add(a[1:], b[1:], alpha=0.5))
    rows = torch.randn(n // 4096, 4097, generator=g)  # rows of 4096 from a padded input: streamed row by row
    assert torch.equal((rows.to("pto")[:, 1:] * 3).cpu(), rows[:, 1:] * 3)
    pieces = 2**18  # 1 MiB of output
    for name, op in [("exp", torch.exp), ("addcmul", lambda x: torch.addcmul(x, x, b_pto, value=0.25)),
                     ("sigmoid", torch.sigmoid)]:
        whole = op(a_pto).cpu()
        parts = torch.cat([op(a_pto[start:start + pieces]).cpu() if name != "addcmul" else
                           torch.addcmul(a_pto[start:start + pieces], a_pto[start:start + pieces],
                                         b_pto[start:start + pieces], value=0.25).cpu()
                           for start in range(0, n, pieces)])
        assert torch.equal(whole, parts), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", ["erf", "erfc"])
def test_erf_and_erfc_within_their_libraries_bounds_contiguous_and_strided(name, dtype):
    """Contiguous erf and erfc rows run on MKL's vector math in its high-accuracy mode
    (1 ulp, the library torch's CPU kernels call for them), strided elements on the
    scalar forms: glibc's erf (2 ulp, its list of known errors), Sleef's float erfc
    (1.5 ulp), glibc's double erfc (5 ulp). Each within its bound of the float64
    function, over both tails, zeros, infinities and NaN; bfloat16 rows widen to float32
    and round once (half an ulp of bfloat16 more, inside the same bound)."""
    x = torch.cat([torch.logspace(-30, 1.2, 4001, dtype=torch.float64), torch.linspace(-9, 9, 4001, dtype=torch.float64)])
    x = torch.cat([x, -x, torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan")], dtype=torch.float64)])
    x = x.to(dtype)
    op = getattr(torch, name)
    exact = op(x.double())
    # ulps of the result's dtype at the exact value's magnitude (where it rounds to 0,
    # the dtype's smallest subnormal)
    rounded = exact.to(dtype).abs()
    ulp = torch.nextafter(rounded, torch.tensor(float("inf"), dtype=dtype)).double() - rounded.double()
    strided_bound = 5.0 if (name, dtype) == ("erfc", torch.float64) else 2.0
    for got, reference, room, bound in ((op(x.to("pto")).cpu(), exact, ulp, 1.0),
                                        (op(x.to("pto")[::2]).cpu(), exact[::2], ulp[::2], strided_bound)):
        assert torch.equal(got.isnan(), reference.isnan())
        finite = ~reference.isnan()
        error = (got.double() - reference)[finite].abs() / room[finite]
        assert error.max() <= bound, f"{name} {dtype}: {error.max():.2f} ulp"


@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_float32_gelu_is_within_4u_of_x_and_keeps_the_exact_zeros_infinities_and_nans(layout):
    """float32 gelu (erf) is x Phi(x) with Phi a rational fit of degrees 5 and 5 (scripts/
    fit_gelu_erf.py): within 4u |x| (u = 2^-24) of the float64 result, half the smallest
    subnormal more where the result underflows -- torch's own formula's class (it measures
    6.3u |x|). Beyond |x| = 4 sqrt 2 Phi is its step, so large negative x give -0 as the
    exact function rounds, infinity gives infinity, -infinity and NaN NaN (0 * inf)."""
    torch.manual_seed(0)
    x = torch.cat([torch.linspace(-12, 12, 400_001), torch.randn(400_000) * 3, torch.logspace(-40, 38, 2001),
                   -torch.logspace(-40, 38, 2001)])
    # strided: every other element of a pto buffer (.to() would make a CPU view dense)
    on_pto = x.to("pto") if layout == "contiguous" else torch.stack([x, x], 1).to("pto")[:, 0]
    assert on_pto.is_contiguous() == (layout == "contiguous")
    exact = F.gelu(x.double())
    got = F.gelu(on_pto).cpu()
    bound = 4 * 2.0**-24 * x.double().abs() + 2.0**-150
    assert ((got.double() - exact).abs() <= bound).all()
    special = torch.tensor([0.0, -0.0, float("inf"), 3e38, -100.0, -3e38, -float("inf"), float("nan")])
    got = F.gelu(special.to("pto")).cpu()
    expected = torch.tensor([0.0, -0.0, float("inf"), 3e38, -0.0, -0.0])
    assert torch.equal(got[:6], expected) and torch.equal(got[:6].signbit(), expected.signbit())
    assert got[6:].isnan().all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("name", ["sinh", "cosh", "asinh", "acosh"])
def test_hyperbolic_functions_stay_finite_up_to_where_their_results_overflow(name, dtype):
    """Sleef's vector sinh and cosh overflow from |x| = 88.7 (float32) or 709.8 (float64)
    on, its asinh and acosh once x^2 does (|x| from 1.8e19, 1.3e154); the true results
    are finite up to 89.4 and 710.5, and for every finite x. pto recomputes those lanes
    with libm (2 ulp); torch's CPU sinh and cosh return infinity there."""
    finfo = torch.finfo(dtype)
    if name in ("sinh", "cosh"):
        edge = 89.41 if dtype == torch.float32 else 710.47
        x = torch.linspace(edge - 2.0, edge, 64, dtype=torch.float64)
        x = torch.cat([x, -x]) if name == "sinh" else x
    else:
        x = torch.logspace(17, 38.5 if dtype == torch.float32 else 308.2, 64, dtype=torch.float64)
        x = torch.cat([x, -x]) if name == "asinh" else x
    x = torch.cat([x, torch.tensor([float("inf"), float("nan")], dtype=torch.float64)]).to(dtype)
    op = getattr(torch, name)
    # NumPy's float64 functions are libm's (torch's CPU float64 sinh and cosh overflow early too)
    with numpy.errstate(over="ignore", invalid="ignore"):
        exact = torch.from_numpy(getattr(numpy, name.replace("as", "arcs").replace("ac", "arcc"))(x.double().numpy()))
    got = op(x.to("pto")).cpu().double()
    finite = exact.abs() <= finfo.max
    assert torch.isfinite(got[finite]).all()
    rounded = exact[finite].to(dtype).abs()
    ulp = torch.nextafter(rounded, torch.tensor(float("inf"), dtype=dtype)).double() - rounded.double()
    assert ((got[finite] - exact[finite]).abs() / ulp).max() <= 2.0
    assert torch.equal(got[~finite].isnan(), exact[~finite].isnan())
    assert torch.equal(got[~finite & ~exact.isnan()], exact[~finite & ~exact.isnan()].to(dtype).double())


SPECIALS = [0.0, -0.0, 1.0, -1.0, 2.0, -2.5, 0.5, -0.5, 1e-30, -1e-30, 3.0e38, -3.0e38,
            float("inf"), float("-inf"), float("nan")]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_frac_copysign_hypot_and_xlogy_keep_the_cpus_zeros_infinities_and_nans(dtype):
    """frac(x) = x - trunc(x) (NaN at infinities, +0 from -0), copysign's sign of -0.0 and
    of NaN, hypot's infinity beside a NaN, xlogy's 0 where x = 0 (even at y = 0 or inf)
    and NaN where y is: the CPU's values, signs of zeros included."""
    x = torch.tensor(SPECIALS, dtype=dtype)
    a, b = x.repeat_interleave(len(SPECIALS)), x.repeat(len(SPECIALS))
    for name, args in (("frac", (x,)), ("copysign", (a, b)), ("hypot", (a, b)), ("xlogy", (a, b))):
        got = getattr(torch, name)(*(t.to("pto") for t in args)).cpu()
        expected = getattr(torch, name)(*args)
        assert torch.equal(got.isnan(), expected.isnan()), name
        kept = ~expected.isnan()
        assert torch.equal(got[kept], expected[kept]), name
        assert torch.equal(got[kept].signbit(), expected[kept].signbit()), name
    assert torch.equal(torch.copysign(x.to("pto"), -1).cpu().signbit(), torch.ones(len(SPECIALS), dtype=torch.bool))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_lgamma_is_within_sleefs_bound_at_its_roots_and_poles(dtype):
    """lgamma is Sleef's, as the CPU's vector kernels: within 1 ulp of the true value
    (mpmath's, at 40 digits) for x > 0, within max(1 ulp, 1e-8 (float32) or 1e-15
    (float64)) below 0, at lgamma's roots (1, 2, -2.457...) and beside its poles too,
    strided as well as contiguous. Poles give +inf, as on the CPU."""
    generator = torch.Generator().manual_seed(0)
    x = torch.cat([torch.rand(2000, generator=generator, dtype=torch.float64) * 40 - 20,
                   torch.linspace(0.99, 2.01, 513, dtype=torch.float64),
                   torch.linspace(-2.46, -2.45, 257, dtype=torch.float64),
                   torch.tensor([1e-30, 3.0e38, 1e30, 0.5, 2.5])]).to(dtype)
    with mpmath.workdps(40):
        exact = torch.tensor([float(mpmath.loggamma(mpmath.mpf(v)).real) for v in x.double().tolist()],
                             dtype=torch.float64)
    finite = exact.abs() <= torch.finfo(dtype).max
    rounded = exact[finite].to(dtype).abs()
    ulp = torch.nextafter(rounded, torch.tensor(float("inf"), dtype=dtype)).double() - rounded.double()
    absolute = torch.where(x[finite] < 0, 1e-8 if dtype == torch.float32 else 1e-15, 0.0).double()
    for got in (torch.lgamma(x.to("pto")).cpu(), torch.lgamma(x.repeat_interleave(2).to("pto")[::2]).cpu()):
        got = got.double()
        assert torch.equal(got[~finite], exact[~finite].to(dtype).double())  # 3e38: lgamma overflows float32
        assert ((got[finite] - exact[finite]).abs() <= torch.maximum(ulp, absolute)).all()
        assert_close(got, torch.lgamma(x).double())
    poles = torch.tensor([0.0, -0.0, -1.0, -2.0, -50.0, float("inf"), float("-inf"), float("nan")], dtype=dtype)
    assert torch.equal(torch.lgamma(poles.to("pto")).cpu()[:-1], torch.lgamma(poles)[:-1])
    assert torch.lgamma(poles.to("pto")).cpu()[-1].isnan()
    assert torch.lgamma(torch.arange(1, 6, device="pto")).dtype == torch.float32


@pytest.mark.parametrize("name", ["atan2_", "hypot_"])
def test_in_place_binary_functions_run_natively(name):
    """atan2_ and hypot_ (the BinaryDefaultInplace rows' op_) are their instructions
    in place, with the CPU's values."""
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(5, 7, generator=generator), torch.randn(5, 7, generator=generator)
    before = pypto_torch.fallback_ops()
    got = getattr(a.to("pto"), name)(b.to("pto"))
    assert pypto_torch.fallback_ops() == before
    assert_close(got.cpu(), getattr(a.clone(), name)(b))


POW_STEPS = [0, 1, 2, 3, -2, 0.5, -0.5, -1, True, False, 2.5, 2.001]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32,
                                   torch.uint8, torch.bool])
def test_pow_with_a_number_takes_the_cpus_steps(dtype):
    """x ** n for the exponents the CPU's kernel computes as a fill, a copy, products
    (2, 3, -2: its bits, integers wrapping) or roots (0.5, -0.5, -1), and a general
    exponent, in every form, natively. sqrt and rsqrt are correctly rounded on pto;
    the CPU's (MKL's vector sqrt here) may be 1 ulp off, the one tolerance allowed."""
    generator = torch.Generator().manual_seed(0)
    if dtype.is_floating_point:
        x = torch.cat([torch.randn(500, generator=generator, dtype=torch.float64) * 30,
                       torch.tensor([0.0, -0.0, 1e-30, -1e30, float("inf"), float("-inf"), float("nan")],
                                    dtype=torch.float64)]).to(dtype)
    elif dtype == torch.bool:
        x = torch.rand(100, generator=generator) > 0.5
    else:
        x = torch.randint(0 if dtype == torch.uint8 else -60, 60, (300,), generator=generator).to(dtype)
    before = pypto_torch.fallback_ops()
    for exponent in POW_STEPS:
        if not dtype.is_floating_point and exponent in (-2, -1) and not isinstance(exponent, bool):
            continue  # the CPU's error: test_pow_refuses_what_the_cpu_refuses
        expected = torch.pow(x, exponent)
        results = [torch.pow(x.to("pto"), exponent), torch.pow(x.to("pto"), exponent, out=torch.empty(
            0, dtype=expected.dtype, device="pto"))]
        if expected.dtype == x.dtype:
            results.append(x.to("pto").pow_(exponent))
        roots = exponent in (0.5, -0.5)
        general = not isinstance(exponent, bool) and exponent in (2.5, 2.001)
        for got in results:
            assert got.dtype == expected.dtype, exponent
            if roots or general:  # 1.5 ulp apart at most (Sleef's pow 1, libm's 0.5): <= 3 eps relative
                assert_close(got.cpu(), expected, rtol=3 * torch.finfo(expected.dtype).eps, atol=0, equal_nan=True)
            else:
                assert_close(got.cpu(), expected, rtol=0, atol=0, equal_nan=True)
    assert pypto_torch.fallback_ops() == before
    if dtype.is_floating_point:
        square = (x.to("pto") * x.to("pto")).cpu()
        assert_close(torch.pow(x.to("pto"), 2).cpu(), square, rtol=0, atol=0, equal_nan=True)


def test_pow_refuses_what_the_cpu_refuses():
    """Integers to negative integer powers raise the CPU's error; an out of a narrower
    dtype than the result the CPU's cast error; the device stays usable."""
    x = torch.arange(1, 5)
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        torch.pow(x.to("pto"), -2)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        x.to("pto").pow_(0.5)
    assert torch.equal(torch.pow(x.to("pto"), 3).cpu(), x ** 3)


CLAMP_BOUNDS = [(0, 1), (-1.0, 1.0), (None, 0.5), (-0.5, None), (1, -1), (float("nan"), 1.0), (0.0, float("nan")),
                (None, float("nan")), (-0.0, 0.0), (0.0, -0.0), (2, 100000)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32,
                                   torch.uint8])
def test_clamp_is_one_instruction_with_the_cpus_values_and_errors(dtype):
    """clamp, clamp_min/max, hardtanh and relu6 in every form run as one tclamp (or
    tmax/tmin) with the CPU's values: a NaN input or bound gives NaN, lower > upper
    gives the upper, a tie keeps the input's sign of zero; an integer clamped to a
    fraction is a float; the CPU's errors for an out of another dtype, an in-place
    promotion and a bound the dtype cannot hold."""
    generator = torch.Generator().manual_seed(0)
    if dtype.is_floating_point:
        x = torch.cat([torch.randn(200, generator=generator) * 3,
                       torch.tensor([0.0, -0.0, float("nan"), float("inf"), float("-inf"), 1.0, -1.0])]).to(dtype)
    else:
        x = torch.randint(0 if dtype == torch.uint8 else -100, 100, (200,), generator=generator).to(dtype)
    before = pypto_torch.fallback_ops()
    for low, high in CLAMP_BOUNDS:
        forms = [lambda t: torch.clamp(t, low, high), lambda t: t.clone().clamp_(low, high),
                 lambda t: torch.clamp(t, low, high, out=torch.empty(0, dtype=torch.clamp(x[:1], low, high).dtype,
                                                                     device=t.device))]
        if low is not None and high is not None:
            forms.append(lambda t: torch.nn.functional.hardtanh(t, low, high))
        elif low is not None:
            forms.append(lambda t: torch.clamp_min(t, low))
        else:
            forms.append(lambda t: torch.clamp_max(t, high))
        for form in forms:
            try:
                expected = form(x)
            except (RuntimeError, ValueError) as error:  # hardtanh's ValueError: low > high
                with pytest.raises(type(error), match=re.escape(str(error).split("\n")[0][:40])):
                    form(x.to("pto"))
                continue
            got = form(x.to("pto")).cpu()
            assert got.dtype == expected.dtype
            assert_close(got, expected, rtol=0, atol=0, equal_nan=True)
            if dtype.is_floating_point:
                kept = ~expected.isnan()
                assert torch.equal(got[kept].signbit(), expected[kept].signbit())
    assert pypto_torch.fallback_ops() == before
    assert_close(torch.nn.functional.relu6(x.to("pto")).cpu(), torch.nn.functional.relu6(x), rtol=0, atol=0,
                 equal_nan=True)
    with pytest.raises(RuntimeError, match="Found dtype Short but expected"):
        torch.clamp(x.to("pto"), 0, 1, out=torch.empty(0, dtype=torch.int16, device="pto"))


def assert_forms_give_the_cpus_bits(forms: dict, inputs: tuple, unsigned_zeros=(), exact_subnormals=()) -> None:
    """Each form on the CPU's inputs and on pto copies of them: the same dtype and bits
    (NaN where NaN), zeros' signs included but for the forms named in unsigned_zeros,
    and no fallback. The forms named in exact_subnormals may differ from the CPU by one
    unit of the smallest subnormal where the CPU's result is subnormal."""
    before = pypto_torch.fallback_ops()
    for name, form in forms.items():
        expected, got = form(*inputs), form(*(t.to("pto") for t in inputs)).cpu()
        assert got.dtype == expected.dtype, name
        if name in exact_subnormals:
            finfo = torch.finfo(expected.dtype)
            subnormal = (expected.abs() < finfo.tiny) & (expected != 0)
            assert ((got[subnormal] - expected[subnormal]).abs() <= finfo.smallest_normal * finfo.eps).all(), name
            expected = torch.where(subnormal, got, expected)
        assert_close(got, expected, rtol=0, atol=0, equal_nan=True, msg=name)
        kept = ~expected.isnan()
        if name in unsigned_zeros:
            kept &= expected != 0
        assert torch.equal(got[kept].signbit(), expected[kept].signbit()), name
    assert pypto_torch.fallback_ops() == before


ACTIVATION_FORMS = {
    "hardsigmoid": lambda t: torch.nn.functional.hardsigmoid(t),
    "hardsigmoid_": lambda t: torch.nn.functional.hardsigmoid(t.clone(), inplace=True),
    "hardswish": lambda t: torch.nn.functional.hardswish(t),
    "hardswish_": lambda t: torch.nn.functional.hardswish(t.clone(), inplace=True),
    "leaky_relu": lambda t: torch.nn.functional.leaky_relu(t),
    "leaky_relu 0.2": lambda t: torch.nn.functional.leaky_relu(t, 0.2),
    "leaky_relu -1.5": lambda t: torch.nn.functional.leaky_relu(t, -1.5),
    "leaky_relu_": lambda t: torch.nn.functional.leaky_relu(t.clone(), 0.3, inplace=True),
    "leaky_relu.out": lambda t: torch._C._nn.leaky_relu(t, 0.1, out=torch.empty(0, dtype=t.dtype, device=t.device)),
    "nan_to_num": lambda t: torch.nan_to_num(t),
    "nan_to_num 1.5 1e10 -2": lambda t: torch.nan_to_num(t, 1.5, 1e10, -2.0),
    "nan_to_num_": lambda t: t.clone().nan_to_num_(nan=-1.0),
    "nan_to_num.out": lambda t: torch.nan_to_num(t, 0.5, out=torch.empty(0, dtype=t.dtype, device=t.device)),
    "elu": lambda t: torch.nn.functional.elu(t),
    "elu 0.3": lambda t: torch.nn.functional.elu(t, 0.3),
    "elu -0.7": lambda t: torch.nn.functional.elu(t, -0.7),
    "elu_": lambda t: torch.nn.functional.elu(t.clone(), 1.3, inplace=True),
    "elu.out": lambda t: torch._C._nn.elu(t, 0.5, 1.5, 0.25, out=torch.empty(0, dtype=t.dtype, device=t.device)),
    "selu": lambda t: torch.nn.functional.selu(t),
    "celu 1.7": lambda t: torch.nn.functional.celu(t, 1.7),
    "softplus": lambda t: torch.nn.functional.softplus(t),
    "softplus 2 3": lambda t: torch.nn.functional.softplus(t, 2.0, 3.0),
    "softplus -0.5 1": lambda t: torch.nn.functional.softplus(t, -0.5, 1.0),
    "softplus.out": lambda t: torch._C._nn.softplus(t, 1.5, 4.0, out=torch.empty(0, dtype=t.dtype, device=t.device)),
    "logsigmoid": lambda t: torch.nn.functional.logsigmoid(t),
    "log_sigmoid.out": lambda t: torch._C._nn.log_sigmoid(t, out=torch.empty(0, dtype=t.dtype, device=t.device)),
    "hardshrink": lambda t: torch.nn.functional.hardshrink(t),
    "hardshrink 0.502": lambda t: torch.nn.functional.hardshrink(t, 0.502),  # bfloat16's rounds to 0.5039
    "hardshrink.out": lambda t: torch.hardshrink(t, 1.5, out=torch.empty(0, dtype=t.dtype, device=t.device)),
    "softshrink": lambda t: torch.nn.functional.softshrink(t),
    "softshrink 0.502": lambda t: torch.nn.functional.softshrink(t, 0.502),
    "softshrink.out": lambda t: torch._C._nn.softshrink(t, 2.5, out=torch.empty(0, dtype=t.dtype, device=t.device)),
    "threshold": lambda t: torch.nn.functional.threshold(t, 0.5, -2.0),
    "threshold_": lambda t: torch.nn.functional.threshold(t.clone(), -3.0001, 7.3, inplace=True),
    "threshold.out": lambda t: torch.threshold(t, 2.9999, 65504.0, out=torch.empty(0, dtype=t.dtype, device=t.device)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_activations_with_numbers_are_instructions_with_the_cpus_bits(dtype):
    """thardsigmoid, thardswish, tleakyrelu, tnantonum, telu (selu, celu), tsoftplus,
    tlogsigmoid, thardshrink, tsoftshrink and tthreshold compute the CPU kernels' expressions step for
    step: equal bits (signs of zero, NaN, -inf * 0 in hardswish, infinities replaced by the
    dtype's largest finite values, a replacement rounded to the dtype, elu's expm1 and
    softplus's and log_sigmoid's exp and log1p, which are Sleef's there as here), in every
    form, with no fallback. 2048 elements: the CPU's vector loop takes them all (its scalar
    loop, for a row's last few elements, keeps x's sign where softshrink gives 0)."""
    generator = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(2032, generator=generator) * 5,
                   torch.tensor([0.0, -0.0, float("nan"), float("inf"), float("-inf"), 3.0, -3.0, -3.0001,
                                 2.9999, 1e-30, -1e-30, 65504.0, -70000.0, 0.50390625, -0.5, -90.0])]).to(dtype)
    assert_forms_give_the_cpus_bits(ACTIVATION_FORMS, (x,))
    with pytest.raises(RuntimeError, match="nan_to_num: dtype of out: Int should be same as input"):
        torch.nan_to_num(x.to("pto"), out=torch.empty(0, dtype=torch.int32, device="pto"))


def test_float32_exp_of_subnormal_and_vanishing_results():
    """exp where the result is subnormal (x in [-103.97, -87.34]), rounds to 0 (below
    -103.97, -inf included) or is normal, in vectors that mix them and in runs of one
    kind: within the kernel's 1 ulp of float64's exp (2^-149 among the subnormals), 0
    exactly below, as float64's exp rounds."""
    torch.manual_seed(0)
    low = torch.linspace(-110.0, -80.0, 60001)
    x = torch.cat([low, low[torch.randperm(low.numel())], torch.full((64,), -float("inf")),
                   torch.full((64,), -1e4), (torch.randn(1000) * 30).clamp(max=88.0)])
    got = torch.exp(x.to("pto")).cpu()
    exact = torch.exp(x.double())
    ulp = torch.maximum(torch.nextafter(exact.float(), torch.tensor(float("inf"))) - exact.float(),
                        torch.tensor(2.0 ** -149))
    assert ((got.double() - exact).abs() <= ulp.double()).all()
    assert torch.equal(got[exact < 2.0 ** -150], torch.zeros_like(got[exact < 2.0 ** -150]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_log1p_of_tiny_numbers_is_the_number(dtype):
    """log1p(x) = x (1 - x/2 + ...) rounds to x where |x| < 2^-24 (float32; 2^-53
    float64), which pto returns without Sleef's subnormal steps; beside larger ones in a
    vector, and through softplus and log_sigmoid far below 0, as on the CPU."""
    tiny = torch.tensor([1e-20, 1e-30, -0.0, 0.0, 1e-39] + ([1e-13, -1e-13, 5e-8, -5e-8] if dtype == torch.float32
                                                          else [1e-17, -1e-17, -1e-100, 1e-310]), dtype=dtype)
    x = torch.cat([tiny, torch.tensor([0.5, 1e-3, -0.25], dtype=dtype)]).repeat(40)
    got = torch.log1p(x.to("pto")).cpu()
    assert torch.equal(got[:tiny.numel()].view(torch.int32 if dtype == torch.float32 else torch.int64),
                       tiny.view(torch.int32 if dtype == torch.float32 else torch.int64))
    assert_close(got, torch.log1p(x))
    below = torch.linspace(-120.0, -20.0, 4096, dtype=dtype)
    for f in (F.softplus, F.logsigmoid):
        assert_close(f(below.to("pto")).cpu(), f(below))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_expm1_sinh_and_cosh_where_they_saturate(dtype):
    """expm1 far below 0 (exactly -1), sinh and cosh past their overflow (+-inf) and
    just short of it (libm's finite values), tiny expm1 (x itself), in runs of one kind
    and mixed in a vector: as the CPU, and elu far below 0 through expm1."""
    edge = 89.4 if dtype == torch.float32 else 710.4
    values = torch.tensor([-200.0, -95.0, -40.0, -17.0, -1e-20, 1e-30, 0.5, 88.5, edge, -edge, 95.0, 800.0,
                           float("inf"), -float("inf"), float("nan")], dtype=dtype)
    for f in (torch.expm1, torch.sinh, torch.cosh, F.elu):
        # One element at a time: the CPU's scalar loop (its vector sinh and cosh give
        # infinity from 88.7 and 709.8 on, short of the overflow).
        expected = torch.cat([f(value.reshape(1)) for value in values])
        for repeat in (torch.Tensor.repeat, torch.Tensor.repeat_interleave):
            assert_close(f(repeat(values, 16).to("pto")).cpu(), repeat(expected, 16), equal_nan=True)
    assert (torch.expm1(torch.full((64,), -50.0, dtype=dtype).to("pto")).cpu() == -1).all()


BINARY_FORMS = {
    "fmax": torch.fmax,
    "fmin": torch.fmin,
    "logaddexp": torch.logaddexp,
    "logaddexp2": torch.logaddexp2,
    "fmax.out": lambda a, b: torch.fmax(a, b, out=torch.empty(0, dtype=a.dtype, device=a.device)),
    "logaddexp.out": lambda a, b: torch.logaddexp(a, b, out=torch.empty(0, dtype=a.dtype, device=a.device)),
    "logaddexp2 broadcast": lambda a, b: torch.logaddexp2(a.reshape(32, 64), b[:64]),
    "heaviside": torch.heaviside,
    "heaviside_": lambda a, b: a.clone().heaviside_(b),
    "heaviside.out broadcast": lambda a, b: torch.heaviside(a.reshape(32, 64), b[:64],
                                                          out=torch.empty(0, dtype=a.dtype, device=a.device)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_fmax_fmin_and_logaddexp_are_instructions_with_the_cpus_bits(dtype):
    """tfmax, tfmin, tlogaddexp, tlogaddexp2 and theaviside compute the CPU kernels'
    expressions: equal bits on every pair of specials (NaN ignored by fmax/fmin, a at a tie
    of 0 and -0, a where both are one infinity, b where a is either zero and 0 where it is
    NaN for heaviside) and on random pairs, with no fallback. The CPU's
    bfloat16 fmax and fmin alone give b at that tie: the sign of their zeros is not
    compared there. logaddexp(0, -100) is e^-100, a subnormal float32: pto's (log1p of a
    tiny number is the number) is the exact one, the CPU's Sleef log1p one unit above."""
    generator = torch.Generator().manual_seed(0)
    specials = torch.tensor([0.0, -0.0, float("nan"), float("inf"), float("-inf"), 1.0, -1.0, 100.0, -100.0, 1e-30])
    a = torch.cat([specials.repeat_interleave(10), torch.randn(1948, generator=generator) * 5]).to(dtype)
    b = torch.cat([specials.repeat(10), torch.randn(1948, generator=generator) * 5]).to(dtype)
    unsigned_zeros = ("fmax", "fmin", "fmax.out") if dtype == torch.bfloat16 else ()
    assert_forms_give_the_cpus_bits(BINARY_FORMS, (a, b), unsigned_zeros,
                                    exact_subnormals=("logaddexp", "logaddexp.out"))


aten = torch.ops.aten
GRADIENT_FORMS = {
    "hardsigmoid_backward": lambda g, x: aten.hardsigmoid_backward(g, x),
    "hardswish_backward": lambda g, x: aten.hardswish_backward(g, x),
    "hardswish_backward.out": lambda g, x: aten.hardswish_backward.out(g, x, out=torch.empty(0, dtype=g.dtype,
                                                                                             device=g.device)),
    "leaky_relu_backward": lambda g, x: aten.leaky_relu_backward(g, x, 0.01, False),
    "leaky_relu_backward -1.5": lambda g, x: aten.leaky_relu_backward(g, x, -1.5, False),
    "leaky_relu_backward from the result": lambda g, x: aten.leaky_relu_backward(g, x, 0.2, True),
    "hardshrink_backward": lambda g, x: aten.hardshrink_backward(g, x, 0.5),
    "hardshrink_backward 0.502": lambda g, x: aten.hardshrink_backward(g, x, 0.502),
    "softshrink_backward": lambda g, x: aten.softshrink_backward(g, x, 0.5),
    "softshrink_backward.grad_input": lambda g, x: aten.softshrink_backward.grad_input(
        g, x, 1.5, grad_input=torch.empty(0, dtype=g.dtype, device=g.device)),
    "elu_backward": lambda g, x: aten.elu_backward(g, 1.0, 1.0, 1.0, False, x),
    "elu_backward selu": lambda g, x: aten.elu_backward(g, 1.6732632423543772, 1.0507009873554805, 1.0, False, x),
    "elu_backward celu 0.5": lambda g, x: aten.elu_backward(g, 0.5, 1.0, 2.0, False, x),
    "elu_backward from the result": lambda g, y: aten.elu_backward(g, 1.3, 1.1, 0.7, True, y),
    "elu_backward.grad_input": lambda g, x: aten.elu_backward.grad_input(
        g, 1.0, 1.0, 1.0, False, x, grad_input=torch.empty(0, dtype=g.dtype, device=g.device)),
    "softplus_backward": lambda g, x: aten.softplus_backward(g, x, 1.0, 20.0),
    "softplus_backward 2, 1": lambda g, x: aten.softplus_backward(g, x, 2.0, 1.0),
    "softplus_backward.grad_input": lambda g, x: aten.softplus_backward.grad_input(
        g, x, -0.5, 5.0, grad_input=torch.empty(0, dtype=g.dtype, device=g.device)),
    "hardtanh_backward": lambda g, x: aten.hardtanh_backward(g, x, -1.0, 1.0),
    "hardtanh_backward relu6": lambda g, x: aten.hardtanh_backward(g, x, 0.0, 6.0),
    "hardtanh_backward.grad_input": lambda g, x: aten.hardtanh_backward.grad_input(
        g, x, -0.5, 3.0, grad_input=torch.empty(0, dtype=g.dtype, device=g.device)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_activation_gradients_are_instructions_with_the_cpus_bits(dtype):
    """thardsigmoidgrad, thardswishgrad, tleakyrelugrad, tshrinkgrad, telugrad, tsoftplusgrad
    and thardtanhgrad compute the CPU's vector loops step for step (1/6 a float32 constant,
    hardswish's corners at -3 and 3, elu's products in its order, a NaN x giving NaN or 0 as
    there): equal bits on 2048 elements, which the CPU's vector loop takes whole (its scalar
    loop, for a row's last few, differs at NaN and at -3 and 3)."""
    generator = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(2032, generator=generator) * 5,
                   torch.tensor([0.0, -0.0, float("nan"), float("inf"), float("-inf"), 3.0, -3.0, -3.0001,
                                 2.9999, 1e-30, -1e-30, 0.5, -0.5, 0.50390625, -0.50390625, 65504.0])]).to(dtype)
    g = (torch.randn(2048, generator=generator) * 3).to(dtype)
    assert_forms_give_the_cpus_bits(GRADIENT_FORMS, (g, x))
    with pytest.raises(RuntimeError, match="In-place leakyReLu backward calculation is triggered with a negative"):
        aten.leaky_relu_backward(g.to("pto"), x.to("pto"), -0.5, True)
    with pytest.raises(RuntimeError, match="In-place elu backward calculation is triggered with a negative slope"):
        aten.elu_backward(g.to("pto"), -0.5, 1.0, 1.0, True, x.to("pto"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64,
                                   torch.int8, torch.uint8, torch.bool])
def test_signbit_is_one_comparison_with_the_cpus_values_and_errors(dtype):
    """signbit compares the bits of a floating tensor, as signed integers of its width,
    with 0: the sign bit of -0.0 and of a negative NaN too, as the CPU's std::signbit;
    integers compare themselves, unsigned ones and bool give False. Functional and out=,
    contiguous and strided, never the fallback; complex and a non-bool out raise the
    CPU's errors."""
    values = torch.tensor(SPECIALS + [-float("nan"), 1e-40, -1e-40, -7.0, 100.0])
    x = values.to(dtype) if dtype.is_floating_point else (values.nan_to_num() % 100).to(dtype)
    if dtype.is_floating_point:  # a NaN of each sign, whichever the conversions made
        bits = x.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()])
        bits[-6] &= torch.iinfo(bits.dtype).max
        bits[-5] = bits[-6] | torch.iinfo(bits.dtype).min
    before = pypto_torch.fallback_ops()
    for sample in (x, x[::2], x.reshape(4, 5).t()):
        assert torch.equal(torch.signbit(sample.to("pto")).cpu(), torch.signbit(sample))
        out = torch.empty(0, dtype=torch.bool, device="pto")
        assert torch.signbit(sample.to("pto"), out=out) is out
        assert torch.equal(out.cpu(), torch.signbit(sample))
    assert pypto_torch.fallback_ops() == before
    with pytest.raises(RuntimeError, match="signbit does not support non-boolean outputs"):
        torch.signbit(x.to("pto"), out=torch.empty(0, device="pto"))
    with pytest.raises(NotImplementedError, match="signbit is not implemented for complex tensors"):
        torch.signbit(torch.zeros(3, dtype=torch.complex64, device="pto"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mish_and_its_gradient_are_instructions_within_their_bounds(dtype):
    """tmish, x tanh(log1p(exp(x))), and tmishgrad, g (t + x s (1 - t^2)), in one pass each
    with a 3.5-ulp tanh where the CPU's is 1-ulp: within the bounds of their GoogleTest
    references (12u of mish; the gradient's terms' errors, absolute where its sum cancels
    near x = -1.19, and s lost where exp(-x) overflows) of the exact values, in every form,
    never the fallback."""
    generator = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(3990, generator=generator) * 6,
                   torch.tensor([0.0, -0.0, -1.19, 20.0, -20.0, 90.0, -90.0, -104.0, 1e-30, -1e-30])]).to(dtype)
    g = (torch.randn(len(x), generator=generator) * 3).to(dtype)
    exact_x, exact_g = x.double(), g.double()
    u = torch.finfo(dtype).eps / 2
    tiny = torch.finfo(dtype).smallest_normal * torch.finfo(dtype).eps
    t = torch.tanh(torch.log1p(torch.exp(exact_x)))
    xs = exact_x * torch.sigmoid(exact_x)
    mish_bound = 12 * u * (exact_x * t).abs() + (2 * exact_x.abs() + 1) * tiny
    terms = 12 * t.abs() + xs.abs() * (25 * t * t + 6 * (1 - t * t).abs())
    # s = 1 / (1 + exp(-x)) is 0 where exp(-x) overflows (the CPU's formula too): all of
    # s, below the smallest normal, is lost there.
    lost = torch.where(torch.exp(-exact_x) > torch.finfo(dtype).max, torch.finfo(dtype).smallest_normal, 0.0)
    grad_bound = g.double().abs() * (u * terms + (2 * exact_x.abs() + 4) * tiny + exact_x.abs() * lost)
    grad_exact = exact_g * (t + xs * (1 - t * t))
    grad_bound = grad_bound + 2 * u * grad_exact.abs()
    before = pypto_torch.fallback_ops()
    xp = x.to("pto")
    for got in (torch.nn.functional.mish(xp), torch.nn.functional.mish(xp.clone(), inplace=True),
                torch._C._nn.mish(xp, out=torch.empty(0, dtype=dtype, device="pto")),
                torch.nn.functional.mish(x.to("pto").reshape(40, 100).t()).t().reshape(-1)):
        assert got.dtype == dtype
        assert ((got.cpu().double() - exact_x * t).abs() <= mish_bound).all()
    got = torch.ops.aten.mish_backward(g.to("pto"), xp).cpu().double()
    assert ((got - grad_exact).abs() <= grad_bound).all()
    assert pypto_torch.fallback_ops() == before


def test_log_sigmoid_keeps_no_buffer_and_its_gradient_recomputes_it():
    """log_sigmoid_forward's buffer is empty on pto, as on CUDA (the CPU's holds exp(-|x|));
    the backward recomputes it and matches the CPU's gradient, eager and compiled."""
    x = torch.linspace(-30, 30, 1001, dtype=torch.float64)
    output, buffer = torch.ops.aten.log_sigmoid_forward(x.to("pto"))
    assert buffer.numel() == 0
    assert_close(output.cpu(), torch.nn.functional.logsigmoid(x), rtol=0, atol=0)
    expected = torch.autograd.grad(torch.nn.functional.logsigmoid(x.requires_grad_()).sum(), x)[0]
    x_pto = x.detach().to("pto").requires_grad_()
    got = torch.autograd.grad(torch.nn.functional.logsigmoid(x_pto).sum(), x_pto)[0]
    assert_close(got.cpu(), expected)
    compiled = torch.compile(lambda t: torch.nn.functional.logsigmoid(t).sum(), backend="pypto")
    x_pto.grad = None
    compiled(x_pto).backward()
    assert_close(x_pto.grad.cpu(), expected)


def test_activations_with_numbers_give_the_cpus_errors():
    x = torch.randn(8)
    for call in (lambda t: torch.nn.functional.softshrink(t, -0.5),
                 lambda t: torch.nn.functional.elu(t.long()),
                 lambda t: torch.nn.functional.softplus(t.int()),
                 lambda t: torch.nn.functional.hardshrink(t.long()),
                 lambda t: torch.nn.functional.logsigmoid(t.long())):
        with pytest.raises(Exception) as cpu_error:
            call(x)
        with pytest.raises(type(cpu_error.value)) as pto_error:
            call(x.to("pto"))
        assert str(pto_error.value).splitlines()[0] == str(cpu_error.value).splitlines()[0]
    assert torch.equal(torch.nn.functional.elu(x.to("pto")).cpu(), torch.nn.functional.elu(x))
