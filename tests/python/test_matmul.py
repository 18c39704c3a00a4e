"""Matrix products run natively on pto (tmatmul over MKL and oneDNN), matching CPU on
PyTorch's OpInfo samples, forward and backward, transposed operands included.

The GEMM libraries sum in another order than torch's CPU kernels (MKL, oneDNN, cpublas),
and which order depends on the host (vector width, blocking, threads). Every comparison
is within error_bounds.matmul_bound / addmm_bound / multilinear_bound: for inner length
K, |C_pto - C_cpu| <= 2 gamma_K (|A| @ |B|) at float32's (float64's) unit roundoff, plus
u_out (|C_pto| + |C_cpu|) where float16/bfloat16 results are rounded once after float32
accumulation, which holds on every host."""

import os
import re
import subprocess

import pytest
import torch
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from error_bounds import addmm_bound, assert_within_bound, bounded_opinfo_tests, matmul_bound
from opinfo_sweep import check_forward

NATIVE = {"mm", "bmm", "addmm", "baddbmm", "matmul", "nn.functional.linear", "mv", "addmv"}
OPS = [op for op in op_db if op.name in NATIVE and op.variant_test_name == ""]
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


def test_the_sweep_covers_every_native_product():
    assert {op.name for op in OPS} == NATIVE


# Forward and float32 gradients (again sums of products: grad @ B^T, A^T @ grad, sums over
# broadcast batches) within error_bounds.multilinear_bound / multilinear_gradient_bounds.
test_opinfo_forward_matches_cpu, test_opinfo_gradients_match_cpu = bounded_opinfo_tests(OPS, DTYPES)


def assert_product_within_bound(got, a, b, expected=None):
    """got = a @ b within matmul_bound of the CPU's a @ b."""
    expected = a @ b if expected is None else expected
    got = got.cpu()
    assert_within_bound(got, expected, matmul_bound(a, b, got, expected), f"{tuple(a.shape)} @ {tuple(b.shape)}")


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
        assert_product_within_bound(out, a, b)
        return
    assert_product_within_bound(pa @ pb, a, b)


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


LOW_PRECISION = [torch.float32, torch.bfloat16, torch.float16]


@pytest.mark.parametrize("dtype", LOW_PRECISION, ids=str)
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 17, 255), (255, 3, 17), (17, 255, 1), (1, 255, 3),
                                   (130, 64, 96), (300, 257, 129)])
def test_odd_sizes_match_cpu(dtype, m, k, n):
    """Sizes off the libraries' register tiles, and enough rows for a band per core. Within
    2 gamma_K (|A| @ |B|): a fixed 1e-5 let 300x257x129 float32 fail on an AVX-512 AMD host
    (1.3e-5 apart), where K = 257 allows 2 gamma_257 = 3.1e-5 of sum |a||b| (~200 there)."""
    torch.manual_seed(m * 10_000 + k * 100 + n)
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    assert_product_within_bound(a.to("pto") @ b.to("pto"), a, b)


@pytest.mark.parametrize("dtype", LOW_PRECISION, ids=str)
@pytest.mark.parametrize("layout", ["a transposed", "b transposed", "both transposed", "strided", "out transposed"])
def test_low_precision_layouts_match_cpu(dtype, layout):
    torch.manual_seed(1)
    a, b = torch.randn(40, 33).to(dtype), torch.randn(33, 50).to(dtype)
    pa, pb = a.to("pto"), b.to("pto")
    if layout in ("a transposed", "both transposed"):
        pa = a.t().contiguous().to("pto").t()
    if layout in ("b transposed", "both transposed"):
        pb = b.t().contiguous().to("pto").t()
    if layout == "strided":
        wide = torch.randn(40, 99).to(dtype)
        a, pa = wide[:, ::3], wide.to("pto")[:, ::3]
    if layout == "out transposed":
        out = torch.empty(50, 40, dtype=dtype, device="pto").t()
        torch.mm(pa, pb, out=out)
        assert_product_within_bound(out, a, b)
        return
    assert_product_within_bound(pa @ pb, a, b)


@pytest.mark.parametrize("dtype", LOW_PRECISION, ids=str)
def test_batch_broadcast_and_addmm_scaling_match_cpu(dtype):
    torch.manual_seed(2)
    a, b = torch.randn(3, 1, 17, 24).to(dtype), torch.randn(4, 24, 9).to(dtype)
    assert_product_within_bound(a.to("pto") @ b.to("pto"), a, b)
    c, x, y = torch.randn(17, 9).to(dtype), torch.randn(17, 24).to(dtype), torch.randn(24, 9).to(dtype)
    got = torch.addmm(c.to("pto"), x.to("pto"), y.to("pto"), beta=0.5, alpha=-2.0).cpu()
    expected = torch.addmm(c, x, y, beta=0.5, alpha=-2.0)
    assert_within_bound(got, expected, addmm_bound(c, x, y, beta=0.5, alpha=-2.0, got=got, expected=expected), "addmm")


@pytest.mark.parametrize("dtype", LOW_PRECISION, ids=str)
def test_attention_shaped_batches_match_cpu(dtype):
    """Attention's products: more batch entries than cores (each a GEMM of its own), read
    through the heads' permuted views, whose two batch dimensions do not merge into one."""
    torch.manual_seed(3)
    batch, tokens, heads, head_dim = 4, 48, 6, 16
    q, k, v = (torch.randn(batch, tokens, heads, head_dim).to(dtype).transpose(1, 2) for _ in range(3))
    pq, pk, pv = (t.transpose(1, 2).contiguous().to("pto").transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1)
    assert_product_within_bound(pq @ pk.transpose(-2, -1), q, k.transpose(-2, -1), scores)
    assert_product_within_bound(scores.to("pto") @ pv, scores, v)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_batches_in_one_library_call_per_core_match_cpu(dtype):
    """float32/float64 batches with more entries than cores go to MKL's batch API, each
    core's entries in one call: baddbmm's alpha and beta, a transposed operand, a batch
    repeated by broadcasting (stride 0) and one of two batch dimensions that do not merge."""
    torch.manual_seed(4)
    c, x, y = torch.randn(16, 7, 5, dtype=dtype), torch.randn(16, 7, 9, dtype=dtype), torch.randn(16, 5, 9, dtype=dtype)
    before = pypto_torch.fallback_ops()
    got = torch.baddbmm(c.to("pto"), x.to("pto"), y.to("pto").transpose(1, 2), beta=0.5, alpha=-2.0).cpu()
    expected = torch.baddbmm(c, x, y.transpose(1, 2), beta=0.5, alpha=-2.0)
    assert_within_bound(got, expected, addmm_bound(c, x, y.transpose(1, 2), beta=0.5, alpha=-2.0, got=got,
                                                   expected=expected), "baddbmm")
    a, b = torch.randn(3, 1, 17, 24, dtype=dtype), torch.randn(4, 24, 9, dtype=dtype)
    assert_product_within_bound(a.to("pto") @ b.to("pto"), a, b)
    q = torch.randn(2, 10, 3, 8, dtype=dtype).transpose(1, 2)  # (2, 3, 10, 8), heads inside rows
    pq = q.transpose(1, 2).contiguous().to("pto").transpose(1, 2)
    assert_product_within_bound(pq @ pq.transpose(-2, -1), q, q.transpose(-2, -1))
    assert pypto_torch.fallback_ops() == before


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16], ids=str)
def test_dot_and_vdot_are_native_and_refuse_as_the_cpu(dtype):
    """dot and vdot (and matmul of two vectors) as a one-by-one tmatmul, a long float32 /
    float64 one summed in slices on every core: within the GEMM bound of the CPU's, empty
    and strided vectors too; mismatched vectors get the CPU's errors."""
    torch.manual_seed(5)
    before = pypto_torch.fallback_ops()
    for n in (0, 1000, 1 << 18):
        a, b = torch.randn(n).to(dtype), torch.randn(2 * n).to(dtype)[::2]
        pa, pb = a.to("pto"), b.to("pto")
        for got in (torch.dot(pa, pb), torch.vdot(pa, pb), pa @ pb):
            expected = torch.dot(a, b)
            assert_within_bound(got.cpu(), expected, matmul_bound(a, b, got.cpu(), expected), "dot")
    assert pypto_torch.fallback_ops() == before
    for call in (lambda d: torch.dot(torch.ones(3, device=d), torch.ones(4, device=d)),
                 lambda d: torch.dot(torch.ones(3, device=d), torch.ones(3, device=d, dtype=torch.float64)),
                 lambda d: torch.vdot(torch.ones(3, 3, device=d), torch.ones(3, device=d))):
        with pytest.raises(RuntimeError) as cpu_error:
            call("cpu")
        with pytest.raises(RuntimeError, match=re.escape(str(cpu_error.value))):
            call("pto")


@pytest.mark.parametrize("dtype", LOW_PRECISION, ids=str)
def test_empty_inner_dimension_gives_zeros_or_beta_times_input(dtype):
    """Exactly: nothing is summed, and 2 C is exact."""
    a, b = torch.randn(5, 0).to(dtype), torch.randn(0, 7).to(dtype)
    assert_close((a.to("pto") @ b.to("pto")).cpu(), torch.zeros(5, 7, dtype=dtype), rtol=0, atol=0)
    c = torch.randn(5, 7).to(dtype)
    assert_close(torch.addmm(c.to("pto"), a.to("pto"), b.to("pto"), beta=2.0).cpu(), torch.addmm(c, a, b, beta=2.0),
                 rtol=0, atol=0)


def test_products_match_cpu_with_the_libraries_capped_at_avx2(python):
    """On AVX2-only hosts oneDNN has no bfloat16 GEMM: bfloat16 runs in MKL's bfloat16 GEMM
    there, which like torch's takes other kernels (no AMX, no AVX512-BF16). The caps
    emulate such a host for MKL, oneDNN and PyTorch alike."""
    result = python(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import torch
        import pypto_torch
        from error_bounds import assert_within_bound, matmul_bound
        torch.manual_seed(0)
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            for m, k, n in [(3, 17, 255), (130, 64, 96)]:
                a, b = torch.randn(m, k).to(dtype), torch.randn(n, k).to(dtype).t()
                got, expected = (a.to("pto") @ b.to("pto")).cpu(), a @ b
                assert_within_bound(got, expected, matmul_bound(a, b, got, expected), f"{{dtype}} {{m}}x{{k}}x{{n}}")
        print("ok")
    """, ONEDNN_MAX_CPU_ISA="AVX2", ATEN_CPU_CAPABILITY="avx2", MKL_ENABLE_INSTRUCTIONS="AVX2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def _dynamic_symbols(library: str, *options: str) -> set[str]:
    nm = subprocess.run(["nm", "-D", *options, library], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in nm.stdout.splitlines() if line.strip()}


def test_pto_and_torch_gemm_libraries_run_side_by_side(python):
    """torch's CPU build links MKL and oneDNN (3.x) into libtorch_cpu.so and exports MKL's
    names. pto's MKL is a second copy (cmake/mkl.cmake): its names must stay out of pto's
    dynamic symbol table, defined or wanted, as a call bound by name would reach torch's
    copy. pto's oneDNN is PyPI's libdnnl.so.3 (3.2), loaded dynamically: pto wants its C
    API (dnnl_*) by name, which is safe because libtorch_cpu.so exports no dnnl_* name at
    all (its oneDNN is linked in with only a few C++ template instances visible, which
    pypto_torch/_onednn.py keeps libdnnl from binding to), so those calls bind to libdnnl.so.3;
    pto itself must define no dnnl_* name, and the C++ API's inline instances it exports
    (dnnl::handle_traits, ...) must be no names torch defines. Then both run in one process, in either order,
    each within the bound of float64's result rounded to the dtype (itself an
    implementation of the product that rounds once)."""
    pto_symbols = _dynamic_symbols(pypto_torch._C.__file__)
    leaked = sorted(name for name in pto_symbols if re.match(r"(cblas_|mkl_|MKL_|[sdh]gemm_?$)", name))
    assert leaked == [], leaked
    defined_dnnl = sorted(name for name in _dynamic_symbols(pypto_torch._C.__file__, "--defined-only")
                          if name.startswith("dnnl_"))
    assert defined_dnnl == [], defined_dnnl
    pto_dnnl = {name for name in pto_symbols if "dnnl" in name}
    libtorch_cpu = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
    shadowed = sorted(pto_dnnl & _dynamic_symbols(libtorch_cpu, "--defined-only"))
    assert shadowed == [], shadowed
    for first in ("pto", "cpu"):
        result = python(f"""
            import sys
            sys.path.insert(0, {os.path.dirname(__file__)!r})
            import torch
            import pypto_torch
            from error_bounds import assert_within_bound, matmul_bound
            torch.manual_seed(0)
            for dtype in (torch.float32, torch.bfloat16):
                for m, k, n in [(64, 96, 80), (300, 256, 200)]:
                    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
                    exact = (a.double() @ b.double()).to(dtype)  # float64's product, rounded once
                    sides = {{"pto": lambda: (a.to("pto") @ b.to("pto")).cpu(), "cpu": lambda: a @ b}}
                    order = ["{first}", "cpu" if "{first}" == "pto" else "pto"]
                    got = {{side: sides[side]() for side in order + order}}
                    for side, value in got.items():
                        assert_within_bound(value, exact, matmul_bound(a, b, value, exact), f"{{side}} {{dtype}} {{m}}x{{k}}x{{n}}")
            print("ok")
        """)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "ok"
