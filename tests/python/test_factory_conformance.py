"""Factory functions on pto against the CPU: every dtype, every size class, out= and bad
arguments.

Ops: linspace, logspace (bases 10, 2, e, 0.5, -2), arange, range (deprecated: its
warning must be raised on pto too), full (and its dtype inference from the fill value),
eye (n and n, m), tril_indices/triu_indices (offsets 0, ±1, ±3, past the size either
way), randperm, zeros/ones/empty, empty_like/zeros_like/ones_like/full_like (of a
contiguous, a transposed and a channels_last tensor: shapes, dtypes and strides).

Each op runs at every dtype of DTYPES (and with no dtype, for the default) and in every
size class of SIZES (0, 1, small, odd, ~1e5 elements). Checks:

- values: the result on pto (device, dtype, shape, strides, values); randperm's values
  are random (pto's Philox differs from the CPU's generator by design), so it must be a
  permutation of 0..n-1; empty's values are whatever memory held, so shape/dtype/strides;
- out: out= of the right size (the result is `out`, values as above);
- out_resize: out= of the wrong size, resized with the CPU's warning (a non-empty out),
  or silently (an empty one);
- out_strided: out= a non-contiguous view, a column of a (n, 2) base, and the view
  `torch.zeros(2, 3)[:, 1:]` (both bases filled with 7 rather than zeros, so that an
  element left unwritten shows): the whole base compared, so elements written outside
  the view show too (for randperm: the same elements written, and a permutation);
- errors: bad arguments (negative steps or sizes, zero or wrong-direction steps,
  non-finite start/end, n past the dtype's range for randperm, fill values that do not
  fit, unsupported dtypes, an out= whose elements overlap) raise the CPU's exception
  type on pto; the warnings the CPU raises (resize, deprecation) must come on pto too.

When the CPU raises for a case in any check, pto must raise the same exception type.

Tolerances: integer, bool and exact results (full, eye, zeros, indices) must be equal.
linspace/arange/range compute start + i·step (linspace from the nearer end): the step
rounds once, the product and the sum once each, so |error| <= 3u(|start| + |end|) <
2·eps·(|start| + |end|), the atol used (rtol 0). logspace is base ** that value: its
exponent's error times |ln base| is a relative error, plus a few ulps for pow (4·eps).

Crash isolation: the cases run in a worker interpreter (this file with --worker, one
thread); a crash or a hang is a problem of the case it happened in, naming it, and a new
worker goes on from the next case. The whole file takes about 40 s on one core; as a
script (`python3 tests/python/test_factory_conformance.py [--ops eye,full]`) it prints
the counts and every failing (op, check, dtype), marking those in KNOWN.
"""

import argparse
import fnmatch
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings

import pytest
import torch
from torch.testing import assert_close

# ---------------------------------------------------------------- known divergences
# Each cause: why, and the (op glob, check glob, dtype glob or tuple of them) tests it
# fails; every test named here is xfail(strict=True): an entry must go when its fix
# lands. Repros in the comments, pto against the CPU. None at present.
KNOWN = {}


def _dtype_globs(d):
    return (d,) if isinstance(d, str) else d


def known_reason(op: str, check: str, dtype: str):
    for cause, (reason, entries) in KNOWN.items():
        for o, c, d in entries:
            if fnmatch.fnmatchcase(op, o) and fnmatch.fnmatchcase(check, c) and \
                    any(fnmatch.fnmatchcase(dtype, g) for g in _dtype_globs(d)):
                return f"[{cause}] {reason}"
    return None


# ---------------------------------------------------------------- dtypes and sizes

DTYPES = {"default": None, "complex64": torch.complex64, "complex128": torch.complex128,
          "float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
          "int64": torch.int64, "uint8": torch.uint8, "bool": torch.bool}
SIZES = {"zero": 0, "one": 1, "small": 4, "odd": 17, "large": 100_003}
# 2-D sizes of about the same classes, for eye, full, zeros ...
SHAPES = {"zero": (0, 3), "one": (1, 1), "small": (2, 2), "odd": (7, 3), "large": (317, 316)}
CHECKS = ("values", "out", "out_resize", "out_strided", "errors")


def kind(dtype):
    """'float', 'complex', 'int', 'uint', 'bool' (None: the default, a float)."""
    if dtype is None or dtype.is_floating_point:
        return "float"
    if dtype.is_complex:
        return "complex"
    if dtype == torch.bool:
        return "bool"
    return "uint" if dtype == torch.uint8 else "int"


def eps(dtype) -> float:
    """The machine epsilon of a floating or complex dtype (the default's for None); 0 for
    integers and bool, which must be exact."""
    if dtype is None:
        dtype = torch.get_default_dtype()
    if dtype.is_complex:
        dtype = dtype.to_real()
    return torch.finfo(dtype).eps if dtype.is_floating_point else 0.0


def dt(dtype) -> dict:
    return {} if dtype is None else {"dtype": dtype}


# ---------------------------------------------------------------- running one case

class Case:
    """fn(device) -> a tensor, a tuple, or an {"result", "out", "base"} dict for out=;
    `compare` is "exact", "close" (with atol and rtol), "shape" or "permutation"."""

    def __init__(self, label, fn, compare="exact", atol=0.0, rtol=0.0):
        self.label, self.fn, self.compare, self.atol, self.rtol = label, fn, compare, atol, rtol


def run(fn, device):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = fn(device)
        except Exception as error:  # compared by type with the CPU's
            value = error
    said = [(w.category.__name__, str(w.message)) for w in caught
            if "no native pto kernel" not in str(w.message)]  # the CPU fallback's own
    return value, said


def leaves(value) -> list:
    if isinstance(value, dict):
        return [(k, value[k]) for k in sorted(value)]
    if isinstance(value, (tuple, list)):
        return [(str(n), v) for n, v in enumerate(value)]
    return [("result", value)]


def differs(actual, expected, atol, rtol):
    """None when |actual - expected| <= atol + rtol·|expected| everywhere (NaN where the
    CPU has NaN, equal infinities), else assert_close's message. Vectorised first:
    assert_close itself takes a quarter of a second on 1e5 elements."""
    if torch.equal(actual, expected):
        return None
    if expected.is_floating_point() or expected.is_complex():
        wide = torch.complex128 if expected.is_complex() else torch.float64
        a, e = actual.to(wide), expected.to(wide)
        ok = (a == e) | (a.isnan() & e.isnan()) | ((a - e).abs() <= atol + rtol * e.abs())
        if bool(ok.all()):
            return None
    try:
        assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True)
    except AssertionError as error:
        return " ".join(str(error).split())[:300]
    return None


def problems_of(case: Case, device_value, cpu_value) -> list:
    problems = []
    got, want = leaves(device_value), leaves(cpu_value)
    if [k for k, _ in got] != [k for k, _ in want]:
        return [f"results {[k for k, _ in got]}, the CPU's {[k for k, _ in want]}"]
    for (name, g), (_, w) in zip(got, want):
        if not isinstance(w, torch.Tensor):
            if g != w:
                problems.append(f"{name}: {g!r}, the CPU's {w!r}")
            continue
        if not isinstance(g, torch.Tensor):
            problems.append(f"{name}: {type(g).__name__}, the CPU's a tensor")
            continue
        if g.device.type != "pto":
            problems.append(f"{name}: on {g.device}")
        if (g.dtype, g.shape) != (w.dtype, w.shape):
            problems.append(f"{name}: {g.dtype}{list(g.shape)}, the CPU's {w.dtype}{list(w.shape)}")
            continue
        if g.numel() > 1 and g.stride() != w.stride():
            problems.append(f"{name}: strides {g.stride()}, the CPU's {w.stride()}")
        if case.compare == "shape":
            continue
        actual = g.cpu()
        if case.compare == "permutation":
            if name == "base":  # out= its column 1: column 0 untouched, column 1 a permutation
                if not torch.equal(actual[..., 0], w[..., 0]):
                    problems.append(f"{name}: elements outside the out= view were written")
                actual, w = actual[..., 1], w[..., 1]
            elif name == "view_base":  # the same elements written (those no longer 7), a permutation
                if not torch.equal(actual != 7, w != 7):
                    problems.append(f"{name}: written {(actual != 7).int().tolist()}, "
                                    f"the CPU {(w != 7).int().tolist()}")
                    continue
                actual, w = actual[actual != 7], w[w != 7]
            identity = torch.arange(w.numel(), dtype=torch.float64)
            if not torch.equal(w.to(torch.float64).sort().values, identity):
                continue  # n past what the dtype holds exactly (bfloat16 past 256): no permutation on the CPU either
            if not torch.equal(actual.to(torch.float64).sort().values, identity):
                problems.append(f"{name}: not a permutation of 0..{w.numel() - 1}: {actual[:8].tolist()}...")
            continue
        problem = differs(actual, w, *((case.atol, case.rtol) if case.compare == "close" else (0.0, 0.0)))
        if problem:
            problems.append(f"{name}: {problem}")
    return problems


def check_case(case: Case) -> list:
    cpu_value, cpu_said = run(case.fn, "cpu")
    pto_value, pto_said = run(case.fn, "pto")
    where = case.label
    if isinstance(cpu_value, Exception):
        if not isinstance(pto_value, Exception):
            return [f"{where}: the CPU raises {type(cpu_value).__name__} ({str(cpu_value).splitlines()[0][:120]}), "
                    f"pto does not"]
        if type(pto_value) is not type(cpu_value):
            return [f"{where}: pto raises {type(pto_value).__name__} ({str(pto_value).splitlines()[0][:120]}), "
                    f"the CPU {type(cpu_value).__name__} ({str(cpu_value).splitlines()[0][:120]})"]
        return []
    if isinstance(pto_value, Exception):
        return [f"{where}: pto raises {type(pto_value).__name__}: {str(pto_value).splitlines()[0][:200]}"]
    problems = [f"{where}: {p}" for p in problems_of(case, pto_value, cpu_value)]
    if [c for c, _ in pto_said] != [c for c, _ in cpu_said] or \
            [m.split(".")[0] for _, m in pto_said] != [m.split(".")[0] for _, m in cpu_said]:
        problems.append(f"{where}: warnings {pto_said}, the CPU's {cpu_said}")
    return problems


# ---------------------------------------------------------------- out= variants

def out_cases(label, call, shape, dtype, compare="exact", atol=0.0, rtol=0.0):
    """{check: [Case]} for `call(device, out)` whose result has `shape` at `dtype`."""
    out_dtype = dtype if dtype is not None else torch.get_default_dtype()
    numel = math.prod(shape)

    def right(device):
        out = torch.full(shape, 7, dtype=out_dtype, device=device)
        result = call(device, out)
        return {"result": result, "out": out, "same": result is out}

    def wrong(size):
        def fn(device):
            out = torch.zeros(size, dtype=out_dtype, device=device)
            result = call(device, out)
            return {"result": result, "out": out, "same": result is out}
        return fn

    def column(device):  # a column of an (numel, 2) base: stride 2
        base = torch.full((*shape, 2), 7, dtype=out_dtype, device=device)
        out = base[..., 1]
        result = call(device, out)
        return {"result": result, "base": base, "same": result is out}

    def example(device):  # the view torch.zeros(2, 3)[:, 1:] (of 7s), whatever shape the result has
        base = torch.full((2, 3), 7, dtype=out_dtype, device=device)
        out = base[:, 1:]
        result = call(device, out)
        return {"result": result, "view_base": base, "same": result is out}

    def overlapping(device):
        out = torch.zeros(1, dtype=out_dtype, device=device).expand(shape)
        return call(device, out)

    kw = {"compare": compare, "atol": atol, "rtol": rtol}
    cases = {"out": [Case(f"{label} out=", right, **kw)],
             "out_resize": [Case(f"{label} out=empty", wrong(0), **kw),
                            Case(f"{label} out= of {numel + 3} elements", wrong(numel + 3), **kw)],
             "out_strided": [Case(f"{label} out=base[..., 1]", column, **kw)],
             "errors": []}
    if numel == 4 or shape == (2, 2):
        cases["out_strided"].append(Case(f"{label} out=zeros(2, 3)[:, 1:]", example, **kw))
    if numel > 1:
        cases["errors"].append(Case(f"{label} out= overlapping (expand)", overlapping, **kw))
    return cases


def merge(target: dict, more: dict):
    for check, cases in more.items():
        target.setdefault(check, []).extend(cases)


# ---------------------------------------------------------------- the ops' cases

def range_endpoints(dtype):
    """(start, end) in range for every dtype: unsigned and bool from 0."""
    k = kind(dtype)
    return (0, 40) if k in ("uint", "bool") else (-3, 40)


def linspace_cases(dtype):
    cases = {}
    start, end = range_endpoints(dtype)
    if kind(dtype) in ("float", "complex"):
        start, end = -3.5, 40.25
    tol = 2 * eps(dtype) * (abs(start) + abs(end))
    for size, n in SIZES.items():
        label = f"linspace({start}, {end}, {n})"
        call = (lambda n: lambda device: torch.linspace(start, end, n, device=device, **dt(dtype)))(n)
        merge(cases, {"values": [Case(label, call, "close", atol=tol)]})
        merge(cases, out_cases(label, (lambda n: lambda device, out: torch.linspace(start, end, n, out=out))(n),
                               (n,), dtype, "close", atol=tol))
    merge(cases, {"values": [
        Case("linspace(0, inf, 5)", lambda d: torch.linspace(0, math.inf, 5, device=d, **dt(dtype))),
        Case("linspace(nan, 1, 5)", lambda d: torch.linspace(math.nan, 1, 5, device=d, **dt(dtype))),
        Case("linspace(5, 5, 4)", lambda d: torch.linspace(5, 5, 4, device=d, **dt(dtype))),
        Case("linspace(40, -3, 6) (descending)",
             lambda d: torch.linspace(*reversed(range_endpoints(dtype)), 6, device=d, **dt(dtype)), "close",
             atol=2 * eps(dtype) * 43),
        Case("linspace(tensor(1.), tensor(4.), 4)",
             lambda d: torch.linspace(torch.tensor(1.0, device=d), torch.tensor(4.0, device=d), 4, device=d,
                                            **dt(dtype)),
             "close", atol=2 * eps(dtype) * 5)],
        "errors": [Case("linspace(0, 1, -1)", lambda d: torch.linspace(0, 1, -1, device=d, **dt(dtype)))]})
    return cases


LOG_BASES = (10.0, 2.0, math.e, 0.5, -2.0)


def logspace_cases(dtype):
    cases = {}
    k = kind(dtype)
    start, end = (0.0, 2.0) if k in ("int", "uint", "bool") else (-2.5, 3.0)
    for base in LOG_BASES if k in ("float", "complex") else [b for b in LOG_BASES if b > 0]:
        # (a negative base gives NaN for fractional exponents: NaN to an integer is undefined)
        rtol = 2 * eps(dtype) * (abs(start) + abs(end)) * abs(math.log(abs(base))) + 4 * eps(dtype)
        atol = torch.finfo(torch.float32).tiny if k in ("float", "complex") else 0.0
        for size, n in SIZES.items():
            if size == "large" and base not in (10.0, 2.0):
                continue  # every base at small sizes; the large size once per dtype is enough
            label = f"logspace({start}, {end}, {n}, base={base:.4g})"
            call = (lambda n, base: lambda d: torch.logspace(start, end, n, base, device=d, **dt(dtype)))(n, base)
            merge(cases, {"values": [Case(label, call, "close", atol=atol, rtol=rtol)]})
            if base == 10.0:
                merge(cases, out_cases(label, (lambda n: lambda d, out: torch.logspace(start, end, n, out=out))(n),
                                       (n,), dtype, "close", atol=atol, rtol=rtol))
    merge(cases, {"errors": [Case("logspace(0, 1, -1)", lambda d: torch.logspace(0, 1, -1, device=d, **dt(dtype)))],
                  "values": [Case("logspace(0, inf, 4)", lambda d: torch.logspace(0, math.inf, 4, device=d,
                                                                                  **dt(dtype)))]})
    return cases


def arange_like_cases(name, dtype):
    """arange, or range (end included, deprecated)."""
    op = getattr(torch, name)
    inclusive = name == "range"
    cases = {}
    k = kind(dtype)
    start, step = (0, 1) if k in ("uint", "bool") else (-3, 1)
    if k in ("float", "complex"):
        start, step = -3.5, 0.5
    for size, n in SIZES.items():
        if n == 0 and inclusive:
            continue  # range always holds start
        end = start + (n - 1) * step if inclusive else start + n * step
        tol = 2 * eps(dtype) * max(abs(start), abs(end), abs(step))
        label = f"{name}({start}, {end}, {step})"
        call = (lambda end: lambda d: op(start, end, step, device=d, **dt(dtype)))(end)
        merge(cases, {"values": [Case(label, call, "close", atol=tol)]})
        merge(cases, out_cases(label, (lambda end: lambda d, out: op(start, end, step, out=out))(end),
                               (n,), dtype, "close", atol=tol))
    if not inclusive:
        merge(cases, {"values": [Case("arange(17) (end only)", lambda d: torch.arange(17, device=d, **dt(dtype))),
                                 Case("arange(10, 0, -3)", lambda d: torch.arange(10, 0, -3, device=d, **dt(dtype))),
                                 Case("arange(0, 1, 0.3)", lambda d: torch.arange(0, 1, 0.3, device=d, **dt(dtype)),
                                      "close", atol=2 * eps(dtype))]})
    else:
        merge(cases, {"values": [Case("range(10, 0, -3)", lambda d: torch.range(10, 0, -3, device=d, **dt(dtype)))]})
    merge(cases, {"errors": [
        Case(f"{name}(0, 10, 0) (zero step)", lambda d: op(0, 10, 0, device=d, **dt(dtype))),
        Case(f"{name}(0, 10, -1) (wrong direction)", lambda d: op(0, 10, -1, device=d, **dt(dtype))),
        Case(f"{name}(10, 0, 1) (wrong direction)", lambda d: op(10, 0, 1, device=d, **dt(dtype))),
        Case(f"{name}(0, inf)", lambda d: op(0, math.inf, device=d, **dt(dtype))),
        Case(f"{name}(-inf, 0)", lambda d: op(-math.inf, 0, device=d, **dt(dtype))),
        Case(f"{name}(nan, 5)", lambda d: op(math.nan, 5, device=d, **dt(dtype))),
        Case(f"{name}(0, 5, nan)", lambda d: op(0, 5, math.nan, device=d, **dt(dtype)))]})
    return cases


def fill_values(dtype):
    k = kind(dtype)
    return {"float": (2.5, -0.0, math.inf, math.nan), "complex": (1 - 2j, 3.0), "int": (7, -3),
            "uint": (7, 255), "bool": (True, False)}[k]


def full_cases(dtype):
    cases = {}
    for value in fill_values(dtype):
        for size, shape in SHAPES.items():
            label = f"full({shape}, {value})"
            call = (lambda shape, value: lambda d: torch.full(shape, value, device=d, **dt(dtype)))(shape, value)
            merge(cases, {"values": [Case(label, call)]})
            if value == fill_values(dtype)[0]:
                merge(cases, out_cases(label, (lambda shape: lambda d, out: torch.full(shape, value, out=out))(shape),
                                       shape, dtype))
    if dtype is None:  # dtype inferred from the fill value
        merge(cases, {"values": [Case(f"full((3,), {v!r})", (lambda v: lambda d: torch.full((3,), v, device=d))(v))
                                 for v in (2, 2.5, True, 1 + 2j)]})
    merge(cases, {"errors": [
        Case("full((-1,), 1)", lambda d: torch.full((-1,), 1, device=d, **dt(dtype))),
        Case("full((2,), 300)", lambda d: torch.full((2,), 300, device=d, **dt(dtype))),
        Case("full((2,), -1)", lambda d: torch.full((2,), -1, device=d, **dt(dtype))),
        Case("full((2,), 1e40)", lambda d: torch.full((2,), 1e40, device=d, **dt(dtype))),
        Case("full((2,), 1j)", lambda d: torch.full((2,), 1j, device=d, **dt(dtype)))]})
    return cases


EYE_SIZES = {"zero": (0, None), "one": (1, None), "small": (5, None), "odd": (7, 3), "odd_wide": (3, 7),
             "large": (316, 317)}


def eye_cases(dtype):
    cases = {}
    for size, (n, m) in EYE_SIZES.items():
        args = (n,) if m is None else (n, m)
        label = f"eye{args}"
        merge(cases, {"values": [Case(label, (lambda args: lambda d: torch.eye(*args, device=d, **dt(dtype)))(args))]})
        merge(cases, out_cases(label, (lambda args: lambda d, out: torch.eye(*args, out=out))(args),
                               (n, n if m is None else m), dtype))
    merge(cases, out_cases("eye(2)", lambda d, out: torch.eye(2, out=out), (2, 2), dtype))
    merge(cases, {"errors": [Case("eye(-1)", lambda d: torch.eye(-1, device=d, **dt(dtype))),
                             Case("eye(3, -2)", lambda d: torch.eye(3, -2, device=d, **dt(dtype)))]})
    return cases


TRI_SIZES = {"zero": (0, 0), "one": (1, 1), "small": (5, 5), "odd": (7, 3), "odd_wide": (3, 7), "large": (316, 317)}


def tri_indices_cases(name, dtype):
    op = getattr(torch, name)
    cases = {}
    for size, (row, col) in TRI_SIZES.items():
        offsets = (0, 1, -1, 3, -3, col + 5, -(row + 5)) if size != "large" else (0, 7, -7)
        for offset in offsets:
            label = f"{name}({row}, {col}, {offset})"
            merge(cases, {"values": [Case(label, (lambda row, col, offset: lambda d: op(
                row, col, offset, device=d, **dt(dtype)))(row, col, offset))]})
    merge(cases, {"errors": [Case(f"{name}(-1, 3)", lambda d: op(-1, 3, device=d, **dt(dtype))),
                             Case(f"{name}(3, -1)", lambda d: op(3, -1, device=d, **dt(dtype)))]})
    return cases


def randperm_limits(dtype):
    """n at and past the largest n the CPU accepts for the dtype (the CPU defines it)."""
    return {torch.int8: (128, 129), torch.uint8: (256, 257), torch.int16: (32768, 32769),
            torch.float16: (2049, 2050), torch.bfloat16: (257, 258)}.get(dtype, ())


def randperm_cases(dtype):
    cases = {}
    for size, n in SIZES.items():
        label = f"randperm({n})"
        merge(cases, {"values": [Case(label, (lambda n: lambda d: torch.randperm(n, device=d, **dt(dtype)))(n),
                                      "permutation")]})
        merge(cases, out_cases(label, (lambda n: lambda d, out: torch.randperm(n, out=out))(n), (n,), dtype,
                               "permutation"))
    merge(cases, {"errors": [Case(f"randperm({n})", (lambda n: lambda d: torch.randperm(n, device=d, **dt(dtype)))(n),
                                  "permutation") for n in (-1, *randperm_limits(dtype))]})
    if dtype == torch.float32:
        merge(cases, {"errors": [Case("randperm(2**24 + 2)", lambda d: torch.randperm(2 ** 24 + 2, device=d,
                                                                                       dtype=dtype), "permutation")]})
    return cases


def constant_cases(name, dtype):
    """zeros, ones, empty."""
    op = getattr(torch, name)
    compare = "shape" if name == "empty" else "exact"
    cases = {}
    for size, shape in {**SHAPES, "zero_1d": (0,), "three_d": (2, 0, 3)}.items():
        label = f"{name}{shape}"
        merge(cases, {"values": [Case(label, (lambda shape: lambda d: op(shape, device=d, **dt(dtype)))(shape),
                                      compare)]})
        merge(cases, out_cases(label, (lambda shape: lambda d, out: op(shape, out=out))(shape), shape, dtype, compare))
    merge(cases, {"errors": [Case(f"{name}(-1)", lambda d: op(-1, device=d, **dt(dtype))),
                             Case(f"{name}(2, -3)", lambda d: op(2, -3, device=d, **dt(dtype)))]})
    return cases


def like_sources(device):
    """A contiguous, a transposed and a channels_last float32 tensor, and an empty one."""
    return {"contiguous": torch.ones(3, 5, device=device), "transposed": torch.ones(5, 3, device=device).t(),
            "channels_last": torch.ones(2, 3, 4, 5, device=device).contiguous(memory_format=torch.channels_last),
            "empty": torch.ones(0, 4, device=device), "large": torch.ones(317, 316, device=device)}


def like_cases(name, dtype):
    op = getattr(torch, name)
    compare = "shape" if name == "empty_like" else "exact"
    value = fill_values(dtype)[0]
    cases = {}
    for source in like_sources("cpu"):
        def call(d, source=source):
            x = like_sources(d)[source]
            return op(x, value, **dt(dtype)) if name == "full_like" else op(x, **dt(dtype))
        merge(cases, {"values": [Case(f"{name}({source})", call, compare)]})

        def contiguous(d, source=source):
            x = like_sources(d)[source]
            kw = {**dt(dtype), "memory_format": torch.contiguous_format}
            return op(x, value, **kw) if name == "full_like" else op(x, **kw)
        merge(cases, {"values": [Case(f"{name}({source}, memory_format=contiguous)", contiguous, compare)]})
    if name == "full_like":
        merge(cases, {"errors": [Case("full_like(x, 300)", lambda d: torch.full_like(
            torch.ones(2, device=d), 300, **dt(dtype)))]})
    return cases


OPS = {
    "linspace": linspace_cases, "logspace": logspace_cases,
    "arange": lambda dtype: arange_like_cases("arange", dtype),
    "range": lambda dtype: arange_like_cases("range", dtype),
    "full": full_cases, "eye": eye_cases,
    "tril_indices": lambda dtype: tri_indices_cases("tril_indices", dtype),
    "triu_indices": lambda dtype: tri_indices_cases("triu_indices", dtype),
    "randperm": randperm_cases,
    **{name: (lambda name: lambda dtype: constant_cases(name, dtype))(name) for name in ("zeros", "ones", "empty")},
    **{name: (lambda name: lambda dtype: like_cases(name, dtype))(name)
       for name in ("empty_like", "zeros_like", "ones_like", "full_like")},
}


# ---------------------------------------------------------------- workers

HANG_SECONDS = 120


def work(ops: list, resume, out) -> None:
    """Every case of `ops`, all dtypes and checks, in order; one JSON line per event,
    written before the step it names. `resume` [op, dtype, check, i] skips up to it."""
    import pypto_torch

    pypto_torch.set_fallback_mode("silent")
    torch.set_num_threads(1)  # one core: CI's budget, and no threads fighting over a loaded machine

    def emit(**event):
        out.write(json.dumps(event) + "\n")
        out.flush()

    skipping = resume is not None
    for op in ops:
        for dname, dtype in DTYPES.items():
            cases = OPS[op](dtype)
            for check in CHECKS:
                for i, case in enumerate(cases.get(check, [])):
                    if skipping:
                        skipping = [op, dname, check, i] != resume
                        continue
                    where = {"op": op, "dtype": dname, "check": check, "i": i, "label": case.label}
                    emit(ev="start", **where)
                    if os.environ.get("PTO_FACTORY_FAULT") == f"{op}:{dname}:{check}:{i}":  # the harness's own test
                        os.kill(os.getpid(), signal.SIGSEGV)
                    torch.manual_seed(0)
                    torch.pto.manual_seed_all(0)
                    emit(ev="done", problems=check_case(case), **where)
    emit(ev="end")


def run_ops(ops: list) -> dict:
    """{(op, dtype, check): [problems]} for every case of `ops`, run in a worker
    interpreter; a crash or hang is a problem of the case it happened in, and a new
    worker goes on from the next case."""
    results, resume = {}, None
    with tempfile.TemporaryDirectory(prefix="pto_factories_") as workdir:
        while True:
            path = os.path.join(workdir, "events.jsonl")
            open(path, "w").close()
            with open(path + ".log", "w+") as log:
                job = json.dumps({"ops": ops, "resume": resume, "out": path})
                process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", job],
                                           stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
                size, seen, hung = 0, time.monotonic(), False
                while process.poll() is None:
                    time.sleep(0.05)
                    if os.path.getsize(path) != size:
                        size, seen = os.path.getsize(path), time.monotonic()
                    elif time.monotonic() - seen > HANG_SECONDS:
                        os.killpg(process.pid, signal.SIGKILL)
                        process.wait()
                        hung = True
                log.seek(0)
                tail = log.read()[-600:]
            with open(path) as f:
                events = [json.loads(line) for line in f if line.endswith("\n")]
            for e in events:
                if e["ev"] == "done":
                    results.setdefault((e["op"], e["dtype"], e["check"]), []).extend(e["problems"])
                elif e["ev"] == "start":
                    results.setdefault((e["op"], e["dtype"], e["check"]), [])
            if events and events[-1]["ev"] == "end" and process.returncode == 0:
                return results
            last = next((e for e in reversed(events) if e["ev"] == "start"), None)
            rc = process.returncode
            how = f"hung (no progress for {HANG_SECONDS} s)" if hung else \
                f"crashed ({f'signal {signal.Signals(-rc).name}' if rc < 0 else f'exit status {rc}'})"
            if last is None or (events[-1]["ev"] != "start"):
                # died between cases (or before the first): name the ops, not a case
                for op in ops:
                    results.setdefault((op, "?", "?"), []).append(f"worker {how} outside a case: {tail}")
                return results
            results[(last["op"], last["dtype"], last["check"])].append(f"{last['label']}: {how}")
            resume = [last["op"], last["dtype"], last["check"], last["i"]]


# ---------------------------------------------------------------- the tests

def _params():
    params = []
    for op, make in OPS.items():
        for dname, dtype in DTYPES.items():
            cases = make(dtype)
            for check in CHECKS:
                if not cases.get(check):
                    continue
                reason = known_reason(op, check, dname)
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                params.append(pytest.param(op, dname, check, marks=marks, id=f"{op}-{check}-{dname}"))
    return params


class _Results:
    def __init__(self):
        self.table = {}
        self.done = set()

    def get(self, op):
        if op not in self.done:  # every op in one worker: an interpreter's start is a good part of the time
            self.table.update(run_ops(list(OPS)))
            self.done.update(OPS)
        return self.table


@pytest.fixture(scope="session")
def factory_results():
    return _Results()


@pytest.mark.parametrize("op,dtype,check", _params())
def test_factory_matches_cpu(op, dtype, check, factory_results):
    table = factory_results.get(op)
    outside = table.get((op, "?", "?"))
    assert not outside, outside
    problems = table.get((op, dtype, check))
    assert problems is not None, f"{op} {dtype} {check}: not run"
    count = len(OPS[op](DTYPES[dtype])[check])
    assert not problems, f"{op} {dtype} {check}: {len(problems)} problems in {count} cases:\n" + \
        "\n".join(problems[:10])


def test_range_warns_that_it_is_deprecated_on_pto_too():
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        torch.range(0, 3, device="pto")


def test_a_crash_fails_its_case_and_the_worker_goes_on(monkeypatch):
    monkeypatch.setenv("PTO_FACTORY_FAULT", "eye:float32:values:2")
    table = run_ops(["eye"])
    label = OPS["eye"](torch.float32)["values"][2].label
    assert table[("eye", "float32", "values")] == [f"{label}: crashed (signal SIGSEGV)"]
    assert set(table) == {("eye", d, c) for d in DTYPES for c in CHECKS if OPS["eye"](DTYPES[d]).get(c)}


def test_known_divergences_name_ops_checks_and_dtypes_of_this_file():
    for cause, (reason, entries) in KNOWN.items():
        for o, c, d in entries:
            assert fnmatch.filter(OPS, o) and fnmatch.filter(CHECKS, c), (cause, o, c)
            assert all(fnmatch.filter(DTYPES, g) for g in _dtype_globs(d)), (cause, d)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help="comma-separated ops; default: all")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        job = json.loads(args.worker)
        with open(job["out"], "a") as out:
            work(job["ops"], job["resume"], out)
        return 0
    ops = args.ops.split(",") if args.ops else list(OPS)
    start = time.monotonic()
    table = {}
    for op in ops:
        table.update(run_ops([op]))
    failing = {key: problems for key, problems in table.items() if problems}
    cases = sum(len(OPS[op](DTYPES[d]).get(c, [])) for op in ops for d in DTYPES for c in CHECKS)
    print(f"ops {len(ops)}, (op, dtype, check) tests {len(table)}, cases {cases}, failing tests {len(failing)} "
          f"(in KNOWN {sum(1 for key in failing if known_reason(key[0], key[2], key[1]))}), "
          f"problems {sum(len(p) for p in failing.values())}; {time.monotonic() - start:.0f} s")
    for (op, dname, check), problems in failing.items():
        mark = "known" if known_reason(op, check, dname) else "NEW"
        print(f"  [{mark}] {op} {check} {dname}: {len(problems)}; {problems[0][:300]}")
    for (op, dname, check), problems in table.items():
        if not problems and known_reason(op, check, dname):
            print(f"  [passes, remove from KNOWN] {op} {check} {dname}")
    return 1 if any(not known_reason(k[0], k[2], k[1]) for k in failing) else 0


if __name__ == "__main__":
    sys.exit(main())
