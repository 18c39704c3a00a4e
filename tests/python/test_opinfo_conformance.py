"""What PyTorch's device-generic OpInfo suites (test_ops.py's TestCommon) check of a
device, checked on pto against the CPU's behaviour for the same inputs
(torch.testing._internal.common_methods_invocations.op_db):

- reference     every reference input (OpInfo.reference_inputs: the sample inputs plus
                large, broadcast and extremal ones): pto's result equals the CPU's.
- noncontiguous every sample input made non-contiguous on each device
                (SampleInput.noncontiguous(): the values every other element of a
                doubled buffer): pto's result equals the CPU's.
- out           out= a correctly sized tensor (every out= tensor is filled with 7 first,
                so that elements an op leaves alone compare equal): pto returns that tensor, keeps its
                storage (data_ptr), warns as the CPU does, and writes the CPU's values.
- out_resized   out= an empty tensor and out= one of a wrong, non-zero size: both
                resized to the CPU's shape with the CPU's values, and the warning
                "An output with one or more elements was resized" exactly when the CPU
                gives it.
- out_dtype     out= a tensor of a dtype the result cannot be cast to (integers for a
                floating or complex result, bool for an integer one): pto raises the
                exception type the CPU raises; where the CPU accepts it, the same values.
- out_strided   out= a non-contiguous view (every other element of a buffer filled with
                7): the whole buffer afterwards equals the CPU's buffer (values written
                through the view, nothing around it touched), and the view keeps its
                strides as on the CPU.
- variants      the function (op.op), the method, the in-place method, the operator
                forms and the aliases, each on pto against the same variant on the CPU;
                an in-place variant returns its input and changes it as on the CPU.
- errors        every OpInfo.error_inputs: pto raises the CPU's exception type with a
                message matching the OpInfo's error_regex (where the CPU's matches it),
                and afterwards the device still computes (a small op's value).

Wherever the CPU raises, pto must raise the same exception type; wherever it returns,
pto must return. An op that runs on pto through the CPU fallback is held to the same.

Inputs: made once on the CPU, seeded (torch.manual_seed(0); OpInfo reseeds before each
sample too), and copied to pto; a non-contiguous sample is made non-contiguous on each
device (a copy between devices would make it contiguous again). Each run of a sample
starts from the same seeds.

Tolerances: the OpInfo's own per-dtype overrides for the TestCommon test a check mirrors
(opinfo_sweep.opinfo_tolerance), else assert_close's defaults for the dtype. Where pto's
floating result is outside them but, element by element, no farther from the CPU's float64
result of the same inputs than the CPU's own result is (sweep_all_ops.no_less_accurate), it is accepted and
counted apart ("closer"): the bound is the CPU's own rounding error on that sample, not a
tolerance tuned to one machine. Sums of products (GEMMs and convolutions, MULTILINEAR)
outside the tolerance are accepted within error_bounds.multilinear_sample_bound, the
proven bound of two sums of the same rounded products in any order ("bound"). Not compared: results of samples that draw random numbers
(pto's Philox stream differs from the CPU's Mersenne Twister by design; test_random.py
compares their statistics); values of empty-like factories (uninitialised memory: shapes
and dtypes only); indices of sort/topk/kthvalue/median/mode that pick other, equal
elements (sweep_all_ops.TIES). A non-contiguous sample whose result equals the CPU's for
the same values laid out contiguously is accepted too ("layout"): some CPU kernels sum
strided inputs in another order than dense ones, and pto's one result is one of the
CPU's own. A check that fails where the op's own OpInfo entry skips the TestCommon test
it mirrors (unittest.skip, on every device) is reported as skipped, with that reason:
PyTorch's suite does not hold any device to it.

Crash isolation: the checks run in worker interpreters, a few ops each; a crash or a hang
fails the one (op, dtype, check) it happened in, named, and a new worker goes on after it.

Modes:
- CI (default): CI_OPS (a fixed list: pto's native families and a spread of fallback
  ops), at float32 and int64 (CI_DTYPES, those the CPU supports), at most CI_CAPS inputs
  per check, evenly spread (opinfo_sweep.evenly_spaced). A case of KNOWN_DIVERGENCES runs
  every input, as in the full mode, so that its xfail is decided on the same evidence.
- PTO_CONFORMANCE_FULL=1: every op of op_db at every dtype pto has
  (sweep_all_ops.DTYPES) that the CPU supports, every input.
- Script: `python3 tests/python/test_opinfo_conformance.py [--full] [--ops a,b]
  [--dtypes float32,int64] [--jobs N] [--minutes M] [--json out.json]` prints the counts
  (ops, samples, error inputs, out= cases, failures) as a table and the failures.

Every case of KNOWN_DIVERGENCES is xfail(strict=True): when a fix lands its test
passes, fails as XPASS, and the entry must go.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import warnings

import pytest
import torch

import sweep_all_ops as sweep
from opinfo_sweep import copy_like, evenly_spaced, opinfo_skip, opinfo_tolerance

# ---------------------------------------------------------------- known divergences
#
# cause -> the cases it explains: (op ids, check, dtypes) with dtypes None for every dtype.
# One row per cause; each case is xfail(strict=True).
KNOWN_DIVERGENCES = {
    "the CPU is wrong here, pto right: the CPU's narrow_copy.out (narrow_copy_dense_cpu_out) and "
    "avg_pool3d.out copy into a non-contiguous out as if it were contiguous, over the elements around "
    "the view; pto writes through the view": [
        ("narrow_copy", "out_strided", None),
        ("nn.functional.avg_pool3d", "out_strided", None),
    ],
    "torch's own choice per device type: linear_cross_entropy's chunked forms resolve acc_policy/acc_dtype "
    "'auto' from a table of device types (torch/nn/modules/linear_cross_entropy_options.py: float32 "
    "accumulation for 'cpu' and 'cuda' only), so on any other device, pto included, float16/bfloat16 chunks "
    "accumulate in the input dtype; each aten op of that algorithm agrees with the CPU's on pto": [
        ("nn.functional.linear_cross_entropy.chunked", "reference", (torch.float16, torch.bfloat16)),
        ("nn.functional.linear_cross_entropy.chunked", "noncontiguous", (torch.float16, torch.bfloat16)),
        ("nn.functional.linear_cross_entropy.chunked_none", "reference", (torch.float16, torch.bfloat16)),
        ("nn.functional.linear_cross_entropy.chunked_none", "noncontiguous", (torch.float16, torch.bfloat16)),
    ],
    "overflow inside a complex product, where neither device is right: (-1e20-1e20j) * (-1e20-1e20j) is "
    "2e40j exactly, its real part 1e40 - 1e40; both products overflow float32, so pto's a*c - b*d is "
    "inf - inf = NaN, and the CPU's vectorised kernel, fusing one product, gives -inf (an extremal "
    "reference input; ldexp multiplies by 2**e, complex128 likewise)": [
        (("mul", "__rmul__", "square"), "reference", (torch.complex64,)),
        ("ldexp", "reference", (torch.complex128,)),
    ],
    "sparse layouts: pto has no sparse tensors (docs/CONFORMANCE.md); these ops make or take "
    "SparseCOO/SparseCsr tensors on the device": [
        ("to_sparse", "reference", None), ("to_sparse", "noncontiguous", None), ("to_sparse", "variants", None),
        ("sparse.mm.reduce", "reference", None), ("sparse.sampled_addmm", "reference", None),
    ],
}

# ---------------------------------------------------------------- what is checked

SEED = 0
DTYPE_CHECKS = ("reference", "noncontiguous", "out", "out_resized", "out_dtype", "out_strided", "variants")
OP_CHECKS = ("errors",)
CHECKS = DTYPE_CHECKS + OP_CHECKS
OUT_CHECKS = ("out", "out_resized", "out_dtype", "out_strided")

# The TestCommon test of PyTorch's test_ops.py whose OpInfo tolerance overrides a check takes.
MIRRORS = {"reference": ("test_compare_cpu",), "noncontiguous": ("test_noncontiguous_samples",),
           "out": ("test_out",), "out_resized": ("test_out", "test_out_warning"), "out_dtype": ("test_out",),
           "out_strided": ("test_out",), "variants": ("test_variant_consistency_eager",)}

# The inputs a check takes (reference inputs or sample inputs, as PyTorch's tests), and
# how many of them CI takes per (op, dtype), evenly spread.
INPUTS = {"reference": "reference", "noncontiguous": "sample", "variants": "sample", "out": "sample",
          "out_resized": "sample", "out_dtype": "sample", "out_strided": "sample"}
CI_CAPS = {"reference": 12, "noncontiguous": 6, "variants": 4, "out": 2, "out_resized": 2, "out_dtype": 2,
           "out_strided": 2}

CI_DTYPES = (torch.float32, torch.int64)

# CI's ops: what pto runs natively, by family, and a spread of ops that run through the
# CPU fallback (which must agree too).
CI_OPS = (
    # elementwise
    "add", "sub", "mul", "div.no_rounding_mode", "div.floor_rounding", "div.trunc_rounding", "pow",
    "remainder", "fmod", "maximum", "minimum", "eq", "lt", "ge", "bitwise_and", "bitwise_left_shift",
    "abs", "neg", "sign", "exp", "log", "sqrt", "rsqrt", "sin", "tanh", "sigmoid", "erf", "floor",
    "round", "clamp", "where", "lerp", "addcmul", "addcdiv", "logical_not", "isnan", "nan_to_num",
    "fill", "zero_", "logaddexp", "atan2", "hypot", "copysign",
    # activations
    "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "nn.functional.hardtanh",
    "nn.functional.leaky_relu", "nn.functional.elu", "nn.functional.glu", "nn.functional.softplus",
    # reductions
    "sum", "mean", "prod", "amax", "amin", "max.reduction_with_dim", "min.reduction_no_dim", "argmax",
    "var", "std", "var_mean", "linalg.vector_norm", "nansum", "count_nonzero", "all", "any", "logsumexp",
    # softmax, losses
    "softmax", "log_softmax", "nn.functional.cross_entropy", "nn.functional.nll_loss",
    "nn.functional.mse_loss",
    # matmul, convolution, normalization, pooling
    "mm", "bmm", "addmm", "matmul", "baddbmm", "nn.functional.linear", "nn.functional.conv2d",
    "nn.functional.layer_norm", "nn.functional.batch_norm", "nn.functional.max_pool2d",
    "nn.functional.avg_pool2d", "nn.functional.adaptive_avg_pool2d", "nn.functional.interpolate.nearest",
    # indexing, scatter
    "index_select", "gather", "scatter", "scatter_add", "index_add", "index_copy", "index_fill",
    "masked_fill", "masked_select", "take", "put", "nonzero", "nn.functional.embedding",
    # shape, copy
    "cat", "stack", "flip", "roll", "tril", "triu", "repeat", "narrow_copy", "clone", "contiguous",
    "t", "permute", "expand", "reshape", "view", "squeeze", "unsqueeze", "transpose", "diagonal",
    "split", "chunk", "as_strided", "constant_pad_nd",
    # sort, scan
    "cumsum", "cumprod", "sort", "topk", "kthvalue", "median", "unique", "searchsorted", "bincount",
    "histc",
    # factories
    "arange", "linspace", "full", "zeros_like", "ones_like", "empty_like", "eye", "tensor_split",
    # linalg and others (fallback)
    "linalg.det", "linalg.solve", "cross", "kron", "trace", "diag", "outer", "renorm", "polar",
    "cdist", "isin", "bucketize", "frexp", "ldexp", "heaviside",
)

HANG_SECONDS = 180
STARTUP_SECONDS = 120
CI_PAIRS_PER_CHUNK = 90  # about 4 workers in CI: each takes seconds to import torch and op_db
FULL_PAIRS_PER_CHUNK = 25

RESIZED = "An output with one or more elements was resized"


def full_mode() -> bool:
    return os.environ.get("PTO_CONFORMANCE_FULL") == "1"


def known_cases() -> dict:
    """(op id, check, dtype name or None) -> the cause, from KNOWN_DIVERGENCES."""
    cases = {}
    for cause, rows in KNOWN_DIVERGENCES.items():
        for ops, check, dtypes in rows:
            for op in ((ops,) if isinstance(ops, str) else ops):
                for dtype in (dtypes or (None,)):
                    cases[(op, check, None if dtype is None else sweep.dtype_name(dtype))] = cause
    return cases


def known_cause(op: str, dtype, check: str):
    cases = known_cases()
    return cases.get((op, check, dtype)) or cases.get((op, check, None))


# The order the dtypes are checked in: a run stopped at a deadline (--minutes) has
# checked every op at the first ones.
DTYPE_ORDER = (torch.float32, torch.int64, torch.float64, torch.bfloat16, torch.float16, torch.bool, torch.int32,
               torch.complex64, torch.uint8, torch.int8, torch.int16, torch.complex128)


def plan(full: bool, names=None, dtypes=None) -> list:
    """The units to check, in order: [op id, dtype name or None, check, cap]: every op at
    the first dtype of DTYPE_ORDER, then every op at the next, and so on; an op's error
    inputs with its first dtype. The units of one (op, dtype) are adjacent, so that a
    worker makes its inputs once."""
    ops = sweep.all_ops()
    if names is None:
        names = list(ops) if full else [name for name in CI_OPS if name in ops]
    wanted = dtypes if dtypes is not None else (DTYPE_ORDER if full else CI_DTYPES)
    chosen = [d for d in DTYPE_ORDER if d in wanted]
    units, errors_placed = [], set()
    for name in names:  # ops with error inputs and no CPU dtype at all: their errors first
        if ops[name].error_inputs_func is not None and not sweep.cpu_dtypes(ops[name]):
            units.append([name, None, "errors", None])
            errors_placed.add(name)
    for dtype in chosen:
        for name in names:
            op = ops[name]
            if dtype not in op.supported_dtypes("cpu"):
                continue
            for check in DTYPE_CHECKS:
                cap = None if full or known_cause(name, sweep.dtype_name(dtype), check) else CI_CAPS[check]
                units.append([name, sweep.dtype_name(dtype), check, cap])
            if op.error_inputs_func is not None and name not in errors_placed:
                units.append([name, None, "errors", None])
                errors_placed.add(name)
    return units


def unit_id(unit) -> str:
    name, dtype, check = unit[:3]
    return f"{name}-{dtype}-{check}" if dtype else f"{name}-{check}"


# ---------------------------------------------------------------- running one case (in a worker)

class Outcome:
    """What calling something did: its value or its exception, and whether it gave the
    resize warning."""

    def __init__(self, fn, args, kwargs, device):
        self.value, self.error, self.resized = None, None, False
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                self.value = fn(*args, **kwargs)
                if device == "pto":
                    torch.pto.synchronize()  # a kernel's failure is raised at the next sync
            except Exception as error:  # noqa: BLE001  (the exception is what is compared)
                self.error = error
        self.resized = any(RESIZED in str(w.message) for w in caught)


def describe_error(error) -> str:
    return sweep.first_line(error)


def raising_differs(cpu: Outcome, pto: Outcome):
    """None when both returned or both raised the same exception type, else why not."""
    if cpu.error is not None and pto.error is not None:
        if type(cpu.error) is type(pto.error):
            return None
        return f"pto raises {describe_error(pto.error)}; the CPU raises {describe_error(cpu.error)}"
    if cpu.error is not None:
        return f"the CPU raises {describe_error(cpu.error)}; pto returns"
    if pto.error is not None:
        return f"pto raises {describe_error(pto.error)}; the CPU returns"
    return None


def compare_values(actual, expected, tolerance: dict, uninitialised: bool):
    """None when pto's result (`actual`, on the CPU) matches the CPU's, else a message."""
    got, want = sweep.leaves(actual), sweep.leaves(expected)
    if len(got) != len(want):
        return f"{len(got)} results, the CPU gives {len(want)}"
    for a, e in zip(got, want):
        if isinstance(e, torch.Tensor) != isinstance(a, torch.Tensor):
            return f"a {type(a).__name__} where the CPU gives a {type(e).__name__}"
        if isinstance(e, torch.Tensor):
            if (a.shape, a.dtype, a.layout) != (e.shape, e.dtype, e.layout):
                return (f"{a.dtype}{list(a.shape)} ({a.layout}) where the CPU gives "
                        f"{e.dtype}{list(e.shape)} ({e.layout})")
            if uninitialised or e.layout != torch.strided:
                continue
            try:
                torch.testing.assert_close(a, e, equal_nan=True, **tolerance)
            except AssertionError as error:
                return " ".join(str(error).split())[:400]
        elif isinstance(e, (float, complex)) or (isinstance(e, int) and not isinstance(e, bool)):
            try:
                torch.testing.assert_close(a, e, equal_nan=True, check_dtype=False, **tolerance)
            except AssertionError as error:
                return " ".join(str(error).split())[:400]
        elif a != e:
            return f"{a!r} where the CPU gives {e!r}"[:400]
    return None


def on_cpu(value):
    """`value` with its tensors copied to the CPU (structure kept)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, (list, tuple)) and not isinstance(value, torch.Size):
        items = [on_cpu(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    return value


class Tally:
    """One unit's counts and its first failures."""

    def __init__(self):
        self.cases, self.failed, self.messages = 0, 0, []
        self.count = {"random": 0, "closer": 0, "bounded": 0, "ties": 0, "layout": 0, "raised_alike": 0,
                      "skipped": 0}
        self.skip_reason = None

    def case(self):
        """One more case checked; a line to the worker's events now and then, so that the
        parent sees progress through a long check."""
        self.cases += 1
        if _heartbeat is not None:
            _heartbeat()

    def fail(self, where: str, message: str):
        self.failed += 1
        if len(self.messages) < 3:
            self.messages.append(f"{where}: {message}"[:900])

    def record(self) -> dict:
        status = "fail" if self.failed else ("skip" if self.cases == 0 else "pass")
        record = {"status": status, "cases": self.cases, "failed": self.failed, "count": self.count}
        if self.messages:
            record["messages"] = self.messages
        if status == "skip":
            record["reason"] = self.skip_reason or "no input this check applies to"
        return record


class Context:
    """What checking one (op, dtype) needs: the op, its tolerances, how a value mismatch
    may still be accepted."""

    def __init__(self, op, dtype, check):
        self.op, self.dtype, self.check = op, dtype, check
        self.tolerance = opinfo_tolerance(op, dtype, MIRRORS.get(check, ())) if dtype is not None else {}
        self.uninitialised = op.name in sweep.UNINITIALISED

    def values_differ(self, sample, actual, expected, tally: Tally):
        """None when pto's value (on the CPU) agrees with the CPU's for `sample`, counting
        accepted differences; else the message."""
        message = compare_values(actual, expected, self.tolerance, self.uninitialised)
        if message is None:
            return None
        got, want = sweep.leaves(actual), sweep.leaves(expected)
        if sweep.draws_random_numbers(self.op, sample):
            tally.count["random"] += 1
            return None
        if self.op.name in MULTILINEAR and within_multilinear_bound(self.op, sample, got, want):
            tally.count["bounded"] += 1
            return None
        if self.op.name in sweep.TIES and sweep.picks_equal_elements(self.op, sample, got, want):
            tally.count["ties"] += 1
            return None
        if all(isinstance(t, torch.Tensor) for t in got + want) and \
                sweep.no_less_accurate(self.op, sample, got, want, self.tolerance):
            tally.count["closer"] += 1
            return None
        return message

    def same_as_contiguous(self, contiguous_sample, pto_value) -> bool:
        """Whether pto's result for a non-contiguous sample equals the CPU's for the same
        values laid out contiguously: some CPU kernels take another path (another order
        of sums) for strided inputs, so the CPU's two results differ from each other;
        pto's, from one algorithm whatever the layout, is then one of the CPU's own."""
        inp, args, kwargs = copies(contiguous_sample, "cpu", self.op)
        seeded("cpu")
        try:
            dense = self.op(inp, *args, **kwargs)
        except Exception:  # noqa: BLE001  (no contiguous result to compare with)
            return False
        return compare_values(on_cpu(pto_value), dense, self.tolerance, self.uninitialised) is None


# Sums of products (GEMMs, convolutions): pto's and the CPU's libraries add in orders
# neither promises, so each result may differ from the other by twice the proven bound of
# a sum of m rounded products in any order (error_bounds.multilinear_bound: Higham's
# 2 gamma_m sum|t|, plus each side's final rounding at float16/bfloat16), per element.
MULTILINEAR = {"mm", "bmm", "addmm", "baddbmm", "matmul", "nn.functional.linear", "mv", "addmv",
               "nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d",
               "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d", "nn.functional.conv_transpose3d"}


def within_multilinear_bound(op, sample, got: list, want: list) -> bool:
    """Whether pto's one floating (or complex64) result is within error_bounds' bound of
    the CPU's (a complex one part by part)."""
    from error_bounds import assert_within_bound, complex_multilinear_bound, multilinear_sample_bound

    if len(got) != 1 or not isinstance(want[0], torch.Tensor) or want[0].dtype not in (
            torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64):
        return False
    args = (sample.input, *sample.args)
    try:
        if want[0].is_complex():
            bound = complex_multilinear_bound(op, args, sample.kwargs)
            for part in (torch.real, torch.imag):
                assert_within_bound(part(got[0]), part(want[0]), bound, equal_nan=True)
        else:
            bound = multilinear_sample_bound(op, args, sample.kwargs, got[0], want[0])
            assert_within_bound(got[0], want[0], bound, equal_nan=True)
    except (AssertionError, RuntimeError, TypeError, ValueError, StopIteration):
        return False
    return True


def copies(sample, device, op):
    """The sample's input, args and kwargs copied to `device` as they lie in memory
    (opinfo_sweep.copy_like; tensor_split's indices stay on the CPU, where PyTorch
    requires them)."""
    if op.name in sweep.CPU_ARGUMENTS:
        inp, kwargs = copy_like([sample.input, sample.kwargs], device)
        return inp, copy_like(sample.args, "cpu"), kwargs
    return copy_like([sample.input, sample.args, sample.kwargs], device)


def summary(sample) -> str:
    return sample.summary()[:500]


def seeded(device):
    torch.manual_seed(SEED)
    if device == "pto":
        torch.pto.manual_seed_all(SEED)


def run_both(fn, sample, op):
    """`fn` on copies of `sample` on the CPU and on pto, from the same seeds: the
    outcomes and the inputs each ran on."""
    outcomes = []
    for device in ("cpu", "pto"):
        inp, args, kwargs = copies(sample, device, op)
        seeded(device)
        outcomes.append((Outcome(fn, (inp, *args), kwargs, device), inp))
    return outcomes


def check_forward(ctx: Context, samples, tally: Tally, noncontiguous=False):
    """The op on each sample (made non-contiguous first, on the CPU: copy_like keeps
    its layout on pto)."""
    for index, sample in samples:
        if noncontiguous:
            if any(t.layout != torch.strided for t in sweep.leaves([sample.input, sample.args, sample.kwargs])
                   if isinstance(t, torch.Tensor)):
                tally.count["skipped"] += 1  # sparse inputs have no strides to make non-contiguous
                tally.skip_reason = tally.skip_reason or "sparse inputs: no strides to make non-contiguous"
                continue
            contiguous, sample = sample, sample.noncontiguous()
        (cpu, _), (pto, _) = run_both(ctx.op, sample, ctx.op)
        where = f"{'non-contiguous ' if noncontiguous else ''}sample {index} {summary(sample)}"
        tally.case()
        message = raising_differs(cpu, pto)
        if message is None and cpu.error is not None:
            tally.count["raised_alike"] += 1
            continue
        if message is None:
            message = ctx.values_differ(sample, on_cpu(pto.value), cpu.value, tally)
        if message is not None and noncontiguous and ctx.same_as_contiguous(contiguous, pto.value):
            tally.count["layout"] += 1
            message = None
        if message is not None:
            tally.fail(where, message)


def output_tensors(value):
    """The tensors an out= form writes, or None when the result is no tensor or tuple of
    tensors (such an op's out= is not checked, as in PyTorch's test_out)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, tuple) and value and all(isinstance(v, torch.Tensor) for v in value):
        return list(value)
    return None


def make_outs(kind: str, expected: list, device: str):
    """out= tensors for `expected` (the CPU's functional result) on `device`, and the
    buffers behind them for out_strided."""
    outs, bases = [], []
    for e in expected:  # filled with 7, not left uninitialised: an element an op leaves alone compares equal
        if kind == "out":
            outs.append(torch.full(e.shape, 7, dtype=e.dtype, device=device))
        elif kind == "empty":
            outs.append(torch.empty(0, dtype=e.dtype, device=device))
        elif kind == "wrong_size":
            outs.append(torch.full((e.numel() + 1,), 7, dtype=e.dtype, device=device))
        elif kind == "wrong_dtype":
            wrong = torch.int64 if (e.is_floating_point() or e.is_complex()) else \
                (torch.bool if e.dtype != torch.bool else torch.int64)
            outs.append(torch.full(e.shape, 7, dtype=wrong, device=device))
        elif kind == "strided":
            base = torch.full((*e.shape, 2), 7, dtype=e.dtype, device=device)
            bases.append(base)
            outs.append(base[..., 1])
    return outs, bases


def pack(outs: list, expected_value):
    return outs[0] if isinstance(expected_value, torch.Tensor) else tuple(outs)


def returned_outs(value, outs) -> bool:
    """Whether an out= call returned its out tensors themselves."""
    got = [value] if isinstance(value, torch.Tensor) else list(value) if isinstance(value, tuple) else []
    return len(got) == len(outs) and all(g is o for g, o in zip(got, outs))


def check_out(ctx: Context, samples, tally: Tally):
    """One of the four out= checks (ctx.check) on each sample."""
    kinds = {"out": ("out",), "out_resized": ("empty", "wrong_size"), "out_dtype": ("wrong_dtype",),
             "out_strided": ("strided",)}[ctx.check]
    if not ctx.op.supports_out:
        tally.skip_reason = "the OpInfo has no out= form (supports_out=False)"
        return
    for index, sample in samples:
        cpu_args = copies(sample, "cpu", ctx.op)
        seeded("cpu")
        functional = Outcome(ctx.op, (cpu_args[0], *cpu_args[1]), cpu_args[2], "cpu")
        expected = None if functional.error is not None else output_tensors(functional.value)
        if expected is None:
            tally.count["skipped"] += 1
            if tally.skip_reason is None:
                tally.skip_reason = ("the CPU raises on every sample: " + describe_error(functional.error)
                                     if functional.error is not None else "the result is no tensor or tuple of tensors")
            continue
        for kind in kinds:
            where = f"out={kind} sample {index} {summary(sample)}"
            results = []
            for device in ("cpu", "pto"):
                inp, args, kwargs = copies(sample, device, ctx.op)
                outs, bases = make_outs(kind, expected, device)
                pointers = [o.data_ptr() for o in outs]
                seeded(device)
                outcome = Outcome(ctx.op, (inp, *args), {**kwargs, "out": pack(outs, functional.value)}, device)
                results.append((outcome, outs, bases, pointers))
            (cpu, cpu_outs, cpu_bases, cpu_ptrs), (pto, pto_outs, pto_bases, pto_ptrs) = results
            tally.case()
            message = raising_differs(cpu, pto)
            if message is None and cpu.error is not None:
                tally.count["raised_alike"] += 1
                continue
            if message is None:
                message = out_differs(ctx, sample, kind, cpu, cpu_outs, cpu_bases, cpu_ptrs,
                                      pto, pto_outs, pto_bases, pto_ptrs, tally)
            if message is not None:
                tally.fail(where, message)


def out_differs(ctx, sample, kind, cpu, cpu_outs, cpu_bases, cpu_ptrs, pto, pto_outs, pto_bases, pto_ptrs, tally):
    if returned_outs(pto.value, pto_outs) != returned_outs(cpu.value, cpu_outs):
        return (f"pto {'returns' if returned_outs(pto.value, pto_outs) else 'does not return'} its out= "
                f"tensors; the CPU {'does' if returned_outs(cpu.value, cpu_outs) else 'does not'}")
    if pto.resized != cpu.resized:
        return f"pto {'gives' if pto.resized else 'does not give'} the warning '{RESIZED}'; " \
               f"the CPU {'does' if cpu.resized else 'does not'}"
    pto_kept = [o.data_ptr() == p for o, p in zip(pto_outs, pto_ptrs)]
    cpu_kept = [o.data_ptr() == p for o, p in zip(cpu_outs, cpu_ptrs)]
    if kind in ("out", "strided", "wrong_dtype") and pto_kept != cpu_kept:
        return f"out= storage kept (data_ptr unchanged): pto {pto_kept}, the CPU {cpu_kept}"
    if kind == "strided":
        strides = [o.stride() for o in pto_outs if o.numel()], [o.stride() for o in cpu_outs if o.numel()]
        if strides[0] != strides[1]:  # (an empty tensor's strides say nothing)
            return f"out= view restrided: strides {strides[0]} on pto, {strides[1]} on the CPU"
        # 7 as the buffer's dtype holds it (True in a bool buffer)
        around = [b[..., 0] == torch.tensor(7).to(b.dtype) for b in on_cpu(pto_bases)], \
                 [b[..., 0] == torch.tensor(7).to(b.dtype) for b in cpu_bases]
        if not all(torch.equal(a, e) for a, e in zip(*around)):
            touched = ["pto" if not bool(a.all()) else None for a in around[0]] + \
                      ["the CPU" if not bool(e.all()) else None for e in around[1]]
            return (f"out= view: other elements around the view (filled with 7) are written; written by "
                    f"{' and '.join(sorted({t for t in touched if t}))}")
        if all(bool(e.all()) for e in around[1]):  # written through the view: compare what it shows
            got, want = on_cpu([b[..., 1] for b in pto_bases]), [b[..., 1] for b in cpu_bases]
        else:  # both sides wrote the same elements around it too (restrided alike): the whole buffers
            got, want = on_cpu(pto_bases), cpu_bases
        message = ctx.values_differ(sample, got, want, tally)
        return None if message is None else "the buffer behind the out= view: " + message
    shapes = [tuple(o.shape) for o in pto_outs], [tuple(o.shape) for o in cpu_outs]
    if shapes[0] != shapes[1]:
        return f"out= shapes {shapes[0]} on pto, {shapes[1]} on the CPU"
    message = ctx.values_differ(sample, on_cpu(pto_outs), cpu_outs, tally)
    return None if message is None else "out= values: " + message


def variants(op) -> list:
    """(name, callable, in place) for every variant besides the function itself."""
    found = [("method", op.method_variant, False), ("inplace", op.inplace_variant, True),
             ("operator", op.operator_variant, False), ("inplace_operator", op.inplace_operator_variant, True)]
    for alias in op.aliases:
        found += [(f"alias {alias.name}", alias.op, False), (f"alias method {alias.name}", alias.method_variant, False),
                  (f"alias inplace {alias.name}", alias.inplace_variant, True)]
    return [v for v in found if v[1] is not None]


def check_variants(ctx: Context, samples, tally: Tally):
    others = variants(ctx.op)
    if not others:
        tally.skip_reason = "no method, in-place, operator or alias variant (the function is 'reference')"
        return
    for index, sample in samples:
        for name, fn, inplace in [("function", ctx.op.op, False)] + others:
            if not isinstance(sample.input, torch.Tensor) and name != "function":
                continue
            (cpu, cpu_input), (pto, pto_input) = run_both(fn, sample, ctx.op)
            where = f"{name} variant, sample {index} {summary(sample)}"
            tally.case()
            message = raising_differs(cpu, pto)
            if message is None and cpu.error is not None:
                tally.count["raised_alike"] += 1
                continue
            if message is None and inplace and ((pto.value is pto_input) != (cpu.value is cpu_input)):
                message = f"pto's in-place variant {'returns' if pto.value is pto_input else 'does not return'} " \
                          f"its input; the CPU's {'does' if cpu.value is cpu_input else 'does not'}"
            if message is None:
                message = ctx.values_differ(sample, on_cpu(pto.value), cpu.value, tally)
            if message is None and inplace:
                message = ctx.values_differ(sample, on_cpu(pto_input), cpu_input, tally)
                message = None if message is None else "the input after the in-place variant: " + message
            if message is not None:
                tally.fail(where, message)


def device_works() -> bool:
    """A small op on pto still gives the right value."""
    try:
        torch.pto.synchronize()
        return (torch.arange(6, device="pto") * 2).sum().item() == 30 and \
            (torch.ones(3, device="pto") + 0.5).cpu().tolist() == [1.5, 1.5, 1.5]
    except Exception:  # noqa: BLE001
        return False


def check_errors(ctx: Context, tally: Tally):
    op = ctx.op
    torch.manual_seed(SEED)
    error_inputs = list(op.error_inputs("cpu"))
    tally.skip_reason = "the OpInfo gives no error input for the CPU"
    for index, error_input in enumerate(error_inputs):
        sample = error_input.sample_input
        (cpu, _), (pto, _) = run_both(op, sample, op)
        where = f"error input {index} {summary(sample)} (OpInfo: {getattr(error_input.error_type, '__name__', error_input.error_type)}, '{error_input.error_regex}')"
        tally.case()
        message = raising_differs(cpu, pto)
        if message is None and cpu.error is not None:
            tally.count["raised_alike"] += 1
            if re.search(error_input.error_regex, str(cpu.error)) and not re.search(error_input.error_regex, str(pto.error)):
                message = f"pto's message does not match '{error_input.error_regex}': {describe_error(pto.error)}"
        elif message is None:
            tally.count["skipped"] += 1  # the CPU of this torch returns too: nothing to compare
        if not device_works():
            message = (message + "; " if message else "") + "the device no longer computes afterwards"
        if message is not None:
            tally.fail(where, message)


# ---------------------------------------------------------------- the worker

_heartbeat = None


def work(units: list, resume: int, out) -> None:
    """Run `units` from index `resume` on, one JSON line per event to `out`, written
    before the step it names: a crash leaves the unit it died in last."""
    import pypto_torch

    pypto_torch.set_fallback_mode("silent")
    ops = sweep.all_ops()
    inputs = {}

    def emit(**event):
        out.write(json.dumps(event) + "\n")
        out.flush()

    global _heartbeat
    last = [time.monotonic()]

    def heartbeat():
        if time.monotonic() - last[0] > 10:
            last[0] = time.monotonic()
            emit(ev="tick")

    _heartbeat = heartbeat
    for position in range(resume, len(units)):
        name, dname, check, cap = units[position]
        op = ops[name]
        emit(ev="start", u=position)
        start = time.monotonic()
        tally = Tally()
        dtype = getattr(torch, dname) if dname else None
        try:
            ctx = Context(op, dtype, check)
            if check == "errors":
                check_errors(ctx, tally)
            else:
                kind = INPUTS[check]
                if (name, dname, kind) not in inputs:
                    inputs.clear()  # one (op, dtype) at a time
                    torch.manual_seed(SEED)
                    make = op.reference_inputs if kind == "reference" else op.sample_inputs
                    inputs[(name, dname, kind)] = list(make("cpu", dtype, requires_grad=False))
                samples = evenly_spaced(list(enumerate(inputs[(name, dname, kind)])), cap)
                if check in ("reference", "noncontiguous"):
                    check_forward(ctx, samples, tally, noncontiguous=check == "noncontiguous")
                elif check == "variants":
                    check_variants(ctx, samples, tally)
                else:
                    check_out(ctx, samples, tally)
        except Exception as error:  # noqa: BLE001  (the check itself failed: a failure of the unit)
            tally.fail("making the inputs or running the check", describe_error(error))
        record = tally.record()
        skipped_by = opinfo_skip(op, dtype, MIRRORS.get(check, ())) if record["status"] == "fail" else None
        if skipped_by:
            record.update(status="skip", reason=f"failing where PyTorch's own OpInfo skips TestCommon."
                          f"{'/'.join(MIRRORS[check])} ({skipped_by})")
        emit(ev="done", u=position, seconds=round(time.monotonic() - start, 3), **record)
    emit(ev="end")


# ---------------------------------------------------------------- the parent

def _chunks(units: list, pairs: int) -> list:
    """`units`' indices in runs of `pairs` (op, dtype) pairs (an op's error inputs count
    as one)."""
    chunks, current, seen = [], [], set()
    for index, unit in enumerate(units):
        key = (unit[0], unit[1])
        if key not in seen:
            if len(seen) == pairs:
                chunks.append(current)
                current, seen = [], set()
            seen.add(key)
        current.append(index)
    return chunks + ([current] if current else [])


def run_units(units: list, jobs: int = 1, chunk_pairs: int = CI_PAIRS_PER_CHUNK, deadline: float | None = None,
              progress=None, hang_seconds: float = HANG_SECONDS) -> dict:
    """Run `units` in worker interpreters (`chunk_pairs` (op, dtype) pairs each, at most
    `jobs` at once)
    and return unit index -> record. A worker that dies or stalls in a unit is started
    again on that unit once; dying there again fails the unit (status "crash"/"hang",
    with its output's tail) and a new worker goes on after it. (Once only: a crash that
    does not repeat is noted in the unit's record as "crashed_once".) A worker that dies
    before its first unit (the extension being rebuilt: its import fails) is started
    again after a pause, a few times. Units not reached before `deadline`
    (time.monotonic()) are left out."""
    chunks = [list(c) for c in _chunks(units, chunk_pairs)]
    results, crashed_once = {}, {}
    waiting = [{"chunk": chunk, "resume": 0, "starts": 0} for chunk in chunks]
    running = []
    with tempfile.TemporaryDirectory(prefix="pto_conformance_") as workdir:
        while waiting or running:
            while waiting and len(running) < jobs and (deadline is None or time.monotonic() < deadline):
                task = waiting.pop(0)
                if task.get("not_before", 0) > time.monotonic():
                    waiting.insert(0, task)
                    break
                running.append(_launch(task, units, workdir))
            if not running and (not waiting or (deadline is not None and time.monotonic() >= deadline)):
                break
            time.sleep(0.1)
            for worker in list(running):
                size = os.path.getsize(worker["path"])
                if size != worker["size"]:
                    worker["size"], worker["seen"] = size, time.monotonic()
                limit = hang_seconds + (0 if worker["size"] else STARTUP_SECONDS)
                hung = worker["process"].poll() is None and time.monotonic() - worker["seen"] > limit
                late = deadline is not None and time.monotonic() > deadline
                if hung or late:
                    os.killpg(worker["process"].pid, signal.SIGKILL)
                    worker["process"].wait()
                if worker["process"].poll() is None:
                    continue
                running.remove(worker)
                _WORKERS.discard(worker["process"])
                follow = _collect(worker, hung, results, crashed_once, stopped=late and not hung)
                if follow is not None:
                    waiting.insert(0, follow)
                if progress:
                    progress(results, worker.get("died_in"))
    return results


_WORKERS: set = set()  # the worker processes running now, for a parent stopped by a signal to end


def _launch(task: dict, units: list, workdir: str) -> dict:
    fd, path = tempfile.mkstemp(suffix=".jsonl", dir=workdir)
    os.close(fd)
    log = open(path + ".log", "w+")
    job = {"units": [units[i] for i in task["chunk"]], "resume": task["resume"], "out": path}
    process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", json.dumps(job)],
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                               cwd=os.path.dirname(os.path.abspath(__file__)))
    _WORKERS.add(process)
    return {**task, "process": process, "path": path, "log": log, "size": 0, "seen": time.monotonic()}


IMPORT_RETRIES, IMPORT_PAUSE = 4, 30


def _collect(worker: dict, hung: bool, results: dict, crashed_once: dict, stopped: bool = False):
    """Read a finished worker's records. On a crash or hang, the task to start next
    (the same unit once more, or the one after it, see run_units); None when the chunk
    is done or the worker was `stopped` at the deadline (the unit it was in left out)."""
    with open(worker["path"]) as f:
        events = [json.loads(line) for line in f if line.endswith("\n")]
    worker["log"].seek(0)
    tail = worker["log"].read()[-1500:]
    worker["log"].close()
    chunk = worker["chunk"]
    for event in events:
        if event["ev"] == "done":
            record = {k: v for k, v in event.items() if k not in ("ev", "u")}
            if chunk[event["u"]] in crashed_once:
                record["crashed_once"] = crashed_once[chunk[event["u"]]]
            results[chunk[event["u"]]] = record
    rc = worker["process"].returncode
    if (events and events[-1]["ev"] == "end" and rc == 0) or stopped:
        return None
    task = {"chunk": chunk, "resume": worker["resume"], "starts": worker["starts"] + 1}
    started = [e["u"] for e in events if e["ev"] == "start"]
    if not started:  # died before its first unit: importing torch or pto failed
        if worker["starts"] < IMPORT_RETRIES:
            return {**task, "not_before": time.monotonic() + IMPORT_PAUSE}
        for position in range(worker["resume"], len(chunk)):
            results[chunk[position]] = {"status": "crash", "cases": 0, "failed": 1,
                                        "messages": [f"the worker died before its first check (exit {rc}): {tail}"]}
        return None
    position = started[-1]
    how = "no progress for a while" if hung else \
        (f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}")
    worker["died_in"] = chunk[position]
    if chunk[position] not in crashed_once:
        crashed_once[chunk[position]] = how
        return {**task, "resume": position, "starts": 0}
    results[chunk[position]] = {"status": "hang" if hung else "crash", "cases": 0, "failed": 1,
                                "messages": [f"the worker died in this check, twice ({how}); "
                                             f"its output's tail: {tail}"]}
    return {**task, "resume": position + 1, "starts": 0} if position + 1 < len(chunk) else None


# ---------------------------------------------------------------- pytest

UNITS = plan(full_mode())
_RESULTS: dict = {}


def _result(index: int) -> dict:
    """The record of UNITS[index]; runs its chunk of units (those that share its worker)
    the first time one of them is asked for."""
    if index not in _RESULTS:
        chunk = next(c for c in _chunks(UNITS, _pairs_per_chunk()) if index in c)
        jobs = int(os.environ.get("PTO_CONFORMANCE_JOBS", "1"))
        found = run_units([UNITS[i] for i in chunk], jobs=jobs, chunk_pairs=_pairs_per_chunk())
        for local, position in enumerate(chunk):
            _RESULTS[position] = found.get(local, {"status": "crash", "cases": 0, "failed": 1,
                                                   "messages": ["no record: the worker never reached this check"]})
    return _RESULTS[index]


def _pairs_per_chunk() -> int:
    return FULL_PAIRS_PER_CHUNK if full_mode() else CI_PAIRS_PER_CHUNK


def _params():
    params = []
    for index, unit in enumerate(UNITS):
        cause = known_cause(unit[0], unit[1], unit[2])
        marks = [pytest.mark.xfail(strict=True, reason=cause)] if cause else []
        params.append(pytest.param(index, id=unit_id(unit), marks=marks))
    return params


@pytest.mark.parametrize("index", _params())
def test_conforms_to_cpu(index):
    record = _result(index)
    if record["status"] == "skip":
        pytest.skip(record["reason"])
    assert record["status"] == "pass", "\n".join(record.get("messages", []))


def test_every_known_divergence_names_a_real_case():
    """Each case of KNOWN_DIVERGENCES names an op of op_db and a check; in the full mode,
    a case this run checks."""
    ops = sweep.all_ops()
    checked = {(u[0], u[2], u[1]) for u in UNITS}
    for (op, check, dtype), cause in known_cases().items():
        assert op in ops, f"{op} ({cause}) is not in op_db"
        assert check in CHECKS, f"{check} ({cause}) is not a check"
        if full_mode():
            assert any(c[:2] == (op, check) and (dtype is None or c[2] == dtype) for c in checked), (op, check, dtype)


def test_the_ci_plan_is_bounded_and_deterministic():
    units = plan(full=False)
    assert units == plan(full=False)
    assert {u[0] for u in units} == {name for name in CI_OPS if name in sweep.all_ops()} == set(CI_OPS)
    assert all(u[1] in (None, "float32", "int64") for u in units)


def test_a_crash_fails_its_own_check_and_the_run_goes_on(monkeypatch):
    monkeypatch.setenv("PTO_CONFORMANCE_FAULT", "neg:float32:out")
    units = [["neg", "float32", "reference", 2], ["neg", "float32", "out", 1], ["neg", "float32", "out_dtype", 1]]
    results = run_units(units)
    assert results[0]["status"] == "pass" and results[2]["status"] == "pass"
    assert results[1]["status"] == "crash" and "SIGSEGV" in results[1]["messages"][0]


# ---------------------------------------------------------------- the script

def tabulate(units: list, results: dict, seconds: float) -> str:
    """The counts and the failures, as text."""
    done = {i: r for i, r in results.items()}
    rows = {}
    for i, r in done.items():
        check = units[i][2]
        row = rows.setdefault(check, {"units": 0, "pass": 0, "fail": 0, "xfail": 0, "skip": 0, "crash": 0,
                                      "cases": 0, "failed": 0, "random": 0, "closer": 0, "bounded": 0,
                                      "ties": 0, "layout": 0, "raised_alike": 0})
        row["units"] += 1
        status = r["status"]
        if status in ("fail", "crash", "hang") and known_cause(*[units[i][k] for k in (0, 1, 2)]):
            row["xfail"] += 1
        elif status in ("crash", "hang"):
            row["crash"] += 1
        else:
            row[status] += 1
        row["cases"] += r.get("cases", 0)
        row["failed"] += r.get("failed", 0)
        for k in ("random", "closer", "bounded", "ties", "layout", "raised_alike"):
            row[k] += r.get("count", {}).get(k, 0)
    ops = {units[i][0] for i in done}
    pairs = {(units[i][0], units[i][1]) for i in done if units[i][1]}
    lines = [f"ops {len(ops)}, (op, dtype) pairs {len(pairs)}, checks run {len(done)} of {len(units)}, "
             f"{seconds:.0f} s", "",
             f"{'check':<14}{'units':>7}{'pass':>7}{'fail':>7}{'known':>7}{'crash':>7}{'skip':>7}"
             f"{'cases':>9}{'failed':>8}{'raised':>8}{'random':>8}{'closer':>8}{'bound':>7}{'ties':>6}{'layout':>8}"]
    total = {}
    for check in CHECKS:
        if check not in rows:
            continue
        row = rows[check]
        for k, v in row.items():
            total[k] = total.get(k, 0) + v
        lines.append(f"{check:<14}{row['units']:>7}{row['pass']:>7}{row['fail']:>7}{row['xfail']:>7}"
                     f"{row['crash']:>7}{row['skip']:>7}{row['cases']:>9}{row['failed']:>8}"
                     f"{row['raised_alike']:>8}{row['random']:>8}{row['closer']:>8}{row['bounded']:>7}{row['ties']:>6}"
                     f"{row['layout']:>8}")
    if total:
        lines.append(f"{'all':<14}{total['units']:>7}{total['pass']:>7}{total['fail']:>7}{total['xfail']:>7}"
                     f"{total['crash']:>7}{total['skip']:>7}{total['cases']:>9}{total['failed']:>8}"
                     f"{total['raised_alike']:>8}{total['random']:>8}{total['closer']:>8}{total['bounded']:>7}"
                     f"{total['ties']:>6}{total['layout']:>8}")
    lines += ["", "cases: reference/non-contiguous samples, variant calls, out= calls, error inputs; "
              "raised: the CPU and pto raise the same exception type; random: draw random numbers, values "
              "not compared; closer: pto no farther than the CPU from float64; bound: a sum of products within "
              "error_bounds' proven bound of the CPU's; ties: other equal elements "
              "picked; layout: a non-contiguous sample's result equal to the CPU's for the same values "
              "contiguous; known: failing as KNOWN_DIVERGENCES says", ""]
    for known in (False, True):
        lines.append("Known divergences (xfail):" if known else "Failures not in KNOWN_DIVERGENCES:")
        for i in sorted(done):
            r = done[i]
            if r["status"] in ("fail", "crash", "hang") and bool(known_cause(*units[i][:3])) == known:
                lines.append(f"  {unit_id(units[i])} ({r['failed']}/{r['cases']}): "
                             + " | ".join(r.get("messages", []))[:700])
        lines.append("")
    for key, title in (("closer", "Values outside the tolerance, pto no farther than the CPU from float64 (accepted)"),
                       ("bounded", "Sums of products outside the tolerance, within error_bounds' bound (accepted)"),
                       ("ties", "Indices picking other, equal elements (accepted)"),
                       ("layout", "Non-contiguous samples whose result is the CPU's for the same values contiguous "
                        "(accepted)")):
        accepted = [f"{unit_id(units[i])} ({done[i]['count'][key]})" for i in sorted(done)
                    if done[i].get("count", {}).get(key)]
        if accepted:
            lines += [f"{title}: " + ", ".join(accepted), ""]
    once = [f"{unit_id(units[i])} ({done[i]['crashed_once']})" for i in sorted(done) if done[i].get("crashed_once")]
    if once:
        lines += ["Crashed once, then ran through in a new worker (an extension rebuilt under the run, or a "
                  "crash that does not repeat): " + ", ".join(once), ""]
    opinfo_skipped = [f"{unit_id(units[i])}: {done[i]['reason']}" for i in sorted(done)
                      if done[i]["status"] == "skip" and "PyTorch's own OpInfo" in done[i].get("reason", "")]
    if opinfo_skipped:
        lines += ["Failing where PyTorch's own OpInfo skips the test the check mirrors (skipped):"]
        lines += [f"  {line}" for line in opinfo_skipped] + [""]
    unfailing = [unit_id(units[i]) for i in sorted(done)
                 if done[i]["status"] == "pass" and known_cause(*units[i][:3])]
    if unfailing:
        lines.append("In KNOWN_DIVERGENCES but passing (remove): " + ", ".join(unfailing))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="every op and dtype, every input")
    parser.add_argument("--ops", help="comma-separated op ids")
    parser.add_argument("--dtypes", help="comma-separated dtype names")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--chunk", type=int, help="(op, dtype) pairs per worker interpreter")
    parser.add_argument("--minutes", type=float, help="start no worker after this many minutes")
    parser.add_argument("--json", help="write the plan and every check's record to this file (as the run goes)")
    parser.add_argument("--resume", metavar="JSON", help="go on from a run saved with --json (the same plan): "
                        "its records are kept, its time counts towards --minutes")
    parser.add_argument("--table", metavar="JSON", help="print the table of a run saved with --json, and exit")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        job = json.loads(args.worker)
        fault = os.environ.get("PTO_CONFORMANCE_FAULT", "").split(":")
        if fault != [""]:
            _install_fault(fault)
        with open(job["out"], "a") as out:
            work(job["units"], job["resume"], out)
        return 0
    if args.table:
        with open(args.table) as f:
            saved = json.load(f)
        results = {int(i): r for i, r in saved["results"].items()}
        print(tabulate(saved["units"], results, saved["seconds"]))
        return 0
    dtypes = {getattr(torch, d) for d in args.dtypes.split(",")} if args.dtypes else None
    units = plan(args.full, args.ops.split(",") if args.ops else None, dtypes)
    earlier, spent = {}, 0.0
    if args.resume and os.path.exists(args.resume):
        with open(args.resume) as f:
            saved = json.load(f)
        if saved["units"] != units:
            parser.error(f"{args.resume} saved another plan")
        earlier, spent = {int(i): r for i, r in saved["results"].items()}, saved["seconds"]
    start = time.monotonic() - spent
    deadline = start + 60 * args.minutes if args.minutes else None
    chunk = args.chunk or (FULL_PAIRS_PER_CHUNK if args.full else CI_PAIRS_PER_CHUNK)

    def save(results):
        if args.json:
            every = {**earlier, **{todo[i]: r for i, r in results.items()}}
            with open(args.json + ".part", "w") as f:
                json.dump({"units": units, "seconds": round(time.monotonic() - start, 1),
                           "results": {str(i): every[i] for i in sorted(every)}}, f)
            os.replace(args.json + ".part", args.json)

    def progress(results, died_in):
        died = f", a worker died in {unit_id(units[todo[died_in]])}" if died_in is not None else ""
        print(f"[{time.monotonic() - start:6.0f} s] {len(earlier) + len(results)}/{len(units)} checks{died}",
              file=sys.stderr,
              flush=True)
        save(results)  # as it goes: a run stopped from outside keeps what it checked

    def stopped(number, frame):
        print(f"stopped by signal {signal.Signals(number).name} after {time.monotonic() - start:.0f} s; "
              f"--table {args.json} prints what was checked" if args.json else "", file=sys.stderr, flush=True)
        for process in list(_WORKERS):
            os.killpg(process.pid, signal.SIGKILL)
        raise SystemExit(128 + number)

    signal.signal(signal.SIGTERM, stopped)
    signal.signal(signal.SIGHUP, stopped)
    todo = [i for i in range(len(units)) if i not in earlier]
    found = run_units([units[i] for i in todo], args.jobs, chunk, deadline, progress)
    save(found)
    results = {**earlier, **{todo[i]: r for i, r in found.items()}}
    print(tabulate(units, results, time.monotonic() - start))
    unexpected = [i for i, r in results.items()
                  if r["status"] in ("fail", "crash", "hang") and not known_cause(*units[i][:3])]
    return 1 if unexpected else 0


def _install_fault(fault: list) -> None:
    """PTO_CONFORMANCE_FAULT=op:dtype:check crashes the worker in that check (the test of
    the crash isolation)."""
    global check_out, check_forward, check_variants
    op, dtype, check = fault
    originals = {"out": check_out, "reference": check_forward, "variants": check_variants}

    def crashing(original):
        def run(ctx, *rest, **kwargs):
            if (ctx.op.name, sweep.dtype_name(ctx.dtype), ctx.check) == (op, dtype, check):
                os.kill(os.getpid(), signal.SIGSEGV)
            return original(ctx, *rest, **kwargs)
        return run

    check_out = crashing(originals["out"])
    check_forward = crashing(originals["reference"])
    check_variants = crashing(originals["variants"])


if __name__ == "__main__":
    sys.exit(main())
