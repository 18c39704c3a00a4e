"""What surrounds a GEMM in a compiled program: a written-out tanh GELU becomes one
tgelut in the GEMM's epilogue, copies of a GEMM's result (clone, eval-mode dropout)
are read through instead of made, and attention writes its product straight into
the result's layout. Each against eager CPU, with the cases that must stay as they are.

What follows a GEMM is compared within the GEMM's bound (error_bounds.multilinear_bound,
2 gamma_K sum|w||x|) carried through it: error_bounds.through_elementwise (the tanh
GELU's Lipschitz constant 1.13, its own few ulps), through_layer_norm, through_linear,
attention_bound. First order where the docstrings say so."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import pypto_torch
from error_bounds import (Bound, assert_within_bound, attention_bound, gamma, matmul_bound, multilinear_bound,
                          normalization_bounds, through_elementwise, through_layer_norm, through_linear)
from pypto_torch.compile.backend import make_backend

GELU_LIPSCHITZ = 1.13  # max |d/dx| of the tanh GELU, 1.12899...
U = torch.finfo(torch.float32).eps / 2


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def written_out_tanh_gelu(x, inner_constant=0.044715):
    """GPT-2's "gelu_new" as Hugging Face's NewGELUActivation writes it."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + inner_constant * torch.pow(x, 3.0))))


def linear_gelu(x, weight, bias):
    return written_out_tanh_gelu(F.linear(x, weight, bias))


def stages_of(program: str) -> list:
    """The instructions of each stage of a PTO-AS listing, as lists of mnemonics."""
    stages = []
    for line in program.splitlines():
        line = line.strip()
        if line.startswith("# stage"):
            stages.append([])
        elif stages and line and not line.startswith(("#", "buffer")):
            stages[-1].append(line.split()[0])
    return stages


def on_pto(*tensors):
    return [t.to("pto") for t in tensors]


@pytest.mark.parametrize("rows, inner, outer", [(64, 32, 48), (37, 53, 29)])
def test_a_written_out_tanh_gelu_is_one_instruction_in_the_gemms_epilogue(rows, inner, outer):
    torch.manual_seed(0)
    x, weight, bias = torch.randn(rows, inner), torch.randn(outer, inner), torch.randn(outer)
    report = pypto_torch.explain(linear_gelu, *on_pto(x, weight, bias))
    stages = stages_of(report.program)
    assert not {"ttanh", "tmul"} & {mnemonic for stage in stages for mnemonic in stage}, report.program
    assert any(stage[-2:] == ["tmatmul", "tgelut"] for stage in stages), report.program
    actual = torch.compile(linear_gelu, backend="pypto")(*on_pto(x, weight, bias))
    z = F.linear(x, weight, bias)
    bound = through_elementwise(multilinear_bound(F.linear, (x, weight, bias)), z, linear_gelu(x, weight, bias),
                                GELU_LIPSCHITZ, 3, "tanh GELU")
    assert_within_bound(actual.cpu(), linear_gelu(x, weight, bias), bound, "linear + GELU")


def test_a_tanh_gelu_with_another_constant_or_a_value_read_elsewhere_stays_written_out():
    torch.manual_seed(0)
    x = torch.randn(33, 17)

    def other_constant(t):
        return written_out_tanh_gelu(t, inner_constant=0.05)

    def tanh_also_returned(t):
        inner = math.sqrt(2.0 / math.pi) * (t + 0.044715 * torch.pow(t, 3.0))
        tanh = torch.tanh(inner)
        return 0.5 * t * (1.0 + tanh), tanh

    for fn in (other_constant, tanh_also_returned):
        report = pypto_torch.explain(fn, x.to("pto"))
        assert "tgelut" not in report.program and "ttanh" in report.program, fn.__name__
        actual = torch.compile(fn, backend="pypto")(x.to("pto"))
        expected = fn(x)
        for got, want in zip(actual if isinstance(actual, tuple) else (actual,),
                             expected if isinstance(expected, tuple) else (expected,)):
            assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


def test_a_written_out_tanh_gelu_trains_as_eager():
    """The training forward saves the chain's values for the backward: it is kept, and
    the gradients are eager CPU's."""
    torch.manual_seed(0)
    x, weight, bias = torch.randn(24, 16), torch.randn(20, 16), torch.randn(20)
    grads = []
    for device, fn in (("cpu", linear_gelu), ("pto", torch.compile(linear_gelu, backend="pypto"))):
        leaves = [t.detach().to(device).requires_grad_() for t in (x, weight, bias)]
        fn(*leaves).sum().backward()
        grads.append([leaf.grad.cpu() for leaf in leaves])
    # The upstream gradient G = GELU'(z), z = x W^T + b: z within its multilinear_bound,
    # GELU'' at most 0.8 in size, and G's own chain (the written-out GELU's backward, a
    # dozen roundings of terms at most 1 + |z|) within 12 u (1 + |z|) per side. The
    # gradients are G @ W (20 terms), G^T @ x and G's column sums (24 terms): G's
    # difference carried through them, plus their own matmul_bound. First order.
    xd, wd = x.double(), weight.double()
    z = F.linear(xd, wd, bias.double())
    z.requires_grad_()
    g, = torch.autograd.grad(written_out_tanh_gelu(z).sum(), z)
    d_g = 0.8 * multilinear_bound(F.linear, (x, weight, bias)).value + 2 * 12 * U * (1 + z.detach().abs())
    bounds = [(1 + gamma(20)) * (d_g @ wd.abs()) + matmul_bound(g.float(), weight).value,
              (1 + gamma(24)) * (d_g.t() @ xd.abs()) + matmul_bound(g.float().t(), x).value,
              (1 + gamma(24)) * d_g.sum(0) + matmul_bound(torch.ones(1, 24), g.float()).value[0]]
    for got, want, bound, name in zip(grads[1], grads[0], bounds, ("x", "weight", "bias")):
        assert_within_bound(got, want, Bound(bound, "G's bound carried + matmul_bound"), f"gradient of {name}")


class LinearDropoutResidual(torch.nn.Module):
    """A GEMM, eval-mode dropout (a clone in the graph) and a residual add."""

    def __init__(self, width):
        super().__init__()
        self.linear = torch.nn.Linear(width, width)
        self.dropout = torch.nn.Dropout(0.1)

    def forward(self, x):
        return x + self.dropout(self.linear(x))


def test_a_clone_of_a_gemms_result_is_read_through_and_the_residual_joins_its_epilogue():
    torch.manual_seed(0)
    model = LinearDropoutResidual(48).eval()
    x = torch.randn(4, 10, 48)
    moved = LinearDropoutResidual(48).eval()
    moved.load_state_dict(model.state_dict())
    moved = moved.to("pto")
    report = pypto_torch.explain(moved, x.to("pto"))
    assert ["tmov", "tmatmul", "tadd"] in stages_of(report.program), report.program
    with torch.no_grad():
        actual = torch.compile(moved, backend="pypto")(x.to("pto"))
        expected = model(x)
    # The GEMM's bound, plus the residual add's rounding on each side (u |y|).
    linear = multilinear_bound(F.linear, (x, model.linear.weight, model.linear.bias))
    bound = Bound(linear.value + 2 * U * expected.double().abs(), linear.name + " + 2u|y|")
    assert_within_bound(actual.cpu(), expected, bound, "linear + residual")


def test_a_copy_whose_source_is_written_after_it_is_still_made():
    def snapshot_then_update(x):
        before = x.clone()
        x.mul_(3)
        return before + x

    torch.manual_seed(0)
    x = torch.randn(19, 7)
    expected_x, expected = x * 3, x + x * 3
    on_device = x.to("pto")
    actual = torch.compile(snapshot_then_update, backend="pypto")(on_device)
    assert_close(actual.cpu(), expected)
    assert_close(on_device.cpu(), expected_x)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_writes_its_product_into_the_results_layout(causal):
    """Heads split off one projection, as a transformer block does: the attention's result
    is laid out (batch, sequence, heads, head_dim), so that the transpose back is a view."""
    heads, head_dim = 3, 8

    def attention(qkv):
        batch, seq, _ = qkv.shape
        q, k, v = qkv.view(batch, seq, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return out.transpose(1, 2).reshape(batch, seq, heads * head_dim) * 2

    torch.manual_seed(0)
    qkv = torch.randn(2, 13, 3 * heads * head_dim)
    graphs = []
    compiled = torch.compile(attention, backend=make_backend(on_graph=graphs.append))
    actual = compiled(qkv.to("pto"))
    batch, seq, _ = qkv.shape
    q, k, v = qkv.view(batch, seq, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
    bound = attention_bound(q, k, v, is_causal=causal)  # times 2, exact
    bound = Bound(2 * bound.value.transpose(1, 2).reshape(batch, seq, heads * head_dim), bound.name)
    assert_within_bound(actual.cpu(), attention(qkv), bound, "attention")
    (plan,) = graphs[0].plans.values()
    (step,) = plan.programs
    mnemonics = [mnemonic for stage in stages_of(step.program.text) for mnemonic in stage]
    last_product = len(mnemonics) - 1 - mnemonics[::-1].index("tmatmul")
    assert mnemonics[last_product + 1:] == ["tmul"], step.program.text


def norm_then_linear(x, weight, bias, norm_weight, norm_bias):
    return F.linear(F.layer_norm(x, x.shape[-1:], norm_weight, norm_bias), weight, bias)


def norm_then_linear_and_the_norm(x, weight, bias, norm_weight, norm_bias):
    normed = F.layer_norm(x, x.shape[-1:], norm_weight, norm_bias)
    return F.linear(normed, weight, bias), normed


@pytest.mark.parametrize("rows, inner, outer", [(64, 32, 48), (3 * 37, 53, 29)])
def test_a_layer_norm_read_by_a_gemm_alone_runs_in_its_tiles(rows, inner, outer):
    """The normalised rows are the GEMM's prologue, in tile scratch; returned as well,
    they are memory the caller sees, and the norm keeps its own stage."""
    torch.manual_seed(0)
    x, weight, bias = torch.randn(rows, inner), torch.randn(outer, inner), torch.randn(outer)
    norm_weight, norm_bias = torch.randn(inner), torch.randn(inner)
    args = (x, weight, bias, norm_weight, norm_bias)
    for fn, fused in ((norm_then_linear, True), (norm_then_linear_and_the_norm, False)):
        report = pypto_torch.explain(fn, *on_pto(*args))
        gemm_stage = next(stage for stage in stages_of(report.program) if "tmatmul" in stage)
        assert ("tlayernorm" in gemm_stage) == fused, report.program
        actual = torch.compile(fn, backend="pypto")(*on_pto(*args))
        expected = fn(*args)
        # The norm's bound, carried through the GEMM (through_linear) for its output.
        normed = F.layer_norm(x, x.shape[-1:], norm_weight, norm_bias)
        norm_bound = normalization_bounds(x, (-1,), norm_weight, norm_bias)[0]
        bounds = (through_linear(norm_bound.value, normed, weight, bias), norm_bound)
        for got, want, bound in zip(actual if isinstance(actual, tuple) else (actual,),
                                    expected if isinstance(expected, tuple) else (expected,), bounds):
            assert_within_bound(got.cpu(), want, bound, fn.__name__)


def residual_norm_head(x, w1, w_head):
    """GPT-2's end: the last residual stream, its layer norm, and a wider output GEMM."""
    hidden = x + x @ w1
    return F.layer_norm(hidden, hidden.shape[-1:]) @ w_head


@pytest.mark.parametrize("rows", [64, 37])
def test_what_the_last_gemms_prologue_reads_lives_in_the_gemms_output(rows):
    torch.manual_seed(0)
    args = (torch.randn(rows, 32), torch.randn(32, 32), torch.randn(32, 96))
    report = pypto_torch.explain(residual_norm_head, *on_pto(*args))
    # The norm's missing weight and bias are scalars: constants of the loaded program.
    assert report.workspace_bytes == 0, report.program
    actual = torch.compile(residual_norm_head, backend="pypto")(*on_pto(*args))
    # x @ w1 within matmul_bound, the residual add a rounding more (u |hidden|), through
    # the layer norm and the head's GEMM.
    x, w1, w_head = args
    hidden = x + x @ w1
    d_hidden = matmul_bound(x, w1).value + 2 * U * hidden.double().abs()
    normed = F.layer_norm(hidden, hidden.shape[-1:])
    d_normed = through_layer_norm(d_hidden, hidden).value
    bound = through_linear(d_normed, normed, w_head, fn=lambda a, w, b: a @ w)
    assert_within_bound(actual.cpu(), residual_norm_head(*args), bound, "residual, norm, head")
