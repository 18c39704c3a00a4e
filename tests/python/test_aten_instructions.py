"""One table drives both sides: every row of the aten -> PTO table
(csrc/recipes/aten_instructions.def) runs eagerly as its instruction, matching
the CPU, and the compiler lowers the same op to the same instruction. And the
torch <-> PTO dtype map is one map, read the same way eagerly and compiled."""

import pytest
import torch
from torch.testing import assert_close

import pypto_torch
from pypto_torch import _C
from pypto_torch.compile import program_builder
from pypto_torch.profiler import Profiler

aten = torch.ops.aten
ROWS = _C._aten_instructions()
ACCEPTED_DTYPES = {row["mnemonic"]: row["dtypes"] for row in _C._isa_table()}

# How each form's op is called (the overload both sides handle), as (call, tensor arguments).
FORM_CALLS = {
    "Unary": lambda op: (lambda x: op.default(x), 1),
    "UnaryNoOut": lambda op: (lambda x: op.default(x), 1),
    "Binary": lambda op: (lambda a, b: op.Tensor(a, b), 2),
    "BinaryTensorOut": lambda op: (lambda a, b: op.Tensor(a, b), 2),
    "BinaryOutTensor": lambda op: (lambda a, b: op.Tensor(a, b), 2),
    "BinaryAlpha": lambda op: (lambda a, b: op.Tensor(a, b, alpha=2), 2),
    "BinaryDefault": lambda op: (lambda a, b: op.default(a, b), 2),
    "BinaryDefaultInplace": lambda op: (lambda a, b: op.default(a, b), 2),
    "Compare": lambda op: (lambda a, b: op.Tensor(a, b), 2),
    "Gradient": lambda op: (lambda grad, x: op.default(grad, x), 2),
}
# The Custom rows, registered and lowered by hand: one call each, keyed by (op, variant value).
CUSTOM_CALLS = {
    ("gelu", ""): (lambda x: aten.gelu(x), 1),
    ("gelu", "tanh"): (lambda x: aten.gelu(x, approximate="tanh"), 1),
    ("div", "trunc"): (lambda a, b: aten.div.Tensor_mode(a, b, rounding_mode="trunc"), 2),
    ("div", "floor"): (lambda a, b: aten.div.Tensor_mode(a, b, rounding_mode="floor"), 2),
    ("pow", ""): (lambda a, b: aten.pow.Tensor_Tensor(a, b), 2),
    ("where", ""): (lambda a, b: aten.where.self(a > 1, a, b), 2),
    ("threshold_backward", ""): (lambda grad, x: aten.threshold_backward(grad, x, 1.0), 2),
    ("gelu_backward", ""): (lambda grad, x: aten.gelu_backward(grad, x), 2),
    ("gelu_backward", "tanh"): (lambda grad, x: aten.gelu_backward(grad, x, approximate="tanh"), 2),
    ("addcmul", ""): (lambda a, b, c: aten.addcmul(a, b, c, value=0.5), 3),
    ("addcdiv", ""): (lambda a, b, c: aten.addcdiv(a, b, c, value=0.5), 3),
    ("clamp", ""): (lambda x: aten.clamp(x, 0.75, 1.25), 1),
    ("lerp", ""): (lambda a, b: aten.lerp.Scalar(a, b, 0.3), 2),
    ("leaky_relu", ""): (lambda x: aten.leaky_relu(x - 1, 0.2), 1),
    ("nan_to_num", ""): (lambda x: aten.nan_to_num(x.log() / (x - x), 0.5), 1),
    ("elu", ""): (lambda x: aten.elu(x - 1, 1.5, 1.2, 0.5), 1),
    ("softplus", ""): (lambda x: aten.softplus(x - 1, 2.0, 1.0), 1),
    ("log_sigmoid_forward", ""): (lambda x: aten.log_sigmoid_forward(x - 1)[0], 1),
    ("hardshrink", ""): (lambda x: aten.hardshrink(x - 1, 0.25), 1),
    ("softshrink", ""): (lambda x: aten.softshrink(x - 1, 0.25), 1),
    ("threshold", ""): (lambda x: aten.threshold(x, 1.0, -0.5), 1),
    ("hardswish_backward", ""): (lambda grad, x: aten.hardswish_backward(grad, x * 4 - 4), 2),
    ("leaky_relu_backward", ""): (lambda grad, x: aten.leaky_relu_backward(grad, x - 1, 0.2, False), 2),
    ("hardshrink_backward", ""): (lambda grad, x: aten.hardshrink_backward(grad, x - 1, 0.25), 2),
    ("softshrink_backward", ""): (lambda grad, x: aten.softshrink_backward(grad, x - 1, 0.25), 2),
    # The forward's buffer: empty on pto, exp(-|x|) on the CPU, whose kernel reads it.
    ("log_sigmoid_backward", ""): (lambda grad, x: aten.log_sigmoid_backward(grad, x - 1,
                                                                             aten.log_sigmoid_forward(x - 1)[1]), 2),
    ("elu_backward", ""): (lambda grad, x: aten.elu_backward(grad, 1.5, 1.2, 0.5, False, x - 1), 2),
    ("softplus_backward", ""): (lambda grad, x: aten.softplus_backward(grad, x - 1, 2.0, 1.0), 2),
    ("mish_backward", ""): (lambda grad, x: aten.mish_backward(grad, x - 1), 2),
    ("hardtanh_backward", ""): (lambda grad, x: aten.hardtanh_backward(grad, x - 1, -0.5, 0.5), 2),
}


def row_id(row) -> str:
    return row["op"] + (f"-{row['argument']}={row['value']}" if row["argument"] else "")


def call_of(row):
    if row["form"] == "Custom":
        return CUSTOM_CALLS[(row["op"], row["value"])]
    return FORM_CALLS[row["form"]](getattr(aten, row["op"]))


def inputs_for(row, count: int) -> list:
    """CPU inputs the row's instruction takes: float32 where it can (from 0.5 to 1.5: inside
    the domain of every op but asin, acos and atanh, whose NaNs above 1 and acosh's below
    1 then fall where the CPU's do), else int32 (bitwise ops and shifts) from 1 to 4."""
    generator = torch.Generator().manual_seed(0)
    if "f32" in ACCEPTED_DTYPES[row["mnemonic"]]:
        return [torch.rand(4, 8, generator=generator) + 0.5 for _ in range(count)]
    return [torch.randint(1, 5, (4, 8), generator=generator, dtype=torch.int32) for _ in range(count)]


def mnemonics(program: str) -> set:
    return {line.split()[0] for line in program.splitlines() if line and not line.startswith(("#", "buffer"))}


def test_every_custom_row_has_a_call_here():
    custom = {(row["op"], row["value"]) for row in ROWS if row["form"] == "Custom"}
    assert custom == set(CUSTOM_CALLS)


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_a_row_runs_eagerly_as_its_instruction_and_matches_cpu(row):
    call, count = call_of(row)
    inputs = inputs_for(row, count)
    before = pypto_torch.fallback_ops()
    with Profiler() as profiler:
        actual = call(*(t.to("pto") for t in inputs))
        torch.pto.synchronize()
    assert pypto_torch.fallback_ops() == before
    assert row["mnemonic"] in {a.name for a in profiler.activities if a.kind == "instruction"}
    assert_close(actual.cpu(), call(*inputs), rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_a_row_lowers_to_its_instruction(row):
    call, count = call_of(row)
    inputs = [t.to("pto") for t in inputs_for(row, count)]
    report = pypto_torch.explain(call, *inputs)
    assert report.fallback_nodes == []
    assert row["mnemonic"] in mnemonics(report.program)


# The overload each form has for a tensor and a number (the tensor's op with a wrapped number).
SCALAR_OVERLOADS = {"Binary": "Scalar", "BinaryTensorOut": "Scalar", "Compare": "Scalar",
                    "BinaryOutTensor": "Scalar_Other"}


@pytest.mark.parametrize("row", [row for row in ROWS if row["form"] in SCALAR_OVERLOADS
                                 and SCALAR_OVERLOADS[row["form"]] in getattr(aten, row["op"]).overloads()],
                         ids=row_id)
def test_a_rows_scalar_overload_lowers_to_its_instruction(row):
    """op.Scalar is op.Tensor with a wrapped number: the same instruction."""
    x = inputs_for(row, 1)[0].to("pto")
    overload = getattr(getattr(aten, row["op"]), SCALAR_OVERLOADS[row["form"]])
    report = pypto_torch.explain(lambda t: overload(t, 2), x)
    assert report.fallback_nodes == []
    assert row["mnemonic"] in mnemonics(report.program)


def test_the_python_dtype_map_is_the_torch_glue_one():
    pairs = _C._dtype_map()
    assert program_builder.PTO_DTYPE_NAMES == dict(pairs)
    assert len({dtype for dtype, _ in pairs}) == len({name for _, name in pairs}) == len(pairs)
    every_pto_dtype = {name for row in _C._isa_table() for name in row["dtypes"]}
    assert {name for _, name in pairs} == every_pto_dtype


@pytest.mark.parametrize("dtype, name", _C._dtype_map(), ids=lambda value: str(value))
def test_a_dtype_runs_eagerly_and_compiled_as_its_pto_dtype(dtype, name):
    x = torch.arange(12).reshape(3, 4).to(dtype)
    before = pypto_torch.fallback_ops()
    assert torch.equal(x.to("pto").clone().cpu(), x)
    assert pypto_torch.fallback_ops() == before
    report = pypto_torch.explain(lambda t: t.clone(), x.to("pto"))
    assert f":{name}[" in report.program
    assert torch.equal(torch.compile(lambda t: t.clone(), backend="pypto")(x.to("pto")).cpu(), x)
