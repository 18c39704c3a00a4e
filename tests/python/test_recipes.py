"""One op, one recipe (csrc/recipes): the instructions an op runs as eagerly are the
instructions the compiler lowers it to, and both match the CPU."""
from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import pypto_torch
from pypto_torch import Profiler

aten = torch.ops.aten


def _inputs():
    generator = torch.Generator().manual_seed(21)
    x = torch.randn(4, 6, 8, generator=generator)
    weight, bias = torch.randn(8, generator=generator), torch.randn(8, generator=generator)
    return x, weight, bias


# Ops whose recipe both the eager kernel and the lowering read, each called on (x, weight, bias).
CALLS = {
    "native_layer_norm": lambda x, w, b: aten.native_layer_norm(x, [8], w, b, 1e-5),
    "native_layer_norm over two dims": lambda x, w, b: aten.native_layer_norm(x, [6, 8], None, None, 1e-5),
    "_softmax": lambda x, w, b: aten._softmax(x, 1, False),
    "_log_softmax": lambda x, w, b: aten._log_softmax(x, -1, False),
    "mean.dim": lambda x, w, b: aten.mean.dim(x, [0, 2]),
    "var.correction": lambda x, w, b: aten.var.correction(x, [1], correction=1),
    "sum.dim_IntList": lambda x, w, b: aten.sum.dim_IntList(x, [1]),
    "prod.dim_int": lambda x, w, b: aten.prod.dim_int(x, 2, True),
    "amax": lambda x, w, b: aten.amax(x, [0, 2]),
    "argmax": lambda x, w, b: aten.argmax(x, 1),
    "max.dim": lambda x, w, b: aten.max.dim(x, 2),
    "any.dims": lambda x, w, b: aten.any.dims(aten.gt.Scalar(x, 1.0), [1]),
    "mm": lambda x, w, b: aten.mm(x[0], x[1].t()),
    "addmm": lambda x, w, b: aten.addmm(b, x[0].t(), x[1], beta=0.5, alpha=2.0),
    "bmm": lambda x, w, b: aten.bmm(x, x.transpose(1, 2)),
    "gather": lambda x, w, b: aten.gather(x, 2, aten.argmax(x, 2, True)),
}


def _eager_instructions(call, inputs) -> list:
    with Profiler() as profiler:
        call(*(t.to("pto") for t in inputs))
        torch.pto.synchronize()
    return sorted(a.name for a in profiler.activities if a.kind == "instruction" and a.name != "texpands")


def _compiled_instructions(call, inputs) -> list:
    report = pypto_torch.explain(call, *(t.to("pto") for t in inputs))
    assert report.fallback_nodes == []
    lines = [line.split()[0] for line in report.program.splitlines() if line and not line.startswith(("#", "buffer"))]
    return sorted(name for name in lines if name != "texpands")


@pytest.mark.parametrize("name", CALLS)
def test_eager_and_compiled_run_the_same_recipe(name):
    call, inputs = CALLS[name], _inputs()
    assert _eager_instructions(call, inputs) == _compiled_instructions(call, inputs)


@pytest.mark.parametrize("name", CALLS)
def test_the_recipe_matches_the_cpu_eager_and_compiled(name):
    call, inputs = CALLS[name], _inputs()
    expected = call(*inputs)
    eager = call(*(t.to("pto") for t in inputs))
    compiled = torch.compile(call, backend="pypto")(*(t.to("pto") for t in inputs))
    for result in (eager, compiled):
        assert_close(pytree_cpu(result), expected, rtol=1e-5, atol=1e-5)


def pytree_cpu(value):
    return tuple(v.cpu() for v in value) if isinstance(value, tuple) else value.cpu()


def test_a_recipe_that_does_not_apply_runs_the_op_another_way():
    """layer_norm over rows of no elements: a mean no sum gives (NaN), so the recipe
    declines and eager runs it on the CPU, as the compiler runs it eagerly."""
    x = torch.randn(3, 0)
    expected = aten.native_layer_norm(x, [0], None, None, 1e-5)
    actual = aten.native_layer_norm(x.to("pto"), [0], None, None, 1e-5)
    for a, e in zip(actual, expected):
        assert a.device.type == "pto"
        assert_close(a.cpu(), e, equal_nan=True)
