"""Matrix products run natively on pto (tmatmul over OpenBLAS), matching CPU on
PyTorch's OpInfo samples, forward and backward, transposed operands included."""

import pytest
import torch
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from opinfo_sweep import check_forward, opinfo_tests

NATIVE = {"mm", "bmm", "addmm", "baddbmm", "matmul", "nn.functional.linear", "mv", "addmv"}
OPS = [op for op in op_db if op.name in NATIVE and op.variant_test_name == ""]
# BLAS sums in another order than torch's CPU kernels; float16/bfloat16 go
# through float32 accumulation on both, rounded once at the end.
TOLERANCES = {torch.float32: {"rtol": 1e-5, "atol": 1e-5}, torch.float16: {"rtol": 2e-3, "atol": 2e-3},
              torch.bfloat16: {"rtol": 1.6e-2, "atol": 1e-2}, torch.float64: {}}


def test_the_sweep_covers_every_native_product():
    assert {op.name for op in OPS} == NATIVE


test_opinfo_forward_matches_cpu, test_opinfo_gradients_match_cpu = opinfo_tests(
    OPS, list(TOLERANCES), tolerance=lambda op, dtype: TOLERANCES[dtype],
    gradient_tolerance={"rtol": 1e-4, "atol": 1e-4})


@pytest.mark.parametrize("op", [op for op in OPS if op.name in ("addmm", "baddbmm", "addmv")], ids=lambda op: op.name)
def test_complex_alpha_and_beta_run_on_the_cpu_as_complex_tensors_do(op):
    """tmatmul's scaling immediates are real: complex ones take the CPU path, as complex
    tensors do, rather than failing to convert to double."""
    for dtype in (torch.complex64, torch.complex128):
        assert check_forward(op, dtype) > 0


@pytest.mark.parametrize("layout", ["contiguous", "a transposed", "b transposed", "both transposed",
                                    "out transposed", "sliced"])
def test_operand_layouts(layout):
    a, b = torch.randn(64, 48), torch.randn(48, 32)
    pa, pb = a.to("pto"), b.to("pto")
    if layout in ("a transposed", "both transposed"):
        pa = a.t().contiguous().to("pto").t()
    if layout in ("b transposed", "both transposed"):
        pb = b.t().contiguous().to("pto").t()
    if layout == "sliced":
        pa = torch.randn(64, 96).to("pto")[:, ::2]
        a = pa.cpu()
    if layout == "out transposed":
        out = torch.empty(32, 64, device="pto").t()
        torch.mm(pa, pb, out=out)
        assert_close(out.cpu(), a @ b, rtol=1e-5, atol=1e-5)
        return
    assert_close((pa @ pb).cpu(), a @ b, rtol=1e-5, atol=1e-5)


def test_products_do_not_fall_back():
    x = torch.randn(8, 16, device="pto")
    layer = torch.nn.Linear(16, 4).to("pto")
    before = pypto_torch.fallback_ops()
    layer(x), x @ x.t(), torch.bmm(x[None], x.t()[None]), x @ x[0]
    assert pypto_torch.fallback_ops() == before


def test_shape_mismatch_is_a_clear_error():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        torch.mm(torch.ones(2, 3, device="pto"), torch.ones(4, 5, device="pto"))
    with pytest.raises(RuntimeError, match="expected"):
        torch.mm(torch.ones(2, 3, device="pto"), torch.ones(3, 2, device="pto", dtype=torch.float64))
    assert (torch.ones(2, 2, device="pto") @ torch.ones(2, 2, device="pto")).sum().item() == 8
