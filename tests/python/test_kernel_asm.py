"""@pypto.kernel (jit) and pypto.asm: one fused program from a Python function,
cached per shape or dynamic; clear errors naming the line when a function cannot be
one program; PTO-AS written by hand, run on tensors, its errors naming the line."""
import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from pypto_torch.kernel import CompileError, asm, asm_kernel, jit, kernel


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()


def softmax_by_hand(x):
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


def softmax_over_root_of_sum(x):
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True).sqrt()


def test_a_kernel_is_one_fused_program_and_matches_eager():
    fused = kernel(softmax_over_root_of_sum)
    x = torch.randn(64, 96, device="pto")
    assert_close(fused(x).cpu(), softmax_over_root_of_sum(x.cpu()))
    (graph,) = fused.graphs
    (plan,) = graph.plans.values()
    (program,) = plan.programs
    assert program.program.fused_stages == 1 and plan.fallback_nodes == []
    assert fused.__name__ == "softmax_over_root_of_sum"


def test_a_softmax_written_by_hand_is_one_softmax_instruction():
    fused = kernel(softmax_by_hand)
    x = torch.randn(64, 96, device="pto")
    assert_close(fused(x).cpu(), torch.softmax(x.cpu(), -1))
    (graph,) = fused.graphs
    (plan,) = graph.plans.values()
    (program,) = plan.programs
    assert program.program.instructions == 1 and "tsoftmax " in program.program.text


def test_programs_are_cached_per_shape_unless_dynamic():
    per_shape = kernel(softmax_by_hand)
    for rows in (8, 16, 8, 16):
        per_shape(torch.randn(rows, 32, device="pto"))
    assert len(per_shape.graphs) == 2
    dynamic = kernel(dynamic_shape=True)(softmax_by_hand)
    for rows in (8, 16, 24):
        x = torch.randn(rows, 32, device="pto")
        assert_close(dynamic(x).cpu(), torch.softmax(x.cpu(), -1))
    assert len(dynamic.graphs) == 1


def test_fuse_false_keeps_each_instruction_a_kernel():
    unfused = jit(fuse=False)(softmax_by_hand)
    x = torch.randn(32, 32, device="pto")
    assert_close(unfused(x).cpu(), torch.softmax(x.cpu(), -1))
    (plan,) = unfused.graphs[0].plans.values()
    assert plan.programs[0].program.fused_stages == 0


def test_a_graph_break_names_the_offending_line():
    @kernel
    def chatty(x):
        y = torch.exp(x)
        print("y is ready")  # the offending line
        return y

    with pytest.raises(CompileError, match=r"chatty: cannot be compiled as one PTO program.*"
                                           r"test_kernel_asm.py:\d+: print\(\"y is ready\"\)"):
        chatty(torch.randn(4, device="pto"))


def test_an_op_without_pto_form_names_the_offending_line():
    @kernel
    def convolve(x, w):
        return F.conv2d(x, w).relu()

    with pytest.raises(CompileError, match=r"convolution has no PTO form.*test_kernel_asm.py:\d+: "
                                           r"return F.conv2d\(x, w\).relu\(\)"):
        convolve(torch.randn(1, 3, 8, 8, device="pto"), torch.randn(2, 3, 3, 3, device="pto"))


SCALE_AND_EXP = """\
buffer %0 input 64
buffer %1 output 64
buffer %2 temp 64
# out = exp(2 * x): a fill, a multiply, an exp (the last two fused)
texpands %2:f32[;]@0 value=2
tmul %2:f32[16;1]@0, %0:f32[16;1]@0, %2:f32[16;0]@0
texp %1:f32[16;1]@0, %2:f32[16;1]@0
"""


def test_asm_runs_hand_written_pto_as_on_tensors():
    x = torch.randn(16, device="pto")
    out = torch.empty(16, device="pto")
    assert asm(SCALE_AND_EXP, x, out) is out
    assert_close(out.cpu(), torch.exp(2 * x.cpu()))


def test_asm_kernel_builds_the_text_from_its_tensors():
    @asm_kernel
    def exp_of(x, out):
        n = x.numel()
        return (f"buffer %0 input {4 * n}\nbuffer %1 output {4 * n}\n"
                f"texp %1:f32[{n};1]@0, %0:f32[{n};1]@0\n")

    x = torch.randn(40, device="pto")
    assert_close(exp_of(x, torch.empty_like(x)).cpu(), torch.exp(x.cpu()))


def test_asm_errors_name_the_line():
    x, out = torch.randn(16, device="pto"), torch.empty(16, device="pto")
    with pytest.raises(CompileError, match=r"PTO-AS line 7: texp: operand 0 reaches outside buffer %1"):
        asm(SCALE_AND_EXP.replace("texp %1:f32[16;1]", "texp %1:f32[32;1]").replace("%2:f32[16;1]@0\n", "%2:f32[32;1]@0\n"),
            x, out)
    with pytest.raises(CompileError, match=r"PTO-AS line 6, column 1: expected an instruction or 'buffer'"):
        asm(SCALE_AND_EXP.replace("tmul", "tmull"), x, out)
    with pytest.raises(TypeError, match="binds 2 tensors"):
        asm(SCALE_AND_EXP, x)
    with pytest.raises(RuntimeError, match=r"buffer %1 needs 64 bytes, got 32"):
        asm(SCALE_AND_EXP, x, torch.empty(8, device="pto"))
    assert_close(asm(SCALE_AND_EXP, x, out).cpu(), torch.exp(2 * x.cpu()))  # still usable


def test_a_result_shaped_by_the_data_names_the_offending_line():
    """x[x > 0] has as many elements as x has positive ones: no program can be planned
    before it runs, so the function cannot be one PTO program."""
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    try:
        @kernel
        def positives(x):
            return torch.exp(x[x > 0])

        with pytest.raises(CompileError, match=r"positives: cannot be compiled as one PTO program.*"
                                               r"test_kernel_asm.py:\d+: return torch.exp\(x\[x > 0\]\)"):
            positives(torch.randn(16, device="pto"))
    finally:
        torch._dynamo.config.capture_dynamic_output_shape_ops = False
