"""Per-element error bounds for comparing two implementations of an op that each compute
in floating point, in an order neither test nor library promises: pto (oneDNN, MKL,
the simulator's kernels) against PyTorch's CPU kernels (MKL, oneDNN, cpublas). A
tolerance here is a bound that holds on every host, whatever blocking, vector width,
FMA use or thread split a library picks there, never what one machine happened to give.

Model (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., §2.2, §3.1).
Each floating-point operation, at unit roundoff u (2^-24 for float32, 2^-53 for float64;
round to nearest), returns

    fl(x op y) = (x op y)(1 + d) + e,   |d| <= u,   |e| <= eta

where eta covers results below the normal range: a multiplication that underflows is off
by at most half the smallest subnormal, or by `tiny` (the smallest normal number) where
flush-to-zero is on (oneDNN, torch.set_flush_denormal, AVX512-BF16's instructions), and an
addition is exact under gradual underflow, off by at most `tiny` under flush-to-zero. We
take eta = tiny for every operation.

Sums of products (GEMM, convolution, sum). A sum of n terms, each a product of inputs
(or an input), computed in any order -- any parenthesisation, blocking or split across
threads, with or without FMA, partial sums held in a wider type and rounded back at the
end -- gives

    s^ = sum_k t_k (1 + theta_k),   |theta_k| <= gamma_m,   gamma_m = m u / (1 - m u),

where m is the number of roundings on term k's path: its product (none for a bare term,
none when fused into an FMA), the additions it passes through (at most n - 1 in any
evaluation tree) and one for each scaling or conversion on the way. Hence

    |s^ - s| <= gamma_m * sum_k |t_k| + m * eta * (1 + gamma_m)          (*)

for each implementation (Higham (3.5), "for any order of evaluation"; the eta term adds
the at most m underflows along the way, each carried through later roundings). Two
implementations differ from the exact s by (*) each: their difference by twice (*).

  GEMM  C = A @ B (batched, broadcast): m = K, the inner length, and sum |t_k| is the
        matrix |A| @ |B|, computed here in float64 (addmm/baddbmm/addmv: m = K + 2,
        K products scaled by alpha and the input scaled by beta, and the sum is
        |beta| |C| + |alpha| |A| @ |B|).
  sum   over n elements: m = n (n - 1 additions and one last conversion from a wider
        accumulator: pto's float32 row sums move into double), sum |t_k| = sum |x|;
        a mean divides once more: m = n + 1 and the bound is divided by n.
  conv  each output sums C_in/groups * prod(kernel_size) products (fewer at the borders:
        the taps that fall on padding add exact zeros) plus the bias: m is that count,
        obtained exactly as the convolution of all-ones operands, and sum |t_k| is the
        convolution of |input| with |weight| plus |bias|.

float16 and bfloat16 (the assumption). Both sides accumulate in float32 and round the
result to float16/bfloat16 once, at the end -- as oneDNN's brgemm (AVX512-BF16, AMX,
AVX512-FP16 hosts), MKL's bfloat16 GEMM and PyTorch's own cpublas (opmath float32)
do, and pto's tmatmul and reductions; their inputs are the same float16/bfloat16
values, exact in float32. Let c~ be a side's float32 value and c^ = round(c~) its
result. Round to nearest puts c^ within half an ulp of c~, and half an ulp of c~ is at
most u_out |c^| in the normal range (c^ is in c~'s binade or at its upper edge, which
only makes |c^| larger); below it, the rounding is off by at most eta_out (half the
smallest float16 subnormal, 2^-25: F16C's and c10::Half's conversions keep subnormals;
bfloat16's smallest normal, since AVX512-BF16's conversion flushes). So
|c^ - c~| <= u_out |c^| + eta_out, and for the two sides, with (*) bounding each c~,

    |c^_1 - c^_2| <= |c^_1 - c~_1| + |c~_1 - c| + |c - c~_2| + |c~_2 - c^_2|
                  <= 2 (*) + u_out (|c^_1| + |c^_2|) + 2 eta_out.

That is what every bound below adds for a float16/bfloat16 result, with (*) at float32's
u. float32 and float64 results are the last accumulation step's own rounding, already
in (*).

Rounding twice. Some kernels round a partial result p to float16/bfloat16 before adding
the rest -- PyTorch's CPU addmm/addmv round alpha A @ B before adding beta C, pto's
convolutions round the product before adding the bias (both measured here). That
rounding is off by at most u_out |p~| + eta_out <= u_out (1 + gamma_m) P + eta_out, with
P the sum |t| over p's terms, and the addition after it costs one float32 rounding more
(m + 1); either side may do it, so the bound adds 2 (u_out (1 + gamma_m) P + eta_out)
(accumulation_bound's `partial`). And PyTorch's CPU batch norm gathers float16/bfloat16
training statistics at that precision: normalization_bounds' `statistics_dtype`.

Not covered, and not used by either side here: Strassen-like or Winograd/FFT
algorithms (their error is not a sum of rounded products), and reduced-precision
float32 GEMMs (TF32, bfloat16x3: torch.backends' float32_matmul_precision stays
"highest"); inputs that are themselves subnormal in float32 (flush-on-input would drop
them). Every bound is rigorous for both sides to all orders except where a docstring
says "first order".
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

ACCUMULATION = {torch.float16: torch.float32, torch.bfloat16: torch.float32,
                torch.float32: torch.float32, torch.float64: torch.float64}
# The absolute error of one rounding below the normal range (see the module's docstring).
ETA = {torch.float16: 2.0 ** -25, torch.bfloat16: torch.finfo(torch.bfloat16).tiny,
       torch.float32: torch.finfo(torch.float32).tiny, torch.float64: torch.finfo(torch.float64).tiny}


def unit_roundoff(dtype: torch.dtype) -> float:
    """u = 2^-p for a p-bit significand: half float32's eps, 2^-24."""
    return torch.finfo(dtype).eps / 2


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """The type both sides sum in for results of `dtype`: float32 for float16/bfloat16."""
    if dtype not in ACCUMULATION:
        raise TypeError(f"no error bound for {dtype}")
    return ACCUMULATION[dtype]


def gamma(m, dtype: torch.dtype = torch.float32, accumulate: bool = True):
    """Higham's gamma_m = m u / (1 - m u) at `dtype`'s accumulation type (at `dtype` itself
    with accumulate=False): the relative error of m roundings. `m` may be a tensor (one
    count per element)."""
    u = unit_roundoff(accumulation_dtype(dtype) if accumulate else dtype)
    if isinstance(m, torch.Tensor):
        m = m.double()
        assert bool((m * u < 0.5).all()), "more roundings than the bound allows"
    else:
        assert m * u < 0.5, "more roundings than the bound allows"
    return m * u / (1 - m * u)


@dataclass(frozen=True)
class Bound:
    """A per-element bound (float64, broadcastable to the compared results) and its name,
    the formula assert_within_bound reports."""
    value: torch.Tensor
    name: str

    def __add__(self, other: "Bound") -> "Bound":
        return Bound(self.value + other.value, f"{self.name} + {other.name}")

    def scaled(self, factor, why: str) -> "Bound":
        """The bound carried through a function with Lipschitz constant `factor`."""
        return Bound(self.value * factor, f"{why} x ({self.name})")


def _as_double(t) -> torch.Tensor:
    return t.detach().cpu().double()


def accumulation_bound(magnitude, roundings, dtype: torch.dtype, got=None, expected=None,
                       name: str = "sum|t|", partial=None) -> Bound:
    """Twice (*) of the module's docstring for a result of `dtype` whose exact value is a
    sum of terms with sum |t_k| = `magnitude` and at most `roundings` roundings on a
    term's path (tensors or numbers, per element), plus, for float16/bfloat16 results,
    the final rounding of each side, u_out (|got| + |expected|) + 2 eta_out.

    `partial`: for float16/bfloat16, sum |t| over the terms of a partial result that
    either side may round to the output type before adding the rest (see the module's
    docstring: alpha A @ B before beta C in the CPU's addmm, a convolution before its
    bias on pto); adds 2 (u_out (1 + gamma_m) partial + eta_out), and the addition after
    it one float32 rounding more (m + 1)."""
    acc = accumulation_dtype(dtype)
    low_precision = dtype != acc
    if low_precision and partial is not None:
        roundings = roundings + 1
    g = gamma(roundings, dtype)
    m = roundings.double() if isinstance(roundings, torch.Tensor) else float(roundings)
    value = 2 * g * _as_double(magnitude) + 2 * m * ETA[acc] * (1 + g)
    m_name = "m" if isinstance(roundings, torch.Tensor) else str(roundings)
    name = f"2*gamma_{m_name}({acc})*{name}"
    if low_precision:
        assert got is not None and expected is not None, "the final rounding needs both results"
        value = value + unit_roundoff(dtype) * (_as_double(got).abs() + _as_double(expected).abs()) + 2 * ETA[dtype]
        name += f" + u({dtype})*(|got|+|expected|)"
        if partial is not None:
            value = value + 2 * (unit_roundoff(dtype) * (1 + g) * _as_double(partial) + ETA[dtype])
            name += f" + 2*u({dtype})*partial"
    return Bound(value, name)


def matmul_bound(a, b, got=None, expected=None) -> Bound:
    """|C1 - C2| <= 2 gamma_K (|A| @ |B|) (+ the final roundings for float16/bfloat16) for
    C = A @ B, batched and broadcast as torch.matmul, K = A's last dimension."""
    k = a.shape[-1]
    magnitude = _as_double(a).abs() @ _as_double(b).abs()
    return accumulation_bound(magnitude, k, a.dtype, got, expected, name="(|A|@|B|)")


def addmm_bound(c, a, b, beta=1.0, alpha=1.0, got=None, expected=None) -> Bound:
    """beta C + alpha A @ B (addmm, baddbmm): the K products scaled once more by alpha, the
    input once by beta, K + 2 roundings, and sum |t| = |beta| |C| + |alpha| |A| @ |B|."""
    k = a.shape[-1]
    product = abs(alpha) * (_as_double(a).abs() @ _as_double(b).abs())
    magnitude = product + abs(beta) * _as_double(c).abs() if beta != 0 else product  # beta = 0 ignores C
    return accumulation_bound(magnitude, k + 2, a.dtype, got, expected, name="(|beta||C|+|alpha||A|@|B|)",
                              partial=product)


def sum_bound(x, dim=None, keepdim=False, got=None, expected=None, mean=False) -> Bound:
    """x.sum(dim) (n elements per result): 2 gamma_n sum|x|; x.mean(dim): 2 gamma_{n+1}
    sum|x| / n (plus the final roundings for float16/bfloat16)."""
    magnitude = _as_double(x).abs()
    if x.dim() == 0:  # a 0-dim tensor reduces to itself over any dim
        dims, n = (), 1
    else:
        if dim is None or dim == ():
            dims = tuple(range(x.dim()))
        else:
            dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
        n = 1
        for d in dims:
            n *= x.shape[d]
        magnitude = magnitude.sum(dims, keepdim=keepdim)
    if mean:
        return accumulation_bound(magnitude / max(n, 1), n + 1, x.dtype, got, expected, name=f"sum|x|/{n}")
    return accumulation_bound(magnitude, n, x.dtype, got, expected, name="sum|x|")


_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_TRANSPOSE = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def conv_bound(x, weight, bias=None, got=None, expected=None, transposed=False, **kwargs) -> Bound:
    """F.conv{1,2,3}d (or conv_transpose{1,2,3}d) with `kwargs` (stride, padding, ...): each
    output sums at most C_in/groups * prod(kernel_size) products plus the bias; the count
    m of each output is the convolution of all-ones operands (taps on padding add exact
    zeros), and sum|t| the convolution of |input| with |weight| plus |bias|; the convolution
    without its bias is the partial result either side may round first. Assumes direct or
    im2col-GEMM convolutions, as pto's and oneDNN's (PyTorch passes convolution_direct)
    are: PyTorch's CPU takes NNPACK's Winograd/FFT only without oneDNN, for float32
    batches of 16 or more (torch._C._select_conv_backend), which no test here compares."""
    spatial = weight.dim() - 2
    fn = (_CONV_TRANSPOSE if transposed else _CONV)[spatial]
    return multilinear_bound(fn, (x, weight, bias), kwargs, got, expected, name="conv(|x|,|w|)+|b|",
                             partial=None if bias is None else ((x, weight, None), kwargs))


SCALARS = ("alpha", "beta")


def _mapped(value, tensor, scalar, key=None):
    if isinstance(value, torch.Tensor):
        return tensor(value) if value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        return type(value)(_mapped(v, tensor, scalar) for v in value)
    if isinstance(value, dict):
        return {k: _mapped(v, tensor, scalar, k) for k, v in value.items()}
    if key in SCALARS and isinstance(value, (int, float)) and not isinstance(value, bool):
        return scalar(value)
    return value


def _magnitudes(args, kwargs, requires_grad=False):
    """|args| in float64 and the all-ones twins (alpha/beta: |s|, and 1 or 0)."""
    def absolute(t):
        return _as_double(t).abs().requires_grad_(requires_grad)

    def ones(t):
        return torch.ones(t.shape, dtype=torch.float64, requires_grad=requires_grad)

    def one(s):
        return 1.0 if s != 0 else 0.0

    return ((_mapped(args, absolute, abs), _mapped(kwargs, absolute, abs)),
            (_mapped(args, ones, one), _mapped(kwargs, ones, one)))


def _scalings(kwargs) -> int:
    """One rounding more per alpha or beta that is neither 0 nor 1."""
    return sum(1 for key in SCALARS if isinstance(kwargs.get(key), (int, float)) and kwargs[key] not in (0, 1))


def multilinear_bound(fn, args, kwargs=None, got=None, expected=None, name=None, partial=None) -> Bound:
    """For `fn` multilinear in its floating tensor arguments (mm, bmm, matmul, linear, mv,
    addmm, baddbmm, addmv, conv*, unfold: each output a sum of products of entries, times
    alpha/beta): sum|t| = fn(|args|, |alpha|, |beta|) in float64, and the term count of
    each output fn(ones, 1, 1), exactly, plus one rounding per scaling by alpha or beta.
    `partial`: (args, kwargs) of the partial result either side may round to a float16/
    bfloat16 output first (accumulation_bound), the bias or beta C term left out."""
    kwargs = kwargs or {}
    (abs_args, abs_kwargs), (one_args, one_kwargs) = _magnitudes(args, kwargs)
    magnitude = fn(*abs_args, **abs_kwargs)
    terms = fn(*one_args, **one_kwargs).round() + _scalings(kwargs)
    if partial is not None:
        (partial_args, partial_kwargs), _ = _magnitudes(*partial)
        partial = fn(*partial_args, **partial_kwargs)
    dtype = next(t.dtype for t in _tensors(args) if t.is_floating_point())
    return accumulation_bound(magnitude, terms, dtype, got, expected,
                              name=name or f"{getattr(fn, '__name__', 'fn')}(|args|)", partial=partial)


def complex_multilinear_bound(fn, args, kwargs=None) -> Bound:
    """multilinear_bound for complex64 operands, of each of an output's real and imaginary
    parts: a part of a sum of m complex products is a sum of 2m real products (Re:
    a_r b_r - a_i b_i, Im: a_r b_i + a_i b_r) whose magnitudes add to at most |a| |b|
    (Cauchy-Schwarz), so (*) holds with sum |t| = fn(moduli of the args) and 2m roundings
    on a term's path, in float32. Operands with no alpha or beta (convolutions, mm)."""
    kwargs = kwargs or {}

    def moduli(value):
        if isinstance(value, torch.Tensor):
            return value.detach().cpu().abs().double() if value.is_complex() else value
        if isinstance(value, (list, tuple)):
            return type(value)(moduli(v) for v in value)
        return value

    (abs_args, abs_kwargs), (one_args, one_kwargs) = _magnitudes(moduli(tuple(args)), moduli(kwargs))
    magnitude = fn(*abs_args, **abs_kwargs)
    terms = fn(*one_args, **one_kwargs).round()
    return accumulation_bound(magnitude, 2 * terms, torch.float32,
                              name=f"{getattr(fn, '__name__', 'fn')}(|args|), per part")


def without_additive_term(name: str, args, kwargs):
    """(args, kwargs) of op `name` with its additive input left out -- addmm's, addmv's,
    baddbmm's and addr's beta C, linear's and the convolutions' bias -- or None where it has none:
    the partial result for multilinear_bound."""
    args = tuple(args)
    if name in ("addmm", "addmv", "baddbmm", "addr"):
        return (args, {**kwargs, "beta": 0}) if kwargs.get("beta", 1) != 0 else None
    if name == "nn.functional.linear" or "conv" in name:
        if len(args) > 2 and args[2] is not None:
            return (args[:2] + (None,) + args[3:], kwargs)
        if kwargs.get("bias") is not None:
            return (args, {**kwargs, "bias": None})
    return None


def multilinear_gradient_bounds(fn, args, kwargs, grad, dtype=torch.float32) -> list:
    """The bound of the gradient of each floating tensor in `args` that requires grad, in
    order (None where fn does not use it), of fn(*args, **kwargs) with incoming gradient
    `grad`, fn multilinear as above (multilinear_bound): a gradient
    is again a sum of products (grad times the other arguments: GEMMs, transposed
    convolutions, sums over broadcast dimensions), its sum|t| the gradient of fn at
    |args| for |grad| and its term count that at all-ones arguments for an all-ones grad."""
    wants = [t.requires_grad for t in _tensors(args)]
    (abs_args, abs_kwargs), (one_args, one_kwargs) = _magnitudes(args, kwargs, requires_grad=True)
    bounds = []
    magnitude_out, count_out = fn(*abs_args, **abs_kwargs), fn(*one_args, **one_kwargs)
    abs_leaves, one_leaves = _tensors(abs_args), _tensors(one_args)
    magnitudes = torch.autograd.grad(magnitude_out, abs_leaves, _as_double(grad).abs(), allow_unused=True)
    counts = torch.autograd.grad(count_out, one_leaves, torch.ones_like(count_out), allow_unused=True)
    for want, magnitude, count in zip(wants, magnitudes, counts):
        if not want:
            continue
        if magnitude is None:
            bounds.append(None)
            continue
        bounds.append(accumulation_bound(magnitude, count.round() + _scalings(kwargs), dtype,
                                         name=f"d{getattr(fn, '__name__', 'fn')}(|args|)"))
    return bounds


def _tensors(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def elementwise_bound(result, ulps: float, dtype=None) -> Bound:
    """`ulps` units of roundoff of each side's own result of an elementwise op (or a
    short chain of them): ulps u (|result|) + the underflow term, per side, twice."""
    dtype = dtype or result.dtype
    u = unit_roundoff(dtype)
    return Bound(2 * ulps * u * _as_double(result).abs() + 2 * ulps * ETA[dtype], f"2*{ulps}*u({dtype})*|y|")


def assert_within_bound(got, expected, bound: Bound, msg: str = "", equal_nan: bool = False) -> float:
    """|got - expected| <= bound, element by element (equal infinities, and NaNs with
    `equal_nan`, count as equal). On failure, names the bound, the number of elements
    beyond it, and the worst one (largest |difference| / bound): its index, both values,
    the difference and the bound there. Returns the largest ratio |difference| / bound,
    for the record."""
    prefix = f"{msg}: " if msg else ""
    assert got.shape == expected.shape, f"{prefix}shapes differ: {tuple(got.shape)} and {tuple(expected.shape)}"
    assert got.dtype == expected.dtype, f"{prefix}dtypes differ: {got.dtype} and {expected.dtype}"
    g, e = _as_double(got), _as_double(expected)
    if g.numel() == 0:
        return 0.0
    b = bound.value.expand(g.shape) if bound.value.dim() <= g.dim() else bound.value
    assert b.shape == g.shape, f"{prefix}bound of shape {tuple(bound.value.shape)} for results of {tuple(g.shape)}"
    same = g == e
    if equal_nan:
        same |= g.isnan() & e.isnan()
    difference = torch.where(same, torch.zeros_like(g), (g - e).abs())
    difference = torch.where(difference.isnan(), torch.full_like(g, float("inf")), difference)
    ratio = torch.where(difference == 0, torch.zeros_like(g), difference / b)
    worst = int(ratio.flatten().argmax())
    worst_ratio = float(ratio.flatten()[worst])
    if not worst_ratio <= 1:
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), g.shape))
        beyond = int((ratio > 1).sum())
        raise AssertionError(
            f"{prefix}{beyond} of {g.numel()} elements beyond the bound {bound.name}; the worst at "
            f"{index}: got {g.flatten()[worst].item()!r}, expected {e.flatten()[worst].item()!r}, "
            f"|difference| {difference.flatten()[worst].item():.4g} > bound {b.flatten()[worst].item():.4g} "
            f"(ratio {worst_ratio:.3g})")
    return worst_ratio


def sequential_bound(model: torch.nn.Sequential, x) -> Bound:
    """The float32 output of `model` (Conv1d/2d/3d, Linear, ReLU, Flatten layers) on two
    implementations, layer by layer. A layer y = W a + b that receives a' on one side and
    a on the other, |a' - a| <= d, gives (each side's own rounding by (*), at |a'| <= |a| + d)

        |y' - y| <= |W| d + gamma_m |W| (|a| + d) + gamma_m (|W| |a| + |b|) + eta terms
                 <= (1 + gamma_m) |W| d + 2 (*)(|W| |a| + |b|),

    with m the layer's term count (its fan-in, plus one for the bias); ReLU is exact and
    1-Lipschitz (d passes unchanged), Flatten moves d along: rigorous, for float32. Tanh
    (1-Lipschitz) and Sigmoid (1/4) add each side's own error, within 2 ulps, 4u |y|
    (an assumption on the two libraries' vector math, Sleef's and pto's)."""
    names = []
    d = torch.zeros(x.shape, dtype=torch.float64)
    a = x.detach()
    for layer in model:
        if isinstance(layer, (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.Linear)):
            if isinstance(layer, torch.nn.Linear):
                fn, kwargs = F.linear, {}
            else:
                assert layer.padding_mode == "zeros", "zero padding only"
                fn = _CONV[layer.weight.dim() - 2]
                kwargs = dict(stride=layer.stride, padding=layer.padding, dilation=layer.dilation, groups=layer.groups)
            w = _as_double(layer.weight).abs()
            own = multilinear_bound(fn, (a, layer.weight, layer.bias), kwargs)
            terms = fn(torch.ones(a.shape, dtype=torch.float64), torch.ones_like(w),
                       None if layer.bias is None else torch.ones(layer.bias.shape, dtype=torch.float64), **kwargs)
            d = (1 + gamma(terms.round())) * fn(d, w, None, **kwargs) + own.value
            names.append(f"{type(layer).__name__}(fan-in {int(terms.max())})")
        elif isinstance(layer, torch.nn.ReLU):
            names.append("ReLU")
        elif isinstance(layer, (torch.nn.Tanh, torch.nn.Sigmoid)):
            lipschitz = 1.0 if isinstance(layer, torch.nn.Tanh) else 0.25
            with torch.no_grad():
                y = layer(_as_double(a))
            d = lipschitz * d + 2 * 4 * unit_roundoff(torch.float32) * y.abs() + 2 * 4 * ETA[torch.float32]
            names.append(type(layer).__name__)
        elif isinstance(layer, torch.nn.Flatten):
            d = layer(d)
        else:
            raise TypeError(f"no bound through {type(layer).__name__}")
        with torch.no_grad():
            a = layer(a)
    return Bound(d, "layer by layer, (1+gamma_m)|W|d + 2*gamma_m*(|W||a|+|b|) through " + ", ".join(names))


# Normalisations and softmax: first-order bounds (products of two u's dropped), both sides
# computing in float32 (float64 for float64) and rounding float16/bfloat16 results once.

def _final_rounding(value, dtype, got, expected):
    if accumulation_dtype(dtype) == dtype:
        return value
    return value + unit_roundoff(dtype) * (_as_double(got).abs() + _as_double(expected).abs()) + 2 * ETA[dtype]


def _positive_or_inf(t):
    return torch.where(t > 0, t, torch.full_like(t, float("inf")))


def normalization_bounds(x, dims, weight=None, bias=None, eps=1e-5, got=None, expected=None,
                         mean=None, var=None, per_channel=False, statistics_dtype=None):
    """Bounds of y = (x - mu) / sqrt(var + eps) * weight + bias (layer norm over `dims`,
    batch norm over all dims but the channels'), and of the statistics mu and
    r = 1/sqrt(var + eps), with var the biased variance of x over `dims`, or given
    statistics `mean` and `var` (batch norm in eval mode: an elementwise op); `per_channel`:
    weight and bias (and given statistics) are batch norm's, one per channel. Returns
    (bound of y, bound of mu, bound of r). First order, per side, with N the count
    reduced over, u float32's (float64's) unit roundoff:

      E_mu = gamma_{N+6} max|x|: a two-pass mean (gamma_{N+1} mean|x|) and Welford's
             updates mu_k = mu_{k-1} + (x_k - mu_{k-1})/k, whose errors e_k satisfy
             e_k = (1 - 1/k) e_{k-1} + l_k, |l_k| <= u|mu_k| + 2u|x_k - mu_{k-1}|/k, so that
             |e_N| <= sum_k (k/N)|l_k| <= (N/2 + 5) u max|x| (PyTorch's CPU kernels merge
             per-lane Welford results, Chan et al.'s update, within the same terms);
      E_v  = gamma_{N+10} (var + 2 max|x| R) + E_mu^2, R = max|x - mu|: two-pass
             (x - mu^ rounded, squared, summed, divided: gamma_{N+3} (var + E_mu^2) + E_mu^2)
             and Welford's M2 += (x_k - mu_{k-1})(x_k - mu_k), each term off by
             2|e_{k-1}| |x_k - mu_k| plus its roundings: (N + 10) u max|x| R over N;
      dr/r = E_v / (2 (var + eps)) + 4u (eps added, the square root, the reciprocal);
      |dy| <= |w| r (E_mu + (|x| + |mu|) (dr/r + 4u)) + 3u |b|: computed as written,
             ((x - mu) r) w + b, |x - mu| would do, but kernels fuse it into x a + c with
             a = w r and c = b - mu a (PyTorch's CPU batch norm does), whose roundings are
             relative to |x a| and |mu a|, however much x a + c cancels.

    Twice each for the two sides, plus the final roundings for float16/bfloat16. Where
    var + eps <= 0 the bounds are infinite (both sides give NaN: compare with equal_nan).
    `statistics_dtype`: where a side accumulates mu and var in another type than float32
    (PyTorch's CPU batch norm trains float16/bfloat16 inputs so: measured up to 13 units
    of bfloat16 roundoff of |x a| + |mu a| for 36 values, a = w r), E_mu and E_v at its u."""
    xd = _as_double(x)
    acc = accumulation_dtype(x.dtype)
    u = unit_roundoff(acc)
    dims = tuple(d % x.dim() for d in dims)
    if x.numel() == 0:
        empty = Bound(torch.zeros(()), "nothing to compare")
        return empty, empty, empty
    if mean is None:
        n = 1
        for d in dims:
            n *= x.shape[d]
        mu = xd.mean(dims, keepdim=True)
        v = ((xd - mu) ** 2).mean(dims, keepdim=True)
        x_max = xd.abs().amax(dims, keepdim=True)
        spread = (xd - mu).abs().amax(dims, keepdim=True)
        stats = statistics_dtype or acc
        e_mu = gamma(n + 6, stats, accumulate=False) * x_max
        e_v = gamma(n + 10, stats, accumulate=False) * (v + 2 * x_max * spread) + e_mu ** 2
    else:
        shape = [1] * x.dim()
        shape[1] = -1
        mu, v = _as_double(mean).reshape(shape), _as_double(var).reshape(shape)
        e_mu, e_v = torch.zeros_like(mu), torch.zeros_like(v)
    denominator = v + eps
    r = 1 / _positive_or_inf(denominator).sqrt()
    dr = e_v / (2 * _positive_or_inf(denominator)) + 4 * u
    dr = torch.where(denominator > 0, dr, torch.full_like(dr, float("inf")))

    def shaped(t):
        if t is None:
            return torch.ones(())
        t = _as_double(t)
        if per_channel:  # batch norm: one weight per channel (dim 1)
            shape = [1] * x.dim()
            shape[1] = -1
            return t.reshape(shape)
        return t

    w, b = shaped(weight).abs(), (shaped(bias).abs() if bias is not None else torch.zeros(()))
    dy = w * r * (e_mu + (xd.abs() + mu.abs()) * (dr + 4 * u)) + 3 * u * b
    dy = torch.where(torch.isfinite(r), dy, torch.full_like(dy, float("inf")))
    value = _final_rounding(2 * dy, x.dtype, got, expected) if got is not None else 2 * dy
    return (Bound(value, "2*(|w|r(E_mu+(|x|+|mu|)(dr/r+4u))+3u|b|), normalization, first order"),
            Bound(2 * e_mu, "2*gamma_{N+6}*max|x|"), Bound(2 * r * dr, "2*r*(E_v/(2(var+eps))+4u)"))


def rms_norm_bound(x, dims, weight=None, eps=None, got=None, expected=None) -> Bound:
    """y = x / sqrt(mean(x^2) + eps) * weight. The mean of squares, positive terms: relative
    error gamma_{N+2} (a square, N - 1 additions, the division), rigorous; then first
    order: dr/r = gamma_{N+2} ms / (2 (ms + eps)) + 4u, |dy| <= |x| |w| r (dr/r + 2u), twice,
    plus the final roundings for float16/bfloat16."""
    xd = _as_double(x)
    acc = accumulation_dtype(x.dtype)
    u = unit_roundoff(acc)
    dims = tuple(d % x.dim() for d in dims)
    n = 1
    for d in dims:
        n *= x.shape[d]
    eps = torch.finfo(x.dtype).eps if eps is None else eps  # F.rms_norm's default
    ms = (xd ** 2).mean(dims, keepdim=True)
    denominator = _positive_or_inf(ms + eps)
    r = 1 / denominator.sqrt()
    dr = gamma(n + 2, acc) * ms / (2 * denominator) + 4 * u
    w = torch.ones(()) if weight is None else _as_double(weight).abs()
    dy = xd.abs() * w * r * (dr + 2 * u)
    value = _final_rounding(2 * dy, x.dtype, got, expected) if got is not None else 2 * dy
    return Bound(value, "2*|x||w|r(gamma_{N+2}*ms/(2(ms+eps))+6u), rms norm, first order")


def softmax_bound(x, dim, got=None, expected=None, exp_units=4) -> Bound:
    """softmax over `dim`, y_i = exp(x_i - m) / sum_j exp(x_j - m). First order, per side:
    x_i - m off by u|x_i - m|, which exp turns into a relative error u|x_i - m|; exp itself
    within `exp_units` u (2 ulps); the sum of positive terms gamma_N, plus its terms' errors
    (their largest); the division u:
        |dy_i| <= y_i (u|x_i - m| + exp_units u + gamma_N + max_j (u|x_j - m| + exp_units u) + u),
    twice, plus the final roundings for float16/bfloat16."""
    xd = _as_double(x)
    acc = accumulation_dtype(x.dtype)
    u = unit_roundoff(acc)
    n = x.shape[dim] if x.dim() else 1
    y = torch.softmax(xd, dim)
    shifted = (xd - xd.amax(dim, keepdim=True)).abs()
    term = u * shifted + exp_units * u
    dy = y * (term + gamma(n, acc) + term.amax(dim, keepdim=True) + u)
    value = _final_rounding(2 * dy, x.dtype, got, expected) if got is not None else 2 * dy
    return Bound(value, f"2*y*(u|x-m|+{exp_units}u+gamma_N+max(...)+u), softmax, first order")


def normalize_bound(x, dim=1, got=None, expected=None) -> Bound:
    """F.normalize (p = 2): y = x / max(||x||, eps). The sum of squares has relative error
    gamma_N (a square, N - 1 additions), the square root halves it and adds u, the division
    u: |dy| <= |y| (gamma_N / 2 + 2u), per side (first order), twice."""
    xd = _as_double(x)
    acc = accumulation_dtype(x.dtype)
    u = unit_roundoff(acc)
    n = x.shape[dim]
    y = F.normalize(xd, dim=dim)
    dy = y.abs() * (gamma(n, acc) / 2 + 2 * u)
    value = _final_rounding(2 * dy, x.dtype, got, expected) if got is not None else 2 * dy
    return Bound(value, "2*|y|*(gamma_N/2+2u), normalize, first order")


# Chains: a bound carried through what follows it (first order, float32).

def through_elementwise(bound: Bound, z, y, lipschitz: float, units: float, why: str) -> Bound:
    """y = f(z) on both sides, z within `bound`: |f(z1) - f(z2)| <= L |z1 - z2| for f with
    Lipschitz constant L = `lipschitz`, plus each side's own error in evaluating f, at
    most `units` u (|z| + |y|) (the written-out tanh GELU: the cubic, two products and a
    sum of like signs 5u relative on tanh's argument, tanh within 2 ulps, then 1 + tanh
    and two products: 2u |y| + 2.2u |z|, so 3 units; tgelut assumed within the same),
    |z| taken at the CPU's z plus the bound."""
    u = unit_roundoff(torch.float32)
    zd, yd = _as_double(z).abs() + bound.value, _as_double(y).abs()
    own = 2 * units * u * (zd + yd) + 2 * units * ETA[torch.float32]
    return Bound(lipschitz * bound.value + own, f"{lipschitz}*({bound.name}) + 2*{units}u(|z|+|y|) [{why}]")


def through_linear(bound_value, a, weight, bias=None, fn=F.linear, **kwargs) -> Bound:
    """fn(a, weight, bias) (F.linear, F.conv*, or a matmul as fn=lambda a, w, b: a @ w) on
    inputs that differ by at most `bound_value`: (1 + gamma_m) fn(d, |W|) for the
    difference carried through the weights (each side's rounding of it), plus the
    layer's own multilinear_bound at the CPU's input a (float32)."""
    w = _as_double(weight).abs()
    ones = fn(torch.ones(a.shape, dtype=torch.float64), torch.ones_like(w),
              None if bias is None else torch.ones(bias.shape, dtype=torch.float64), **kwargs)
    carried = (1 + gamma(ones.round())) * fn(bound_value, w, None, **kwargs)
    own = multilinear_bound(fn, (a, weight, bias), kwargs)
    return Bound(carried + own.value, f"(1+gamma_m)|W|d + {own.name}")


def through_layer_norm(bound_value, h, dims=(-1,), weight=None, eps=1e-5) -> Bound:
    """A layer norm over `dims` of inputs that differ by at most `bound_value`: its
    Jacobian r (I - 1 1^T / N - x^ x^T / N) (times |w|) bounds the difference carried, to
    first order, by r |w| (d + mean d + |x^| mean(|x^| d)); plus the norm's own
    normalization_bounds at the CPU's input h."""
    hd = _as_double(h)
    dims = tuple(d % h.dim() for d in dims)
    mu = hd.mean(dims, keepdim=True)
    var = ((hd - mu) ** 2).mean(dims, keepdim=True)
    r = 1 / (var + eps).sqrt()
    x_hat = (hd - mu) * r
    w = torch.ones(()) if weight is None else _as_double(weight).abs()
    d = bound_value
    carried = r * w * (d + d.mean(dims, keepdim=True) + x_hat.abs() * (x_hat.abs() * d).mean(dims, keepdim=True))
    own = normalization_bounds(h, dims, weight, None, eps)[0]
    return Bound(carried + own.value, f"r|w|(d + mean d + |x^|mean(|x^|d)) + {own.name}")


def attention_bound(q, k, v, is_causal=False, scale=None, d_q=0.0, d_k=0.0, d_v=0.0, mask=None,
                    of_weights=False) -> Bound:
    """F.scaled_dot_product_attention(q, k, v) (no dropout, float32) on two
    implementations, whose q, k, v may already differ by d_q, d_k, d_v. First order:
      scores S = scale q k^T: |dS| <= scale (d_q |k|^T + |q| d_k^T) + 2 gamma_{D+1} scale |q| |k|^T
        (D the head size, one more rounding for the scaling, of q or of the scores);
      P = softmax(S): dP = P (dS - sum_j P_j dS_j), so |dP| <= P (|dS| + max_j |dS_j|), plus
        each side's own softmax error (softmax_bound's terms);
      out = P v: (1 + gamma) (|dP| |v| + P d_v) + 2 gamma_{2L+2} (P |v|), L the keys summed
        over, 2L + 2 roundings leaving room for an online softmax's rescaling of its
        partial sums (the CPU's flash attention does it once per block of keys).
    Masked (causal, or False in a boolean `mask` broadcast to the scores) scores are
    exactly 0 in P on both sides. `of_weights`: the bound of P itself (|dP|)."""
    qd, kd, vd = (_as_double(t) for t in (q, k, v))
    head = q.shape[-1]
    keys = k.shape[-2]
    scale = 1 / head ** 0.5 if scale is None else scale
    u = unit_roundoff(torch.float32)
    s = scale * (qd @ kd.transpose(-2, -1))
    ds = (scale * (torch.as_tensor(d_q, dtype=torch.float64) * torch.ones_like(qd)) @ kd.abs().transpose(-2, -1)
          + scale * qd.abs() @ (torch.as_tensor(d_k, dtype=torch.float64) * torch.ones_like(kd)).transpose(-2, -1)
          + 2 * gamma(head + 1) * scale * (qd.abs() @ kd.abs().transpose(-2, -1)))
    if is_causal:
        mask = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool).tril()
        s = s.masked_fill(~mask, float("-inf"))
        ds = ds.masked_fill(~mask, 0.0)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
        ds = ds.masked_fill(~mask, 0.0)
    p = torch.softmax(s, -1)
    shifted = torch.where(p > 0, (s - s.amax(-1, keepdim=True)).abs(), torch.zeros_like(s))
    term = u * shifted + 4 * u
    own = 2 * p * (term + gamma(keys) + term.amax(-1, keepdim=True) + u)
    dp = p * (ds + ds.amax(-1, keepdim=True)) + own
    if of_weights:
        return Bound(dp, "attention weights: P(|dS| + max|dS|) + softmax's own, first order")
    dv = torch.as_tensor(d_v, dtype=torch.float64) * torch.ones_like(vd)
    out = (1 + gamma(2 * keys + 2)) * (dp @ vd.abs() + p @ dv) + 2 * gamma(2 * keys + 2) * (p @ vd.abs())
    return Bound(out, "attention: (1+gamma)(|dP||v| + P d_v) + 2*gamma_{2L+2}*P|v|, first order")


def chain_tolerance(lengths, dtype=torch.float32, roundings=0) -> dict:
    """assert_close's rtol = atol for a whole model's output, where no per-element bound
    is practical: first order, the relative error of a chain of accumulations of the
    inner lengths `lengths` (GEMMs' K, convolutions' C_in/groups * prod(kernel), sums,
    norm statistics, and in a backward the batch and token counts the weight gradients
    sum over), with each layer's sum|w||a| at most the size of what it produces and
    errors passed on without growth (as through normalised layers: an assumption on
    the model, not a bound for every model), per side sum_l gamma_{K_l}, twice; plus for
    float16/bfloat16 `roundings` roundings of intermediates to dtype on each side (one
    side may round where the other keeps float32), u_out each, twice."""
    acc = accumulation_dtype(dtype)
    value = 2 * sum(gamma(k, acc) for k in lengths)
    if dtype != acc:
        value += 2 * roundings * unit_roundoff(dtype)
    return {"rtol": value, "atol": value}


# PyTorch's OpInfo samples of multilinear ops, compared within multilinear_bound: the
# sweeps of test_matmul.py and test_convolution.py (opinfo_sweep's checks compare within
# fixed tolerances; these bind the same two tests, and count what they compared alike).

def multilinear_sample_bound(op, args, kwargs, got, expected) -> Bound:
    """multilinear_bound of an OpInfo sample, its additive input (bias, beta C) the term
    either side may add after rounding the rest."""
    return multilinear_bound(op, args, kwargs, got, expected, name=f"{op.name}(|args|)",
                             partial=without_additive_term(op.name, args, kwargs))


def check_forward_within_bound(op, dtype, reference_dtype=None, exact=False, bound=multilinear_sample_bound) -> int:
    """Every CPU sample of `op` at `dtype`, run on pto, within bound(op, args, kwargs,
    got, expected) of the CPU result (args: the sample's input and args;
    `reference_dtype` as opinfo_sweep.check_forward); `exact`: equal instead, for ops
    that only move values (unfold)."""
    from opinfo_sweep import draws_random_numbers, to_cpu, to_device, widened

    count = 0
    for sample in op.sample_inputs("cpu", dtype, requires_grad=False):
        if draws_random_numbers(sample):
            continue
        args = (sample.input, *sample.args)
        if reference_dtype is None:
            expected = op(*to_device(args, "cpu"), **sample.kwargs)
        else:
            expected = op(*widened(args, reference_dtype), **sample.kwargs).to(dtype)
        actual = to_cpu(op(*to_device(args, "pto"), **to_device(sample.kwargs, "pto")))
        what = f"{op.name} at {dtype}, sample {count}"
        if exact:
            torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{what}: {m}")
        else:
            assert_within_bound(actual, expected, bound(op, args, sample.kwargs, actual, expected), what,
                                equal_nan=True)
        count += 1
    return count


def check_gradients_within_bound(op) -> int:
    """The gradients of every float32 sample of `op` on pto within
    multilinear_gradient_bounds of the CPU's, for one random incoming gradient."""
    from opinfo_sweep import draws_random_numbers, leaves, to_cpu, to_device

    count = 0
    for sample in op.sample_inputs("cpu", torch.float32, requires_grad=True):
        if draws_random_numbers(sample):
            continue
        args = [sample.input, *sample.args]
        expected = op(*args, **sample.kwargs)
        if not expected.requires_grad:
            continue
        pto_args = to_device(args, "pto")
        actual = op(*pto_args, **to_device(sample.kwargs, "pto"))
        grad = torch.randn_like(expected)
        expected_grads = torch.autograd.grad(expected, leaves(args), grad, allow_unused=True)
        actual_grads = torch.autograd.grad(actual, leaves(pto_args), grad.to("pto"), allow_unused=True)
        bounds = multilinear_gradient_bounds(op, args, sample.kwargs, grad)
        for i, (want, got, bound) in enumerate(zip(expected_grads, actual_grads, bounds)):
            if want is not None:
                assert_within_bound(to_cpu(got), want, bound, f"{op.name} sample {count}, gradient {i}", equal_nan=True)
        count += 1
    return count


def bounded_opinfo_tests(ops, dtypes, reference_dtype=lambda op, dtype: None, exact=(),
                         bound=multilinear_sample_bound):
    """opinfo_sweep.opinfo_tests' two tests, comparing within `bound` forward (see
    check_forward_within_bound) and within multilinear_gradient_bounds backward (for
    multilinear ops only); ops named in `exact` compare equal forward."""
    import pytest

    from opinfo_sweep import SWEPT, op_id

    @pytest.mark.parametrize("dtype", dtypes, ids=str)
    @pytest.mark.parametrize("op", ops, ids=op_id)
    def forward(op, dtype):
        if dtype not in op.supported_dtypes("cpu"):
            pytest.skip(f"{op.name} does not support {dtype} on CPU either")
        count = check_forward_within_bound(op, dtype, reference_dtype(op, dtype), exact=op.name in exact, bound=bound)
        assert count > 0
        SWEPT["forward"][(op_id(op), str(dtype))] = count

    @pytest.mark.parametrize("op", [op for op in ops if op.supports_autograd], ids=op_id)
    def gradients(op):
        if torch.float32 not in op.supported_dtypes("cpu"):
            pytest.skip(f"{op.name} takes no float32 on CPU either: nothing to differentiate")
        SWEPT["gradient"][op_id(op)] = check_gradients_within_bound(op)

    return forward, gradients
