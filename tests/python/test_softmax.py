"""softmax and log_softmax run natively on pto as fused row instructions,
forward and backward, along any dimension."""

import pytest
import torch
from torch.nn.attention import SDPBackend
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from opinfo_sweep import ONE_ULP, opinfo_tests

NATIVE = {("softmax", ""), ("log_softmax", ""), ("_softmax_backward_data", ""),
          ("nn.functional.softmin", ""), ("nn.functional.log_softmax", "")}
OPS = [op for op in op_db if (op.name, op.variant_test_name) in NATIVE]
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
# pto computes a float16/bfloat16 row in float32 and rounds once; PyTorch's CPU
# kernel rounds some intermediates to the storage type: up to one ulp apart (ONE_ULP).


test_opinfo_forward_matches_cpu, test_opinfo_gradients_match_cpu = opinfo_tests(
    OPS, DTYPES, tolerance=lambda op, dtype: ONE_ULP.get(dtype, {}))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_is_native_forward_and_backward(dim):
    x = torch.randn(6, 7, 8, requires_grad=True)
    p = x.detach().to("pto").requires_grad_()
    before = pypto_torch.fallback_ops()
    y = torch.softmax(p, dim)
    y.backward(torch.ones_like(y))
    torch.log_softmax(p, dim).sum().backward()
    assert pypto_torch.fallback_ops() == before
    torch.softmax(x, dim).backward(torch.ones(6, 7, 8))
    torch.log_softmax(x, dim).sum().backward()
    assert_close(p.grad.cpu(), x.grad)


def test_extreme_rows():
    x = torch.tensor([[1000.0, 1000.0, -1000.0], [-float("inf"), 0.0, -float("inf")],
                      [-float("inf")] * 3, [float("nan"), 1.0, 2.0]])
    for fn in (torch.softmax, torch.log_softmax):
        assert_close(fn(x.to("pto"), -1).cpu(), fn(x, -1), equal_nan=True)


@pytest.mark.parametrize("masked", [-float("inf"), -1e4, torch.finfo(torch.float32).min])
def test_causally_masked_rows_match_the_cpu(masked):
    """A causal mask's runs of a large negative number (attention's scores): their exps
    are exactly 0 on both devices, the rest as on the CPU. Rows of 128: whole groups of
    masked vectors (exp's shortcut to 0) and groups that mix masked lanes with others."""
    torch.manual_seed(0)
    keep = torch.ones(128, 128, dtype=torch.bool).tril()
    x = (torch.randn(4, 128, 128) * 3).masked_fill(~keep, masked)
    x[0, 5, :3] = -95.0  # exps that are subnormal once the row's maximum is taken off
    for fn in (torch.softmax, torch.log_softmax):
        got, expected = fn(x.to("pto"), -1).cpu(), fn(x, -1)
        assert_close(got, expected, equal_nan=True)
    got = torch.softmax(x.to("pto"), -1).cpu()
    assert torch.equal(got[:, ~keep], torch.zeros_like(got[:, ~keep]))


@pytest.mark.parametrize("length", [1, 15, 16, 17, 33, 100, 1000, 4099])
def test_float32_rows_of_every_tail_length(length):
    # A contiguous float32 row runs the vector kernels: full vectors, two at a time,
    # then a partial one; extreme rows past the first vector take the same paths.
    torch.manual_seed(length)
    x = torch.randn(5, length) * 20
    x[1, -1] = float("inf")
    x[2, :] = -float("inf")
    x[3, length // 2] = float("nan")
    for fn in (torch.softmax, torch.log_softmax):
        assert_close(fn(x.to("pto"), -1).cpu(), fn(x, -1), equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_safe_softmax_gives_zeros_over_a_masked_row_in_one_instruction(dtype):
    """aten._safe_softmax, attention's softmax in torch's math path (F.scaled_dot_product_attention
    on pto): a row that is all -inf (a query every key is masked from) gives 0 where
    torch.softmax gives NaN; a NaN row stays NaN. One tsoftmax (zero_masked_rows=1), where
    torch's composite adds a row test and a select; its gradient is softmax's. Values as the
    CPU's within the OpInfo sweep's tolerance above."""
    x = torch.randn(5, 3, 9, generator=torch.Generator().manual_seed(4)).to(dtype)
    x[1, 2] = -float("inf")
    x[3, 0, :4] = -float("inf")
    x[4, 1, 5] = float("nan")
    for dim, out_dtype in ((-1, None), (1, None), (-1, torch.float32)):
        expected = torch.ops.aten._safe_softmax(x, dim, out_dtype)
        with torch.profiler.profile() as profile:
            got = torch.ops.aten._safe_softmax(x.to("pto"), dim, out_dtype)
            torch.pto.synchronize()
        names = [event.name for event in profile.events() if event.name.startswith("t")]
        assert names == ["tsoftmax"] or (out_dtype and names[-1] == "tsoftmax"), names
        assert got.dtype == expected.dtype
        assert_close(got.cpu(), expected, equal_nan=True, **ONE_ULP.get(dtype, {}))
    p = x.to("pto").requires_grad_()
    q = x.clone().requires_grad_()
    grad = torch.randn(x.shape, generator=torch.Generator().manual_seed(5)).to(dtype)
    torch.ops.aten._safe_softmax(p, -1).backward(grad.to("pto"))
    torch.ops.aten._safe_softmax(q, -1).backward(grad)
    assert_close(p.grad.cpu(), q.grad, equal_nan=True, **ONE_ULP.get(dtype, {}))


def test_scaled_dot_product_attention_with_a_masked_query_matches_the_cpu():
    """A query every key is masked from attends to nothing: 0 on the CPU and on pto, eager
    (the math path's safe softmax, the kernel torch._fused_sdp_choice names for pto) and
    compiled (pypto's attention program), boolean or additive mask."""
    generator = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(2, 3, 6, 8, generator=generator) for _ in range(3))
    keep = torch.ones(6, 6, dtype=torch.bool).tril()
    keep[2] = False
    additive = torch.zeros(6, 6).masked_fill(~keep, float("-inf"))
    attend = torch.nn.functional.scaled_dot_product_attention
    compiled = torch.compile(attend, backend="pypto")
    for mask in (keep, additive):
        expected = attend(q, k, v, attn_mask=mask)
        assert expected[:, :, 2].eq(0).all()
        on_pto = [t.to("pto") for t in (q, k, v)]
        assert torch._fused_sdp_choice(*on_pto, mask.to("pto")) == SDPBackend.MATH.value
        for run in (attend, compiled):
            assert_close(run(*on_pto, attn_mask=mask.to("pto")).cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.int64, torch.complex64], ids=str)
@pytest.mark.parametrize("op", [torch.softmax, torch.log_softmax, torch.ops.aten._safe_softmax],
                         ids=["softmax", "log_softmax", "_safe_softmax"])
def test_rows_the_cpu_has_no_kernel_for_give_its_error(op, dtype):
    """An integer or complex row: the CPU kernel's NotImplementedError, naming the dtype (it
    was pto's RuntimeError that the dtype has no PTO equivalent)."""
    x = torch.ones(2, 3, dtype=dtype)
    with pytest.raises(NotImplementedError) as on_cpu:
        op(x, -1)
    with pytest.raises(NotImplementedError) as on_pto:
        op(x.to("pto"), -1)
    assert str(on_pto.value) == str(on_cpu.value)
