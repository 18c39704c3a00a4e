"""The pypto backend's machinery, through its public faces: registration (after a
bare `import torch`), explain(), eager fallback nodes, CPU tensors run in place,
outputs that are plain tensors, PTO_COMPILE_DEBUG, errors, and the memory a
compiled program saves. The models themselves: test_compile_models.py."""
import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import pypto_torch
from compile_models import handwritten_softmax
from error_bounds import Bound, assert_within_bound, conv_bound, gamma, matmul_bound, sum_bound


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_backend_works_after_a_bare_import_torch(python):
    for autoload in ("1", "0"):  # 0: only the torch_dynamo_backends entry point can find it
        result = python("""
            import torch
            f = torch.compile(lambda x: torch.exp(x) + 1, backend="pypto")
            x = torch.randn(8, 8)
            torch.testing.assert_close(f(x), torch.exp(x) + 1)
            print("pypto" in torch._dynamo.list_backends())
        """, TORCH_DEVICE_BACKEND_AUTOLOAD=autoload)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "True"


def test_dynamo_knows_the_pto_device():
    import pypto_torch.compile  # noqa: F401  (what looking the backend up imports)
    from torch._dynamo.device_interface import get_interface_for_device

    interface = get_interface_for_device("pto")
    assert interface.device_count() == torch.pto.device_count()
    assert interface.current_device() == torch.pto.current_device()
    interface.synchronize()


def softmax_over_root_of_sum(x):
    """Softmax's chain with the sum's square root: not a softmax, so it stays one fused stage of six instructions."""
    e = (x - x.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True).sqrt()


def test_explain_reports_the_bound_programs_nodes_stages_and_workspace():
    x = torch.randn(64, 128, device="pto")
    report = pypto_torch.explain(softmax_over_root_of_sum, x)
    assert isinstance(report.graph, torch.fx.GraphModule)
    assert report.fallback_nodes == []
    assert len(report.lowered_nodes) >= 6
    assert report.fused_stages == 1
    assert "# stage 0: 6 instructions fused" in report.program
    for mnemonic in ("tamax", "tsub", "texp", "tsum", "tsqrt", "tdiv"):
        assert mnemonic in report.program
    assert report.workspace_bytes == 0  # every temporary lives in a tile's scratch
    text = repr(report)
    assert "nodes run eagerly        : 0" in text and "of which fused: 1" in text


def test_a_graphs_scalars_are_constants_computed_once_when_its_program_loads():
    def scaled_plus_one(x):
        return x * 2 + 1

    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(0))
    report = pypto_torch.explain(scaled_plus_one, x.to("pto"))
    assert report.workspace_bytes == 0, report.program
    assert "2 at load)" in report.program and "# stage 0 (at load)" in report.program, report.program
    assert "# constant @" in report.program, report.program
    compiled = torch.compile(scaled_plus_one, backend="pypto")
    for scale in (1.0, -3.0, 0.5):  # the same loaded program, launch after launch
        assert_close(compiled((x * scale).to("pto")).cpu(), scaled_plus_one(x * scale), rtol=0, atol=0)


def test_a_node_without_lowering_runs_eagerly_between_programs_and_is_reported():
    def conv_block(x, weight):
        return torch.relu(F.conv2d(torch.exp(x), weight, padding=1)).sum(dim=1)

    x, weight = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    report = pypto_torch.explain(conv_block, x.to("pto"), weight.to("pto"))
    assert [name for name, _ in report.fallback_nodes] == ["convolution"]
    assert "no lowering for aten.convolution" in report.fallback_nodes[0][1]
    assert "texp" in report.program and "trelu" in report.program
    actual = torch.compile(conv_block, backend="pypto")(x.to("pto"), weight.to("pto"))
    # exp within 2 ulps a side (4u |e|), carried through the convolution's |weight| plus
    # its conv_bound; relu 1-Lipschitz; the sum over 4 channels carries those plus its
    # own sum_bound.
    u = 2.0 ** -24
    e = torch.exp(x)
    d_e = 2 * 4 * u * e.double().abs()
    conv = F.conv2d(e, weight, padding=1)
    d_conv = (1 + gamma(27)) * F.conv2d(d_e, weight.double().abs(), padding=1) \
        + conv_bound(e, weight, padding=1).value
    relu = torch.relu(conv)
    bound = (1 + gamma(4)) * d_conv.sum(1) + sum_bound(relu, 1).value
    assert_within_bound(actual.cpu(), conv_block(x, weight), Bound(bound, "exp, conv, relu, sum carried"))


def test_cpu_tensors_run_in_place_and_results_stay_on_the_cpu():
    def scale_in_place(x, y):
        x.mul_(2)
        return x + y

    x, y = torch.randn(16, 16), torch.randn(16, 16)
    expected_x, expected = x * 2, x * 2 + y
    address = x.data_ptr()
    out = torch.compile(scale_in_place, backend="pypto")(x, y)
    assert out.device.type == "cpu" and x.data_ptr() == address
    assert_close(x, expected_x)
    assert_close(out, expected)


def test_outputs_are_tensors_of_their_own_on_the_device():
    f = torch.compile(lambda x: (torch.exp(x), x.t() * 2), backend="pypto")
    x = torch.randn(32, 48, device="pto")
    first, second = f(x)
    assert first._base is None and first.is_contiguous() and first.device == x.device
    assert second.shape == (48, 32)
    assert_close(second.cpu(), x.cpu().t() * 2)


def test_compile_debug_prints_the_program_after_every_pass(python):
    result = python("""
        import torch
        f = torch.compile(lambda x: torch.softmax(x * 2, -1) + 1, backend="pypto")
        f(torch.randn(4, 8, device="pto"))
        torch.pto.synchronize()
    """, PTO_COMPILE_DEBUG="1")
    assert result.returncode == 0, result.stderr
    for stage in ("parsing", "dead code elimination", "common subexpression elimination",
                  "fusion and memory planning"):
        assert f"# ---- PTO program after {stage} ----" in result.stderr
    assert "tsoftmax" in result.stderr and "# stage 0" in result.stderr


def test_bad_input_is_a_clear_error_and_the_device_stays_usable():
    f = torch.compile(lambda a, b: a @ b, backend="pypto")
    a, b = torch.randn(3, 4, device="pto"), torch.randn(5, 6, device="pto")
    with pytest.raises(Exception, match=r"same reduction dim, but got \[3, 4\] X \[5, 6\]"):
        f(a, b)
    good = torch.randn(4, 6, device="pto")
    assert_within_bound(f(a, good).cpu(), a.cpu() @ good.cpu(), matmul_bound(a.cpu(), good.cpu()))


def test_compiled_softmax_needs_less_device_memory_than_eager():
    x = torch.randn(512, 1024, device="pto")
    compiled = torch.compile(handwritten_softmax, backend="pypto")
    compiled(x)
    torch.pto.synchronize()

    def peak(fn):
        torch.pto.synchronize()
        torch.pto.reset_peak_memory_stats()
        base = torch.pto.memory_allocated()
        out = fn(x)
        torch.pto.synchronize()
        return torch.pto.max_memory_allocated() - base, out

    eager_peak, expected = peak(handwritten_softmax)
    compiled_peak, actual = peak(compiled)
    assert compiled_peak < eager_peak
    assert compiled_peak == x.numel() * 4  # the output alone: temporaries stay in tile scratch
    assert_close(actual.cpu(), expected.cpu())


def test_a_lowering_that_gives_up_takes_its_scalar_fills_with_it():
    """A node whose lowering emitted a scalar fill and then found no PTO form is rolled
    back; the next lowering wanting that scalar must fill it again, not read a buffer
    nothing fills."""
    from pypto_torch.compile.lowering import Lowerer
    from pypto_torch.compile.program_builder import Segment

    segment = Segment()
    lowerer = Lowerer(segment, torch.device("pto", 0))
    mark = segment.mark()
    lowerer.scalar(2.0, torch.float32)
    segment.rollback(mark)
    assert segment.constants == [] and segment.constant_views == {}
    lowerer.scalar(2.0, torch.float32)
    assert len(segment.constants) == 1 and segment.constants[0][0] == "texpands"


def test_a_program_is_printed_by_the_cpp_printer():
    """The program builder hands a program's parts to _C._pto_as, PTO-AS's one printer
    (csrc/isa/pto_as.cpp), which names the part it cannot print."""
    from pypto_torch import _C

    def operand(buffer, shape, strides):
        return buffer, "f32", shape, strides, 0

    buffers = [("input", 64), ("output", 64)]
    fill = ("texpands", [operand(1, (), ())], {"value": 2.5})
    scale = ("tmul", [operand(1, (16,), (1,)), operand(0, (16,), (1,)), operand(1, (16,), (0,))], {})
    assert _C._pto_as(buffers, [fill, scale]) == ("buffer %0 input 64\nbuffer %1 output 64\n"
                                                  "texpands %1:f32[;]@0 value=2.5\n"
                                                  "tmul %1:f32[16;1]@0, %0:f32[16;1]@0, %1:f32[16;0]@0\n")
    for wrong_buffers, wrong_instruction, message in (
            ([("scratch", 64)], scale, "no buffer kind 'scratch'"),
            (buffers, ("tmull", *scale[1:]), "no PTO instruction 'tmull'"),
            (buffers, ("texpands", [(1, "f33", (), (), 0)], {"value": 2}), "no PTO dtype 'f33'"),
            (buffers, ("texpands", [operand(1, (1,) * 9, (1,) * 9)], {"value": 2}), "at most 8 dimensions"),
            (buffers, ("texpands", fill[1], {}), "texpands needs value="),
            (buffers, ("tmul", scale[1], {"alpha": 1}), "tmul was given an immediate it does not take")):
        with pytest.raises(ValueError, match=message):
            _C._pto_as(wrong_buffers, [wrong_instruction])


# Found by the Hugging Face models (test_compile_hf_models.py), each reduced to a few ops ---

def test_an_elementwise_result_has_aten_strides_for_the_views_after_it():
    """x * 2 of a transposed x is transposed too, and the graph's later view relies on it
    (Llama's rotary embedding, then its attention output): given other strides, the view
    was no view."""
    def f(x):
        return (x.transpose(1, 2) * 2).transpose(1, 2).reshape(2, 12, 32)

    x = torch.randn(2, 12, 4, 8)
    assert_close(torch.compile(f, backend="pypto")(x.to("pto")).cpu(), f(x))


def attention_gradients(device, mask, compiled):
    """The output and the gradients of q, k, v (and of the mask, where it learns) of one
    attention, on device."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 12, 8).to(device).requires_grad_() for _ in range(3))
    mask = mask.detach().to(device).requires_grad_(mask.requires_grad)
    attend = torch.compile(F.scaled_dot_product_attention, backend="pypto") if compiled \
        else F.scaled_dot_product_attention
    out = attend(q, k, v, attn_mask=mask)
    (out * torch.arange(out.numel(), device=device).view(out.shape).sin()).sum().backward()
    leaves = (q, k, v, mask) if mask.requires_grad else (q, k, v)
    return [out.detach().cpu()] + [leaf.grad.cpu() for leaf in leaves]


@pytest.mark.parametrize("mask", ["boolean sliding window", "learnt additive bias", "boolean, a query masked whole",
                                  "additive, a row of -inf"])
def test_attention_with_a_mask_has_eager_cpu_gradients(mask):
    """A boolean mask (Llama, Mistral) that hides a row's first column (Mistral's sliding
    window: the logsumexp the backward reads must not be -inf - -inf there), an additive
    mask that learns (T5's position bias, which the CPU flash op cannot differentiate), and
    masks that hide every key from a query: its output and gradients are 0 on the CPU
    (NaN from a plain softmax), and its saved logsumexp must not make the backward NaN."""
    position = torch.arange(12)
    distance = position[:, None] - position[None, :]
    if mask == "boolean sliding window":
        attn_mask = (distance >= 0) & (distance < 4)
    elif mask == "learnt additive bias":
        attn_mask = torch.randn(1, 4, 12, 12, requires_grad=True)
    elif mask == "boolean, a query masked whole":
        attn_mask = distance >= 0
        attn_mask[5] = False
    else:
        attn_mask = torch.zeros(12, 12)
        attn_mask[7] = float("-inf")
    expected = attention_gradients("cpu", attn_mask, compiled=False)
    actual = attention_gradients("pto", attn_mask, compiled=True)
    for a, e in zip(actual, expected):
        assert_close(a, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_lerp_with_a_tensor_weight_lowers_whole_to_the_eager_bits(dtype):
    """lerp.Tensor is one tlerpw in the program (not PyTorch's decomposition, which rounds
    apart): the compiled result is the CPU's bits, with a weight per element, broadcast or
    a CPU scalar."""
    generator = torch.Generator().manual_seed(12)
    a, b, w = ((torch.randn(64, 33, generator=generator) * 3).to(dtype) for _ in range(3))

    def f(a, b, w):
        return torch.lerp(a, b, w) * 2 + torch.lerp(a, b, w[:1]) + torch.lerp(a, b, torch.tensor(0.3, dtype=dtype))

    report = pypto_torch.explain(f, a.to("pto"), b.to("pto"), w.to("pto"))
    assert report.fallback_nodes == [] and "tlerpw" in report.program
    got = torch.compile(f, backend="pypto")(a.to("pto"), b.to("pto"), w.to("pto")).cpu()
    assert torch.equal(got, f(a, b, w))


def test_a_node_without_a_result_runs_eagerly_alone():
    """An assert on data (Mixtral's router) has no result, so no shape to be unknown: it
    runs eagerly between programs; the rest of the graph is still lowered."""
    def f(x):
        torch._assert_async(x.sum() > 0, "the sum is positive")
        return x * 2

    x = torch.rand(4, 4)
    report = pypto_torch.explain(f, x.to("pto"))
    assert report.fallback_nodes == [("_assert_async", "no lowering for aten._assert_async.msg")]
    assert "tmul" in report.program
    assert_close(torch.compile(f, backend="pypto")(x.to("pto")).cpu(), f(x))


INDEXING = {  # what the Hugging Face models' losses, embeddings and rotary halves need
    "gather": lambda x, i: torch.gather(x, 1, i) * 2,
    "scatter a value": lambda x, i: torch.scatter(x * 2, 1, i, -1.0),
    "scatter a source": lambda x, i: torch.scatter(x * 2, 1, i, x[1:, 2:] * 3),
    "slice_scatter with a step": lambda x, i: torch.slice_scatter(x * 2, x[:, :3] * 3, 1, 2, 8, 2),
    "pad": lambda x, i: F.pad(x * 2, (2, 1, 1, 3), value=0.5),
    "pad integers": lambda x, i: F.pad(i + 1, (0, 1), value=-100),
}


@pytest.mark.parametrize("name", list(INDEXING))
def test_indexing_ops_are_lowered(name):
    fn = INDEXING[name]
    x, i = torch.randn(6, 10), torch.randint(0, 10, (4, 3))
    report = pypto_torch.explain(fn, x.to("pto"), i.to("pto"))
    assert report.fallback_nodes == [], report
    assert_close(torch.compile(fn, backend="pypto")(x.to("pto"), i.to("pto")).cpu(), fn(x, i))


def test_cross_entropy_gradient_with_an_ignored_target_is_lowered():
    """gather forward, scatter backward: no eager node left in the loss."""
    from pypto_torch.compile.backend import make_backend

    logits, target = torch.randn(6, 10, requires_grad=True), torch.randint(0, 10, (6,))
    target[2] = -100
    dut, graphs = logits.detach().to("pto").requires_grad_(), []
    torch.compile(F.cross_entropy, backend=make_backend(on_graph=graphs.append))(dut, target.to("pto")).backward()
    F.cross_entropy(logits, target).backward()
    assert_close(dut.grad.cpu(), logits.grad)
    assert len(graphs) == 2 and all(plan.fallback_nodes == [] for graph in graphs for plan in graph.plans.values())


def test_a_plan_of_programs_runs_natively_and_refuses_other_layouts(monkeypatch):
    """The last signature's plan runs as one native call (graph_runner.native_runner); a
    call with other strides, or with a non-tensor where a tensor was, plans anew."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from pypto_torch.compile.graph_runner import CompiledGraph, Plan

    python_runs = []
    original = Plan.run
    monkeypatch.setattr(Plan, "run", lambda self, args: python_runs.append(1) or original(self, args))
    torch.manual_seed(0)
    x, y = torch.randn(4, 6), torch.randn(4, 6)
    graph = CompiledGraph(make_fx(lambda x, y: (x * 2 + y, (x - y).t()))(x.to("pto"), y.to("pto")))
    for call in range(3):
        got = graph(x.to("pto"), y.to("pto"))
        assert_close(got[0].cpu(), x * 2 + y, rtol=0, atol=0)
        assert_close(got[1].cpu(), (x - y).t(), rtol=0, atol=0)
        assert got[1].stride() == (1, 6)
    assert len(python_runs) == 1, "only the first call, which plans, runs the plan in Python"
    transposed = torch.randn(6, 4)
    got = graph(transposed.to("pto").t(), y.to("pto"))  # other strides: a plan of its own
    assert_close(got[0].cpu(), transposed.t() * 2 + y, rtol=0, atol=0)
    assert len(python_runs) == 2
    assert graph.runner.run((x.to("pto"), 1.0)) is None
