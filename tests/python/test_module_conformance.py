"""Every module of PyTorch's ModuleInfo database (torch.testing._internal.common_modules.
module_db) on pto against the same module on the CPU.

For each ModuleInfo and each of its inputs (module_inputs_func, made on the CPU from a
fixed seed), the module is built on the CPU from the constructor input with the seed
reset, and copied to pto as `copy.deepcopy(module).to("pto")` (plain tensor attributes
such as FractionalMaxPool's _random_samples go along, as if built on the device), so
both hold the same parameters and buffers. Then, in training mode and, where
`train_and_eval_differ`, in eval mode too:

- forward: every output (values, shape, dtype, on pto), and the buffers afterwards
  (BatchNorm's running statistics);
- backward: the gradients of every parameter and of every input that requires grad,
  from the same upstream gradient (seeded randn, made on the CPU);
- channels_last: for 4-D (5-D) inputs, four variants: channels_last (channels_last_3d)
  inputs, the module converted with `.to(memory_format=...)`, both, and both with the
  batch doubled (most of module_db's inputs have a batch of 1). Outputs and
  gradients compared by value, and each 4-D/5-D output's is_contiguous() and
  is_contiguous(memory_format=...) must be the CPU's.

Lazy modules (LazyConv*, LazyConvTranspose*) are copied to pto before their first call,
as a user does, and that call materialises their parameters on pto (pto's generator);
their shapes, dtypes and device must be the CPU's, the CPU's values are then copied in,
and a second call on each side is compared as above.

dtypes: float32, and bfloat16 (the CPU computes bfloat16 too, from the same bfloat16
inputs and parameters). Tolerance for either: both sides round every op's floating
result (unit roundoff u = eps/2), and an op summing K terms adds up to K·u relative to
the sum of magnitudes; along the chain of ops a module runs, first-order errors add. So
the bound on |pto - CPU| is eps·K with K = the sum over the aten ops of the CPU run
(forward for outputs, forward and backward for gradients) of each op's reduction
length: the contracted length of a matmul, C_in/groups·kernel volume of a convolution
(and batch·spatial for its weight gradient), the dim of a softmax, the kernel of an
average pool, input/output size of a reduction or normalisation statistic, 1 for an
elementwise op. Compared as assert_close(rtol=tol, atol=tol·max(1, max|CPU value|)):
normwise, since a sum that cancels is bounded by its terms' size, not its own. tol is
never below the sweeps' floor (1e-5 for float32: transcendental functions a few ulps
apart, as in sweep_all_ops.py; one bfloat16 ulp pair, 1.6e-2, ONE_ULP). Integer outputs
(indices) must be equal. It is a worst-case bound, so it stays tight for float32
(at most ~1e-4) and for bfloat16 on single-reduction modules (Linear 0.02-0.2, Conv2d
0.28, GELU 0.016), but grows past 1 for bfloat16 along long chains (Transformer*, RNN,
GRU, LSTM, LayerNorm and BatchNorm backward, losses over many elements): there the
bfloat16 comparison catches gross errors only (wrong elements, NaN, lost gradients,
layouts), and the float32 one is the precise check. Each record keeps its tolerance
(--json).

Randomness: a module whose CPU run draws random numbers (an aten op tagged
nondeterministic_seeded, other than a bernoulli with p 0 or 1: dropout with p > 0,
FractionalMaxPool without _random_samples, RReLU in training) is compared by shape,
dtype and device only: pto's Philox stream differs from the CPU's Mersenne Twister by
design, as CUDA's does (test_random.py checks pto's draws by their statistics).

Crash isolation: modules run in worker interpreters (this file with --worker, one
thread), TASKS_PER_WORKER (module, dtype) pairs per worker; a crash or hang fails that
module's test of the check it died in, naming the input, and a new worker goes on from
the next step (a death outside any step fails the whole (module, dtype) it was in).

CI mode (the default): float32 for every module, the first CI_INPUTS inputs per mode,
channels_last on the first CI_MEMORY_FORMAT_INPUTS eligible inputs; bfloat16 for the
modules of CI_LOW_PRECISION. PTO_CONFORMANCE_FULL=1: every input, both dtypes, every
module. As a script:

    python3 tests/python/test_module_conformance.py [--full] [--modules nn.Linear,nn.GRU] [--jobs 1] [--json out.json]

prints the counts (modules, inputs, checks, failures) and each failing (module, dtype,
check) with its first message, marking those in KNOWN.
"""

import argparse
import copy
import fnmatch
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest
import torch
import torch.utils._pytree as pytree
from torch.testing import assert_close
from torch.utils._python_dispatch import TorchDispatchMode

from opinfo_sweep import ONE_ULP, to_device

# ---------------------------------------------------------------- known divergences
# Each cause: why, and the (module glob, check, dtype glob[, "full"]) tests it fails
# ("full": only PTO_CONFORMANCE_FULL=1 runs the input that shows it). Every test named
# here is xfail(strict=True): an entry must go when its fix lands. Repros in the
# comments, pto against the CPU.
KNOWN = {}
# Fixed while these tests were written (kept here as what the tests now hold): lazy modules
# (Module.to("pto") kept no UninitializedParameter: _has_compatible_shallow_copy_type),
# LSTM/GRU/LSTMCell/GRUCell (_thnn_fused_lstm_cell/_thnn_fused_gru_cell), channels_last
# outputs of convolution, conv_transpose and max_pool2d, group_norm of a channels_last input;
# later channels_last outputs of avg_pool2d and the reflection/replication pads,
# threshold_backward at NaN (LPPool's gradient) and nll_loss_backward with every target
# ignored (CrossEntropyLoss).


def known_reason(module: str, dtype: str, check: str, full: bool = None):
    full = FULL if full is None else full
    for cause, (reason, entries) in KNOWN.items():
        for m, c, d, *only in entries:
            if only and only[0] == "full" and not full:
                continue
            if fnmatch.fnmatchcase(module, m) and fnmatch.fnmatchcase(check, c) and fnmatch.fnmatchcase(dtype, d):
                return f"[{cause}] {reason}"
    return None


# ---------------------------------------------------------------- the plan

SEED = 0
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
CHECKS = ("forward", "backward", "channels_last")
FULL = os.environ.get("PTO_CONFORMANCE_FULL") == "1"

CI_INPUTS = 6  # per module and mode
CI_MEMORY_FORMAT_INPUTS = 3
# bfloat16 in CI: one of each kind of reduction (matmul, convolution, batch and layer
# statistics, softmax) and a transcendental elementwise op.
CI_LOW_PRECISION = ("nn.Linear", "nn.Conv2d", "nn.BatchNorm2d", "nn.LayerNorm", "nn.Softmax", "nn.GELU")

FLOOR = {torch.float32: 1e-5, torch.bfloat16: ONE_ULP[torch.bfloat16]["rtol"]}

HANG_SECONDS = 180
STARTUP_SECONDS = 120
TASKS_PER_WORKER = 24
SKIP_TASK = 1 << 30  # a resume point past every step of its task


def module_infos() -> dict:
    from torch.testing._internal.common_modules import module_db
    return {mi.name: mi for mi in module_db}


def modes(mi) -> list:
    return [True, False] if mi.train_and_eval_differ else [True]


def make_inputs(mi, dtype, training) -> list:
    torch.manual_seed(SEED)
    return mi.module_inputs_func(mi, device="cpu", dtype=dtype, requires_grad=True, training=training)


def memory_format_of(args):
    """channels_last for a 4-D first tensor argument, channels_last_3d for a 5-D one."""
    first = next((a for a in pytree.tree_leaves(args) if isinstance(a, torch.Tensor)), None)
    if first is None:
        return None
    return {4: torch.channels_last, 5: torch.channels_last_3d}.get(first.dim())


def plan(full: bool = FULL, names=None) -> list:
    """Tasks [module, dtype, inputs per mode (None: all), channels_last inputs per mode]."""
    infos = module_infos()
    tasks = []
    for name in names or infos:
        for dname in DTYPES:
            if not full and dname != "float32" and name not in CI_LOW_PRECISION:
                continue
            tasks.append([name, dname, None if full else CI_INPUTS, None if full else CI_MEMORY_FORMAT_INPUTS])
    return tasks


def has_memory_format_inputs(mi) -> bool:
    return any(ci.forward_input is not None and memory_format_of(ci.forward_input.args or
                                                                   list(ci.forward_input.kwargs.values()))
               for training in modes(mi) for ci in make_inputs(mi, torch.float32, training))


# ---------------------------------------------------------------- tracing the CPU run

MATMULS = {"mm": 0, "bmm": 0, "matmul": 0, "dot": 0, "vdot": 0, "mv": 0,
           "addmm": 1, "addbmm": 1, "baddbmm": 1, "addmv": 1}
SOFTMAXES = {"_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data"}
STATISTICS = {"native_layer_norm", "native_layer_norm_backward", "native_batch_norm", "native_batch_norm_backward",
              "_native_batch_norm_legit", "_native_batch_norm_legit_no_training", "_native_batch_norm_legit_functional",
              "_batch_norm_with_update", "batch_norm_backward", "native_group_norm", "native_group_norm_backward",
              "_fused_rms_norm", "_fused_rms_norm_backward", "embedding_dense_backward"}


def _tensors(value) -> list:
    return [v for v in pytree.tree_leaves(value) if isinstance(v, torch.Tensor)]


def _conv_length(weight, transposed, groups) -> int:
    if transposed:  # weight (C_in, C_out / groups, *kernel)
        return max(1, weight.numel() // max(1, weight.shape[1]) // max(1, groups))
    return max(1, weight.numel() // max(1, weight.shape[0]))  # (C_out, C_in / groups, *kernel)


def reduction_length(func, args, kwargs, out) -> int:
    """How many terms one floating result of this aten op sums (1 for elementwise ops,
    0 when it writes no floating result)."""
    outs = _tensors(out)
    if not any(o.is_floating_point() or o.is_complex() for o in outs):
        return 0
    name = func.overloadpacket.__name__
    if name in MATMULS:
        operand = args[MATMULS[name]]
        return max(1, operand.shape[-1]) if operand.dim() else 1
    if name == "convolution":
        return _conv_length(args[1], args[6], args[8])
    if name == "convolution_backward":
        grad_output, weight = args[0], args[2]
        transposed, groups = args[6], args[8]
        per_channel = grad_output.numel() // max(1, grad_output.shape[1]) if grad_output.dim() > 1 else 1
        return max(_conv_length(weight, transposed, groups), per_channel)
    if name in SOFTMAXES:
        tensor, dim = args[0], args[1]
        return max(1, tensor.shape[dim]) if tensor.dim() else 1
    if name.startswith("_scaled_dot_product"):
        q, k = args[0], args[1]
        return q.shape[-1] + 2 * k.shape[-2]
    if name.startswith("avg_pool") and len(args) > 1:
        kernel = args[1] if isinstance(args[1], (list, tuple)) else [args[1]]
        return max(1, math.prod(kernel))
    if name.startswith("mkldnn_rnn_layer"):  # (input, w_ih, w_hh, ...): T steps, each over I + H terms
        x, w_ih, w_hh = args[0], args[1], args[2]  # the same places in its backward
        steps = x.numel() // max(1, w_ih.shape[1])  # T·N rows of I values (a bound on T)
        return steps * (w_ih.shape[1] + w_hh.shape[1])
    ins = [t.numel() for t in _tensors((args, kwargs))]
    floating = [o.numel() for o in outs if o.numel() > 0 and (o.is_floating_point() or o.is_complex())]
    if not ins or not floating:
        return 1
    if name in STATISTICS:  # a normalisation: its statistics (and weight gradients) reduce to its smallest output
        return max(1, -(-max(ins) // min(floating)))
    return max(1, -(-max(ins) // max(floating)))  # a reduction: input elements per output element


def _deterministic_draw(func, args, kwargs) -> bool:
    """Whether an op that may draw random numbers gives a result independent of them: a
    bernoulli with p 0 or 1, a dropout (native_dropout, attention's dropout_p) with p 0 or
    not training."""
    values = {a.name: (args[n] if n < len(args) else kwargs.get(a.name, a.default_value))
              for n, a in enumerate(func._schema.arguments)}
    if func.overloadpacket.__name__ in ("bernoulli", "bernoulli_"):
        p = values.get("p", 0.5)
        if isinstance(p, torch.Tensor):
            return bool(((p == 0) | (p == 1)).all())
        return p in (0, 1)
    if values.get("train") is False or values.get("training") is False:
        return True
    for name in ("dropout_p", "p"):
        if name in values:
            return values[name] in (0, 0.0, None)
    return False


class Trace(TorchDispatchMode):
    """Sums the reduction lengths of the aten ops run, and notes random draws."""

    def __init__(self):
        super().__init__()
        self.length = 0
        self.random = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if torch.Tag.nondeterministic_seeded in func.tags and not _deterministic_draw(func, args, kwargs):
            self.random = True
        if not func.is_view:
            try:
                self.length += reduction_length(func, args, kwargs, out)
            except Exception:  # an argument layout this estimate does not know: count it once
                self.length += 1
        return out


def tolerance(dtype, length: int) -> float:
    return max(FLOOR[dtype], torch.finfo(dtype).eps * length)


# ---------------------------------------------------------------- comparing

def flat(value) -> list:
    return [v for v in pytree.tree_leaves(value)]


def compare(got, want, tol, what: str, values=True) -> list:
    """Problems (strings) where `got` (pto's, still on pto) differs from `want` (CPU's)."""
    got, want = flat(got), flat(want)
    if len(got) != len(want):
        return [f"{what}: {len(got)} results, the CPU gives {len(want)}"]
    problems = []
    for n, (g, w) in enumerate(zip(got, want)):
        label = f"{what}[{n}]" if len(want) > 1 else what
        if isinstance(w, torch.Tensor):
            if not isinstance(g, torch.Tensor):
                if g is None and w is not None and not w.any():
                    continue  # an unused gradient: None where the CPU gives zeros
                problems.append(f"{label}: {type(g).__name__} where the CPU gives a tensor")
                continue
            if g.device.type != "pto":
                problems.append(f"{label}: on {g.device}, not on pto")
            if (g.shape, g.dtype) != (w.shape, w.dtype):
                problems.append(f"{label}: {g.dtype}{list(g.shape)} where the CPU gives {w.dtype}{list(w.shape)}")
                continue
            if not values:
                continue
            actual = g.detach().cpu()
            expected = w.detach()
            try:
                if expected.is_floating_point() or expected.is_complex():
                    finite = expected[torch.isfinite(expected)].abs()
                    scale = max(1.0, finite.max().item()) if finite.numel() else 1.0
                    assert_close(actual, expected, rtol=tol, atol=tol * scale, equal_nan=True)
                else:
                    assert_close(actual, expected, rtol=0, atol=0)
            except AssertionError as error:
                problems.append(f"{label}: " + " ".join(str(error).split())[:260] + f" (tolerance {tol:.3g})")
        elif isinstance(g, torch.Tensor):
            if w is None and not g.any():
                continue
            problems.append(f"{label}: a tensor where the CPU gives {w!r}")
        elif g != w and not (isinstance(w, float) and math.isnan(w) and math.isnan(g)):
            problems.append(f"{label}: {g!r} where the CPU gives {w!r}")
    return problems


def first_line(error: BaseException) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:300]


# ---------------------------------------------------------------- one module, in a worker

def build(mi, ci, dtype, training):
    torch.manual_seed(SEED)
    module = mi.module_cls(*ci.constructor_input.args, **ci.constructor_input.kwargs)
    module.to(dtype)
    module.train(training)
    return module


def on_pto(module):
    """The module copied to pto, with its plain tensor attributes (FractionalMaxPool's
    _random_samples) too, as a module built on the device would hold them."""
    moved = copy.deepcopy(module).to("pto")
    for sub in moved.modules():
        for key, value in list(vars(sub).items()):
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                setattr(sub, key, value.to("pto"))
    return moved


def is_lazy(module) -> bool:
    return any(torch.nn.parameter.is_lazy(p) for p in module.parameters())


def grad_leaves(value) -> list:
    return [t for t in _tensors(value) if t.requires_grad]


def differentiable(outputs) -> list:
    return [o for o in _tensors(outputs) if o.requires_grad and (o.is_floating_point() or o.is_complex())]


def seed_all():
    torch.manual_seed(SEED)
    torch.pto.manual_seed_all(SEED)


def run_pair(mi, ci, dtype, training, memory_format=None, variant=None) -> dict:
    """One input run on the CPU and on pto: {check: [problems]} for forward and backward,
    or a skip reason; 'random' when the CPU run draws random numbers."""
    fwd = ci.forward_input
    cpu_module = build(mi, ci, dtype, training)
    pto_module = on_pto(cpu_module)
    lazy = is_lazy(cpu_module)
    args, kwargs = fwd.args, fwd.kwargs
    if memory_format is not None and variant == "batch2":
        # module_db's 4-D/5-D inputs mostly have a batch of 1, where a layout slip can
        # hide (adaptive pooling): the first tensor's batch, and every same-sized one's, doubled
        rank, batch = (4 if memory_format == torch.channels_last else 5), _tensors(args)[0].shape[0]

        def doubled(t):
            if isinstance(t, torch.Tensor) and t.dim() == rank and t.shape[0] == batch:
                return t.detach().repeat(2, *[1] * (rank - 1)).requires_grad_(t.requires_grad)
            return t

        args, kwargs = pytree.tree_map(doubled, args), pytree.tree_map(doubled, kwargs)
    cpu_args, cpu_kwargs = to_device(args, "cpu"), to_device(kwargs, "cpu")
    pto_args, pto_kwargs = to_device(args, "pto"), to_device(kwargs, "pto")
    if memory_format is not None:
        rank = 4 if memory_format == torch.channels_last else 5

        def convert(value):
            return pytree.tree_map(lambda t: t.detach().contiguous(memory_format=memory_format)
                                   .requires_grad_(t.requires_grad)
                                   if isinstance(t, torch.Tensor) and t.dim() == rank else t, value)

        if variant in ("input", "both", "batch2"):
            cpu_args, cpu_kwargs = convert(cpu_args), convert(cpu_kwargs)
            pto_args, pto_kwargs = convert(pto_args), convert(pto_kwargs)
        if variant in ("module", "both", "batch2"):
            try:
                cpu_module.to(memory_format=memory_format)
            except Exception as error:
                return {"skip": f"the CPU module does not convert: {first_line(error)}"}
            pto_module.to(memory_format=memory_format)

    # A lazy module's first call materialises its parameters (drawing their initial
    # values): on each side, outside the trace; pto's must come out as the CPU's shapes
    # and dtypes, on pto, and then take the CPU's values. The compared call is the second.
    lazy_problems = []
    if lazy:
        seed_all()
        try:
            cpu_module(*cpu_args, **cpu_kwargs)
        except Exception as error:
            return {"skip": f"raises on the CPU: {first_line(error)}"}
        try:
            seed_all()
            pto_module(*pto_args, **pto_kwargs)
            torch.pto.synchronize()
        except Exception as error:
            return {"forward": [f"first (materialising) call raises on pto only: {first_line(error)}"],
                    "backward": ["no forward on pto"], "random": False}
        cpu_params, pto_params = dict(cpu_module.named_parameters()), dict(pto_module.named_parameters())
        for key, p in cpu_params.items():
            q = pto_params.get(key)
            if q is None or (q.shape, q.dtype, q.device.type) != (p.shape, p.dtype, "pto"):
                lazy_problems.append(f"lazy parameter {key}: " + (
                    "missing" if q is None else f"{q.dtype}{list(q.shape)} on {q.device}") +
                    f", the CPU's {p.dtype}{list(p.shape)}")
            else:
                with torch.no_grad():
                    q.copy_(p)

    # CPU forward, traced
    seed_all()
    trace = Trace()
    try:
        with trace:
            expected = cpu_module(*cpu_args, **cpu_kwargs)
    except Exception as error:
        return {"skip": f"raises on the CPU: {first_line(error)}"}
    forward_length = trace.length
    random = trace.random
    result = {"forward": lazy_problems, "backward": [], "random": random}

    # pto forward
    try:
        seed_all()
        actual = pto_module(*pto_args, **pto_kwargs)
        torch.pto.synchronize()
    except Exception as error:
        result["forward"].append(f"raises on pto only: {first_line(error)}")
        result["backward"].append("no forward on pto")
        return result

    tol = tolerance(dtype, forward_length)
    result["tol"] = {"forward": tol}
    result["forward"] += compare(actual, expected, tol, "output", values=not random)
    if memory_format is not None:
        for n, (g, w) in enumerate(zip(flat(actual), flat(expected))):
            if isinstance(w, torch.Tensor) and isinstance(g, torch.Tensor) and w.dim() in (4, 5):
                mf = torch.channels_last if w.dim() == 4 else torch.channels_last_3d
                want = (w.is_contiguous(), w.is_contiguous(memory_format=mf))
                got = (g.is_contiguous(), g.is_contiguous(memory_format=mf))
                if got != want:
                    result["forward"].append(
                        f"output[{n}] layout: is_contiguous()={got[0]}, "
                        f"is_contiguous({str(mf).removeprefix('torch.')})={got[1]}; the CPU's {want[0]}, {want[1]} "
                        f"(strides {g.stride()} vs CPU {w.stride()})")
    buffers_cpu = dict(cpu_module.named_buffers())
    buffers_pto = dict(pto_module.named_buffers())
    for key, b in buffers_cpu.items():
        if key not in buffers_pto:
            result["forward"].append(f"buffer {key} missing on pto")
        else:
            result["forward"] += compare(buffers_pto[key], b, tol, f"buffer {key}", values=not random)

    # backward, from the same upstream gradient
    cpu_outputs, pto_outputs = differentiable(expected), differentiable(actual)
    if not cpu_outputs:
        result["backward"] = None
        return result
    if len(pto_outputs) != len(cpu_outputs):
        result["backward"].append(f"{len(pto_outputs)} outputs require grad on pto, {len(cpu_outputs)} on the CPU")
        return result
    torch.manual_seed(SEED + 1)
    upstream = [torch.randn(o.shape, dtype=o.dtype) for o in cpu_outputs]
    cpu_inputs = list(cpu_module.parameters()) + grad_leaves((cpu_args, cpu_kwargs))
    pto_inputs = list(pto_module.parameters()) + grad_leaves((pto_args, pto_kwargs))
    names = [f"grad of {k}" for k, _ in cpu_module.named_parameters()] + \
            [f"grad of input {n}" for n in range(len(cpu_inputs) - len(list(cpu_module.parameters())))]
    try:
        with trace:
            want = torch.autograd.grad(cpu_outputs, cpu_inputs, upstream, allow_unused=True)
    except Exception:  # no gradient on the CPU either (a loss of integer targets only ...): nothing to compare
        result["backward"] = None
        return result
    try:
        got = torch.autograd.grad(pto_outputs, pto_inputs, [u.to("pto") for u in upstream], allow_unused=True)
        torch.pto.synchronize()
    except Exception as error:
        result["backward"].append(f"raises on pto only: {first_line(error)}")
        return result
    tol = tolerance(dtype, trace.length)
    result["tol"]["backward"] = tol
    for name, g, w in zip(names, got, want):
        if w is None:
            if g is not None and g.any():
                result["backward"].append(f"{name}: a tensor where the CPU gives None")
            continue
        result["backward"] += compare(g, w, tol, name, values=not random)
    return result


def steps(mi, dtype, limit, memory_format_limit):
    """(check group, mode, input index, variant, ci) in a fixed order."""
    for training in modes(mi):
        inputs = make_inputs(mi, dtype, training)
        for index, ci in enumerate(inputs[:limit]):
            yield "values", training, index, None, ci
        eligible = [(index, ci) for index, ci in enumerate(inputs) if ci.forward_input is not None and
                    memory_format_of(ci.forward_input.args or list(ci.forward_input.kwargs.values()))]
        for index, ci in eligible[:memory_format_limit]:
            for variant in ("input", "module", "both", "batch2"):
                yield "channels_last", training, index, variant, ci


def run_task(mi, dname, limit, memory_format_limit, emit, resume_step=-1):
    dtype = DTYPES[dname]
    if os.environ.get("PTO_CONFORMANCE_FAULT") == f"{mi.name}:{dname}:start":  # the harness's own test
        os.kill(os.getpid(), signal.SIGSEGV)
    for step, (group, training, index, variant, ci) in enumerate(steps(mi, dtype, limit, memory_format_limit)):
        if step <= resume_step:
            continue
        base = {"module": mi.name, "dtype": dname, "mode": "train" if training else "eval", "input": index,
                "desc": ci.desc, "variant": variant}
        check_of = {"forward": "forward", "backward": "backward"} if group == "values" else \
            {"forward": "channels_last", "backward": "channels_last"}
        emit(ev="step", step=step, check=check_of["forward"], **base)
        if os.environ.get("PTO_CONFORMANCE_FAULT") == f"{mi.name}:{dname}:{step}":  # the harness's own test
            os.kill(os.getpid(), signal.SIGSEGV)
        if ci.forward_input is None:
            continue
        memory_format = None
        if group == "channels_last":
            memory_format = memory_format_of(ci.forward_input.args or list(ci.forward_input.kwargs.values()))
        try:
            result = run_pair(mi, ci, dtype, training, memory_format, variant)
        except Exception as error:  # the harness itself, on either side
            result = {"forward": [f"raised: {first_line(error)}"], "backward": None, "random": False}
        if "skip" in result:
            for check in sorted(set(check_of.values())):
                emit(ev="rec", check=check, status="skip", msg=result["skip"], **base)
            continue
        for part in ("forward", "backward"):
            problems = result[part]
            if problems is None:
                continue
            status = "fail" if problems else ("random" if result["random"] else "pass")
            emit(ev="rec", check=check_of[part], part=part, status=status, msg="; ".join(problems)[:1500],
                 tol=result.get("tol", {}).get(part), **base)


def work(tasks: list, resume, out) -> None:
    import pypto_torch

    pypto_torch.set_fallback_mode("silent")
    torch.set_num_threads(1)  # one core, as CI budgets; and the CPU's reductions split the same way every run
    infos = module_infos()

    def emit(**event):
        out.write(json.dumps(event) + "\n")
        out.flush()

    skipping = resume is not None
    for name, dname, limit, memory_format_limit in tasks:
        resume_step = -1
        if skipping:
            if [name, dname] != resume[:2]:
                continue
            skipping, resume_step = False, resume[2]
            if resume_step >= SKIP_TASK:
                continue
        emit(ev="task", module=name, dtype=dname)
        start = time.monotonic()
        run_task(infos[name], dname, limit, memory_format_limit, emit, resume_step)
        emit(ev="task_end", module=name, dtype=dname, seconds=round(time.monotonic() - start, 2))
    emit(ev="end")


# ---------------------------------------------------------------- the parent

def run_tasks(tasks: list, jobs: int = 1, hang_seconds: float = HANG_SECONDS, progress=None) -> list:
    """Run `tasks` in worker interpreters (TASKS_PER_WORKER each, at most `jobs` at
    once); the records, with a failing record for each crash or hang."""
    chunks = [{"tasks": tasks[i:i + TASKS_PER_WORKER], "resume": None}
              for i in range(0, len(tasks), TASKS_PER_WORKER)]
    records, waiting, running = [], list(chunks), []
    with tempfile.TemporaryDirectory(prefix="pto_modules_") as workdir:
        while waiting or running:
            while waiting and len(running) < jobs:
                chunk = waiting.pop(0)
                fd, path = tempfile.mkstemp(suffix=".jsonl", dir=workdir)
                os.close(fd)
                log = open(path + ".log", "w+")
                job = json.dumps({"tasks": chunk["tasks"], "resume": chunk["resume"], "out": path})
                process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", job],
                                           stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                           env={**os.environ, "PTO_FALLBACK": "silent"})
                running.append({"chunk": chunk, "process": process, "path": path, "log": log,
                                "size": 0, "seen": time.monotonic()})
            time.sleep(0.1)
            for worker in list(running):
                size = os.path.getsize(worker["path"])
                if size != worker["size"]:
                    worker["size"], worker["seen"] = size, time.monotonic()
                limit = hang_seconds + (0 if worker["size"] else STARTUP_SECONDS)
                hung = worker["process"].poll() is None and time.monotonic() - worker["seen"] > limit
                if hung:
                    os.killpg(worker["process"].pid, signal.SIGKILL)
                    worker["process"].wait()
                if worker["process"].poll() is None:
                    continue
                running.remove(worker)
                with open(worker["path"]) as f:
                    events = [json.loads(line) for line in f if line.endswith("\n")]
                worker["log"].seek(0)
                tail = worker["log"].read()[-1500:]
                worker["log"].close()
                records += [e for e in events if e["ev"] in ("rec", "task_end")]
                rc = worker["process"].returncode
                if events and events[-1]["ev"] == "end" and rc == 0:
                    if progress:
                        progress(worker["chunk"])
                    continue
                last = next((e for e in reversed(events) if e["ev"] in ("step", "task", "task_end")), None)
                how = f"no progress for {hang_seconds:.0f} s" if hung else \
                    (f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}")
                what = f"{'hung' if hung else 'crashed'} ({how})"
                chunk = worker["chunk"]
                keys = [[t[0], t[1]] for t in chunk["tasks"]]
                if last is not None and last["ev"] == "step":  # in a step: it fails, the task goes on after it
                    where = {k: last.get(k) for k in ("module", "dtype", "mode", "input", "desc", "variant")}
                    records.append({"ev": "rec", **where, "check": last["check"], "status": "fail",
                                    "msg": f"{what} in this step; output: {tail[-600:]}"})
                    chunk["resume"] = [last["module"], last["dtype"], last["step"]]
                else:  # outside any step: the task it was in, or the next to start, fails whole
                    if last is not None and last["ev"] == "task":
                        blame = keys.index([last["module"], last["dtype"]])
                    elif last is not None:  # after a task_end
                        blame = keys.index([last["module"], last["dtype"]]) + 1
                    elif chunk["resume"] is None:
                        blame = 0
                    else:
                        blame = keys.index(chunk["resume"][:2]) + (chunk["resume"][2] >= SKIP_TASK)
                    if blame >= len(keys):
                        continue  # after its last task: nothing lost
                    for check in CHECKS:
                        records.append({"ev": "rec", "module": keys[blame][0], "dtype": keys[blame][1],
                                        "check": check, "status": "fail",
                                        "msg": f"worker {what} outside a step of this task; output: {tail[-600:]}"})
                    chunk["resume"] = [*keys[blame], SKIP_TASK]
                waiting.insert(0, chunk)
    return records


def describe(record: dict) -> str:
    where = f"{record.get('mode')} input {record.get('input')} ({record.get('desc') or '-'})"
    if record.get("variant"):
        where += f" {record['variant']}"
    part = f" {record['part']}" if record.get("check") == "channels_last" and record.get("part") else ""
    return f"{where}{part}: {record['msg']}"


def summarize(records: list) -> dict:
    """Per (module, dtype, check): counts per status and the failing records."""
    table = {}
    for r in records:
        if r["ev"] != "rec":
            continue
        entry = table.setdefault((r["module"], r["dtype"], r["check"]), {"status": {}, "failures": [], "skipped": []})
        entry["status"][r["status"]] = entry["status"].get(r["status"], 0) + 1
        if r["status"] == "fail":
            entry["failures"].append(r)
        elif r["status"] == "skip":
            entry["skipped"].append(r["msg"])
    return table


# ---------------------------------------------------------------- the tests

def _params():
    infos = module_infos()
    params = []
    for name, dname, *_ in plan():
        checks = ["forward", "backward"] + (["channels_last"] if has_memory_format_inputs(infos[name]) else [])
        for check in checks:
            reason = known_reason(name, dname, check)
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            params.append(pytest.param(name, dname, check, marks=marks, id=f"{name}-{dname}-{check}"))
    return params


class _Results:
    """Records of the tasks run so far; a missing task runs with those after it that
    the session selected (one worker per TASKS_PER_WORKER tasks)."""

    def __init__(self, selected):
        self.selected = selected  # [(module, dtype)] in the session's order
        self.table = None
        self.done = set()
        self.records = []

    def get(self, module, dtype):
        if (module, dtype) not in self.done:
            start = self.selected.index((module, dtype))
            wanted = [key for key in self.selected[start:] if key not in self.done][:TASKS_PER_WORKER]
            tasks = {(t[0], t[1]): t for t in plan()}
            self.records += run_tasks([tasks[key] for key in wanted], jobs=1)
            self.done.update(wanted)
            self.table = summarize(self.records)
        return self.table


@pytest.fixture(scope="session")
def module_results(request):
    selected = []
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if callspec and item.originalname == "test_module_matches_cpu":
            key = (callspec.params["module"], callspec.params["dtype"])
            if key not in selected:
                selected.append(key)
    return _Results(selected)


if __name__ != "__main__":
    @pytest.mark.parametrize("module,dtype,check", _params())
    def test_module_matches_cpu(module, dtype, check, module_results):
        entry = module_results.get(module, dtype).get((module, dtype, check), {"status": {}, "failures": []})
        failures = entry["failures"]
        assert not failures, f"{module} {dtype} {check}: {len(failures)} of {sum(entry['status'].values())} " \
                             f"differ from the CPU:\n" + "\n".join(describe(r) for r in failures[:8])
        compared = sum(entry["status"].get(s, 0) for s in ("pass", "random"))
        if not compared and entry["status"].get("skip"):
            pytest.skip(f"the CPU raises for every input at {dtype}: {entry['skipped'][0]}")
        assert compared, f"{module} {dtype} {check}: nothing compared ({entry['status']})"


def test_the_plan_covers_every_module_of_module_db():
    infos = module_infos()
    assert {t[0] for t in plan()} == set(infos)
    assert any(name.startswith("nn.Lazy") for name in infos)
    if not FULL:
        assert {t[1] for t in plan()} == set(DTYPES)


def test_known_divergences_name_modules_of_module_db():
    infos = module_infos()
    for cause, (reason, entries) in KNOWN.items():
        for m, c, d, *only in entries:
            assert only in ([], ["full"]), f"{cause}: {only}"
            assert fnmatch.filter(infos, m), f"{cause}: {m} matches no module"
            assert fnmatch.filter(CHECKS, c), f"{cause}: {c} matches no check"
            assert fnmatch.filter(DTYPES, d), f"{cause}: {d} matches no dtype"


def test_a_crash_fails_its_step_and_the_worker_goes_on(monkeypatch):
    monkeypatch.setenv("PTO_CONFORMANCE_FAULT", "nn.ReLU:float32:1")
    records = [r for r in run_tasks([["nn.ReLU", "float32", 3, 0], ["nn.Tanh", "float32", 1, 0]]) if r["ev"] == "rec"]
    crashed = [r for r in records if r["status"] == "fail"]
    assert [(r["module"], r["input"], r["check"]) for r in crashed] == [("nn.ReLU", 1, "forward")]
    assert "crashed (signal SIGSEGV)" in crashed[0]["msg"]
    passed = {(r["module"], r["input"], r["check"]) for r in records if r["status"] == "pass"}
    assert passed == {("nn.ReLU", 0, "forward"), ("nn.ReLU", 0, "backward"), ("nn.ReLU", 2, "forward"),
                      ("nn.ReLU", 2, "backward"), ("nn.Tanh", 0, "forward"), ("nn.Tanh", 0, "backward")}


def test_a_crash_outside_a_step_fails_its_task_and_the_worker_goes_on(monkeypatch):
    monkeypatch.setenv("PTO_CONFORMANCE_FAULT", "nn.Tanh:float32:start")
    records = [r for r in run_tasks([["nn.ReLU", "float32", 1, 0], ["nn.Tanh", "float32", 1, 0],
                                     ["nn.Sigmoid", "float32", 1, 0]]) if r["ev"] == "rec"]
    assert {(r["module"], r["check"]) for r in records if r["status"] == "fail"} == \
        {("nn.Tanh", check) for check in CHECKS}
    assert {(r["module"], r["check"]) for r in records if r["status"] == "pass"} == \
        {(m, c) for m in ("nn.ReLU", "nn.Sigmoid") for c in ("forward", "backward")}


@pytest.mark.parametrize("module_cls,kwargs,draws", [(torch.nn.Dropout, {"p": 0.5}, True),
                                                      (torch.nn.Dropout, {"p": 0.0}, False),
                                                      (torch.nn.RReLU, {}, True)], ids=["p0.5", "p0", "rrelu"])
def test_modules_drawing_random_numbers_are_compared_by_shape_only(module_cls, kwargs, draws):
    """module_db has no dropout or RReLU: the same path on modules built here. In eval
    mode neither draws, and the values are compared."""
    import types
    from torch.testing._internal.common_modules import FunctionInput, ModuleInput

    mi = types.SimpleNamespace(name=module_cls.__name__, module_cls=module_cls)
    ci = ModuleInput(constructor_input=FunctionInput(**kwargs),
                     forward_input=FunctionInput(torch.randn(4, 5, requires_grad=True)))
    for training, random in ((True, draws), (False, False)):
        result = run_pair(mi, ci, torch.float32, training)
        assert (result["random"], result["forward"], result["backward"]) == (random, [], [])


# ---------------------------------------------------------------- the script

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="every input, both dtypes (PTO_CONFORMANCE_FULL=1)")
    parser.add_argument("--modules", help="comma-separated ModuleInfo names (nn.Linear); default: all")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--json", help="write every record to this file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        job = json.loads(args.worker)
        with open(job["out"], "a") as out:
            work(job["tasks"], job["resume"], out)
        return 0
    names = args.modules.split(",") if args.modules else None
    unknown = [name for name in names or () if name not in module_infos()]
    if unknown:
        parser.error(f"not in module_db: {', '.join(unknown)}")
    full = args.full or FULL
    tasks = plan(full, names)
    start = time.monotonic()

    def progress(chunk):
        print(f"[{time.monotonic() - start:6.0f} s] done through {chunk['tasks'][-1][0]} {chunk['tasks'][-1][1]}",
              file=sys.stderr, flush=True)

    records = run_tasks(tasks, args.jobs, progress=progress)
    table = summarize(records)
    recs = [r for r in records if r["ev"] == "rec"]
    inputs = {(r["module"], r["dtype"], r.get("mode"), r.get("input")) for r in recs}
    count = {s: sum(1 for r in recs if r["status"] == s) for s in ("pass", "fail", "random", "skip")}
    failing = [key for key, entry in table.items() if entry["failures"]]
    print(f"modules {len({t[0] for t in tasks})}, (module, dtype) pairs {len(tasks)}, inputs {len(inputs)}, "
          f"checks {sum(count.values())}: passed {count['pass']}, failed {count['fail']}, "
          f"random (shape/dtype only) {count['random']}, skipped (raise on the CPU) {count['skip']}")
    print(f"failing (module, dtype, check): {len(failing)}, of which in KNOWN "
          f"{sum(1 for key in failing if known_reason(*key, full=full))}; wall time {time.monotonic() - start:.0f} s")
    for key in failing:
        entry = table[key]
        mark = "known" if known_reason(*key, full=full) else "NEW"
        print(f"  [{mark}] {' '.join(key)}: {len(entry['failures'])}/{sum(entry['status'].values())}; "
              f"{describe(entry['failures'][0])[:400]}")
    passing_known = [key for key in table if not table[key]["failures"] and known_reason(*key, full=full)]
    for key in passing_known:
        print(f"  [passes, remove from KNOWN] {' '.join(key)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=0)
    return 1 if any(not known_reason(*key, full=full) for key in failing) else 0


if __name__ == "__main__":
    sys.exit(main())
