"""Where PyTorch's device-generic suites found pto disagreeing with the CPU (issue 20):
each case run on both devices, the pto result compared with the CPU's."""

import re
import warnings

import pytest
import pypto_torch
import torch
from torch.testing import assert_close

from opinfo_sweep import assert_raises_as_cpu, assert_same_outcome, same_bytes


def on_both(make):
    """make(device) on the CPU and on pto; the pto result brought back to the CPU."""
    cpu, pto = make("cpu"), make("pto")
    if isinstance(pto, (tuple, list)):
        return type(cpu)(cpu), type(pto)(t.cpu() for t in pto)
    return cpu, pto.cpu()


def narrow_out(device, dtype=torch.float32):
    """A (2, 3) base and its non-contiguous (2, 2) view, the out= of the cases below."""
    base = torch.zeros(2, 3, device=device, dtype=dtype)
    return base, base.narrow(1, 1, 2)


@pytest.mark.parametrize("factory", [
    lambda out: torch.arange(0, 4, out=out),
    lambda out: torch.arange(4.0, 0.0, -1.0, out=out),
    lambda out: torch.linspace(0, 3, 4, out=out),
    lambda out: torch.logspace(0, 3, 4, out=out),
    lambda out: torch.logspace(0, 3, 4, base=2.0, out=out),
], ids=["arange", "arange-descending", "linspace", "logspace", "logspace-base2"])
def test_factory_into_a_non_contiguous_out_keeps_its_shape(factory):
    def run(device):
        base, out = narrow_out(device)
        returned = factory(out)
        assert returned.data_ptr() == out.data_ptr() and returned.stride() == (3, 1)
        return base

    cpu, pto = on_both(run)
    assert_close(pto, cpu, rtol=0, atol=0)


def test_arange_into_an_out_of_another_count_is_resized_with_the_cpus_warning():
    for device in ("cpu", "pto"):
        out = torch.zeros(2, 3, device=device)
        with pytest.warns(UserWarning, match="does not match the computed number of elements 3"):
            torch.arange(0, 3, out=out)
        assert out.shape == (3,) and out.cpu().tolist() == [0, 1, 2]


def test_range_into_a_non_contiguous_out():
    def run(device):
        base, out = narrow_out(device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # torch.range is deprecated
            torch.range(0, 3, out=out)
        return base

    cpu, pto = on_both(run)
    assert_close(pto, cpu, rtol=0, atol=0)


@pytest.mark.parametrize("op", [torch.max, torch.min], ids=["max", "min"])
def test_max_min_over_a_dim_into_non_contiguous_outs(op):
    def run(device):
        values_base, values = narrow_out(device)
        indices_base, indices = narrow_out(device, torch.long)
        source = torch.tensor([[3.0, 1.0, 4.0, 1.0], [5.0, 9.0, 2.0, 6.0]], device=device)
        op(source, 1, out=(values[:, 0], indices[:, 0]))
        op(source, 1, keepdim=True, out=(values[:, 1:], indices[:, 1:]))
        return values_base, indices_base

    (cpu_values, cpu_indices), (pto_values, pto_indices) = on_both(run)
    assert_close(pto_values, cpu_values, rtol=0, atol=0)
    assert_close(pto_indices, cpu_indices, rtol=0, atol=0)


def test_resize_to_the_same_size_keeps_a_views_strides():
    for device in ("cpu", "pto"):
        view = torch.zeros(2, 3, device=device).t()
        view.resize_(3, 2)
        assert view.stride() == (1, 3)


@pytest.mark.parametrize("reduce", [torch.sum, torch.mean, torch.prod], ids=["sum", "mean", "prod"])
def test_complex_reductions_keep_nan(reduce):
    cpu, pto = on_both(lambda d: reduce(torch.tensor([1 + 1j, complex(float("nan"), 0)], device=d)))
    assert torch.isnan(pto).item() and torch.isnan(cpu).item()
    assert_close(pto, cpu, equal_nan=True)


def test_isnan_of_complex():
    values = [1 + 1j, complex(float("nan"), 0), complex(0, float("nan")), complex(float("inf"), 1)]
    cpu, pto = on_both(lambda d: torch.isnan(torch.tensor(values, device=d)))
    assert pto.tolist() == cpu.tolist() == [False, True, True, False]


@pytest.mark.parametrize("op", [torch.all, torch.any], ids=["all", "any"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8, torch.bool], ids=str)
def test_all_any_over_an_empty_dim_list_reduce_nothing(op, dtype):
    def run(device):
        x = torch.tensor([[0, 2, 1], [1, 0, 0]], device=device).to(dtype)
        return op(x, dim=[]), op(x, dim=[], keepdim=True)

    cpu, pto = on_both(run)
    for got, expected in zip(pto, cpu):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("out_dtype", [torch.complex64, torch.complex128], ids=str)
@pytest.mark.parametrize("types", [(torch.int16, torch.int32), (torch.float32, torch.float32),
                                   (torch.float64, torch.int64)], ids=str)
def test_binary_op_into_a_complex_out(types, out_dtype):
    def run(device):
        a = torch.tensor([1, -2, 3], dtype=types[0], device=device)
        b = torch.tensor([4, 5, -6], dtype=types[1], device=device)
        out = torch.empty(3, dtype=out_dtype, device=device)
        torch.add(a, b, out=out)
        return out

    cpu, pto = on_both(run)
    assert_close(pto, cpu, rtol=0, atol=0)


def test_reduction_into_a_complex_out():
    def run(device):
        out = torch.empty((), dtype=torch.complex64, device=device)
        return torch.sum(torch.tensor([1, 2, 3], dtype=torch.int32, device=device), 0, out=out)

    cpu, pto = on_both(run)
    assert_close(pto, cpu, rtol=0, atol=0)


@pytest.mark.parametrize("inplace", [
    lambda self, other: self.add_(other),
    lambda self, other: self.mul_(other),
    lambda self, other: self.pow_(other),
    lambda self, other: self.sub_(other, alpha=2),
    lambda self, other: self.addcmul_(other, other),
], ids=["add_", "mul_", "pow_", "sub_", "addcmul_"])
def test_inplace_op_refuses_to_broadcast_self(inplace):
    for device in ("cpu", "pto"):
        self = torch.ones(2, device=device)
        with pytest.raises(RuntimeError, match=r"output with shape \[2\] doesn't match the broadcast shape \[2, 2\]"):
            inplace(self, torch.ones(2, 1, device=device))
        assert self.shape == (2,) and self.cpu().tolist() == [1.0, 1.0]


def test_hardswish_gradient_at_its_corners():
    def run(device):
        x = torch.tensor([-3.5, -3.0, -1.0, 0.0, 3.0, 3.5], device=device, requires_grad=True)
        torch.nn.functional.hardswish(x).sum().backward()
        return x.grad

    cpu, pto = on_both(run)
    assert_close(pto, cpu, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", [
    lambda x: x / 1e5, lambda x: x * 1e-5, lambda x: x * 100000, lambda x: x / torch.tensor(1e5),
    lambda x: x.mul(1e5), lambda x: x.clone().div_(1e5),
], ids=["div", "mul", "mul-int", "div-0dim", "mul-method", "div_"])
def test_reduced_precision_mul_div_by_a_scalar_keep_the_cpus_float_intermediate(dtype, case):
    """half(100) / 1e5 is 1e-3 on the CPU (the scalar stays a float32), not 100 / inf."""
    cpu, pto = on_both(lambda d: case(torch.tensor([100.0, 1e-3, -7.5, 0.0], dtype=dtype, device=d)))
    assert_close(pto, cpu, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_reduced_precision_add_rounds_the_scalar_as_the_cpu_does(dtype):
    cpu, pto = on_both(lambda d: torch.tensor([2048.0, 256.0], dtype=dtype, device=d) + 1.00049)
    assert_close(pto, cpu, rtol=0, atol=0)


def test_cpu_scalar_first_gives_a_pto_result():
    z = torch.tensor([1 + 1j, 2j], device="pto")
    product = torch.tensor(2 + 0j) * z
    assert product.device.type == "pto"
    assert_close(product.cpu(), torch.tensor(2 + 0j) * z.cpu())
    assert (torch.tensor(3.0) * torch.ones(2, device="pto")).device.type == "pto"


@pytest.mark.parametrize("op", [torch.isposinf, torch.isneginf], ids=["isposinf", "isneginf"])
def test_isposinf_isneginf_refuse_a_non_bool_out(op):
    for device in ("cpu", "pto"):
        with pytest.raises(RuntimeError, match="does not support non-boolean outputs"):
            op(torch.tensor([1.0], device=device), out=torch.empty(1, device=device))
        with pytest.raises(RuntimeError, match="does not support complex inputs"):
            op(torch.tensor([1j], device=device), out=torch.empty(1, dtype=torch.bool, device=device))


@pytest.mark.parametrize("view_dtype", [torch.uint32, torch.int32, torch.uint16, torch.float16, torch.uint8,
                                        torch.uint64, torch.float64, torch.complex64], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "permuted", "expanded", "sliced"])
def test_view_as_another_dtype_reads_the_same_bytes(view_dtype, layout):
    """A view in another dtype (one PTO lacks too: uint16/32/64) read back to the CPU
    holds the bytes the CPU view of the same tensor holds."""
    base = torch.arange(1.0, 1 + 4 * 4 * 64).view(4, 4, 64) * 0.37
    make = {"contiguous": lambda t: t, "permuted": lambda t: t.permute(1, 0, 2),
            "expanded": lambda t: t[:1, :, :1].expand(5, 4, 64), "sliced": lambda t: t[1::2, 1:, 4:36]}[layout]
    cpu, pto = make(base), make(base.to("pto"))
    if cpu.stride(-1) != 1 and view_dtype.itemsize != cpu.itemsize:
        return  # torch refuses it on both (test_view_dtype_new checks that message)
    expected = cpu.view(view_dtype) if view_dtype.itemsize == cpu.itemsize else cpu.contiguous().view(view_dtype)
    got = pto.view(view_dtype)
    assert got.shape == expected.shape and got.stride() == cpu.view(view_dtype).stride()
    assert same_bytes(got.cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn,
                                   torch.float8_e5m2], ids=str)
def test_dtypes_pto_lacks_move_and_convert_as_on_the_cpu(dtype):
    """No PTO instruction holds these dtypes: strided copies move their bytes as integers
    of the same width, conversions go through the CPU's."""
    source = torch.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]).to(dtype)
    on_pto = source.to("pto")
    assert same_bytes(on_pto.t().cpu(), source.t())
    assert same_bytes(on_pto.t().contiguous().cpu(), source.t())
    assert torch.equal(on_pto.t().to(torch.float32).cpu(), source.t().to(torch.float32))
    assert same_bytes(on_pto.to(torch.float32).t().to(dtype).cpu(), source.t())
    picked = torch.index_select(on_pto, 0, torch.tensor([1, 0], device="pto"))
    assert same_bytes(picked.cpu(), source.flip(0))


HIGH_RANK_LAYOUTS = {
    "size-1 dims": lambda: torch.randn((1,) * 9 + (3,)),
    "contiguous rank 10": lambda: torch.randn((2,) * 10),
    "rank 25 (CUDA's limit)": lambda: torch.randn((1,) * 12 + (2,) + (1,) * 12),
    "permuted rank 12": lambda: torch.randn((2,) * 12).permute(11, 0, 10, 1, 9, 2, 8, 3, 7, 4, 6, 5),
    "sliced rank 10": lambda: torch.randn((2,) * 9 + (4,))[..., ::2],
}


@pytest.mark.parametrize("layout", list(HIGH_RANK_LAYOUTS))
def test_ranks_above_ptos_limit_of_8(layout):
    """torch allows 64 dims on the CPU and 25 on CUDA: the launch merges the dims all
    operands walk as one, and runs what stays above 8 once per index of an outer dim."""
    torch.manual_seed(0)
    x = HIGH_RANK_LAYOUTS[layout]()
    y = torch.randn(x.shape)
    px, py = x.to("pto"), y.to("pto")
    assert torch.equal((px + py).cpu(), x + y)
    assert torch.equal((px * 2).cpu(), x * 2)
    assert torch.equal(torch.isclose(px, py).cpu(), torch.isclose(x, y))
    assert torch.equal(px.clone().cpu(), x.clone()) and torch.equal(px.contiguous().cpu(), x.contiguous())
    # Two float32 sums of n terms in any orders differ by at most 2 * gamma_n * sum|x|
    # (Higham's bound for each, gamma_n = n u / (1 - n u)); a sum of two is exact.
    n, u = x.numel(), 2.0 ** -24
    bound = 2 * n * u / (1 - n * u) * x.abs().sum().item()
    assert_close(px.sum().cpu(), x.sum(), rtol=0, atol=bound)
    assert torch.equal(px.sum(0).cpu(), x.sum(0))
    assert torch.equal(px.amax(-1).cpu(), x.amax(-1)) and torch.equal(px.argmax().cpu(), x.argmax())
    assert_close(px.softmax(-1).cpu(), x.softmax(-1))


HIGH_RANK_OPS = {
    "sum over three dims": lambda t: t.sum(dim=(1, 3, 5)),
    "mean keepdim": lambda t: t.mean(dim=(0, 11), keepdim=True),
    "argmax": lambda t: t.argmax(dim=4),
    "max values and indices": lambda t: t.max(dim=3),
    "amax": lambda t: t.amax(dim=(2, 7)),
    "std": lambda t: t.std(dim=(1, 2)),
    "any": lambda t: (t > 1).any(dim=(2, 3)),
    "cumsum": lambda t: t.cumsum(7),
    "cumprod": lambda t: t.cumprod(0),
    "sort": lambda t: t.sort(dim=9),
    "topk": lambda t: t.topk(1, dim=3),
    "kthvalue": lambda t: t.kthvalue(1, dim=3),
    "median": lambda t: t.median(dim=0),
    "gather": lambda t: t.gather(3, (t > 0).long()),
    "index_select": lambda t: t.index_select(6, torch.tensor([1, 0], device=t.device)),
    "scatter_add": lambda t: torch.zeros_like(t).scatter_add_(2, (t > 0).long(), t),
    "index_add": lambda t: torch.zeros_like(t).index_add_(5, torch.tensor([1, 1], device=t.device), t),
    "tril": lambda t: t.tril(),
    "flip": lambda t: t.flip(3, 9),
}


@pytest.mark.parametrize("name", list(HIGH_RANK_OPS))
@pytest.mark.parametrize("permuted", [False, True], ids=["contiguous", "permuted"])
def test_ops_along_dims_above_ptos_rank(name, permuted):
    """Reductions fold a [kept, folded] matrix; gathers, scatters, scans, sorts and
    triangles run once per index of another dimension. Sums of <= 8 float32 terms
    in two orders differ by at most 2 gamma_8 sum|x| (Higham), and this seeded
    input has |x| < 4.2: 2 * 8 * 2^-24 * 33.6 < 3.3e-5, the tolerance below; a product
    of 2 terms (cumprod along a dim of 2) is exact."""
    torch.manual_seed(0)
    x = torch.randn((2,) * 12)
    if permuted:
        x = x.permute(11, 0, 10, 1, 9, 2, 8, 3, 7, 4, 6, 5)
    expected, got = HIGH_RANK_OPS[name](x), HIGH_RANK_OPS[name](x.to("pto"))
    for e, g in zip(expected, got) if isinstance(expected, tuple) else [(expected, got)]:
        assert_close(g.cpu(), e, rtol=0, atol=3.3e-5)


def test_more_than_64_dims():
    """dim=None reduces a rank-65 tensor; a named dim gets the CPU's error."""
    x = torch.randn([1] * 65, device="pto")
    assert x.sum().shape == () and x.argmax().item() == 0
    for op in (torch.sum, torch.amax, torch.argmax, torch.std, torch.logsumexp):
        with pytest.raises(RuntimeError, match="only tensors with up to 64 dims are supported"):
            op(x, dim=0)


def test_threshold_backward_passes_the_gradient_at_nan():
    """The CPU's rule: zero where self <= threshold, so NaN (not <=) passes grad."""
    cpu, pto = on_both(lambda d: torch.ops.aten.threshold_backward(
        torch.full((4,), 2.0, device=d), torch.tensor([float("nan"), 0.0, 1.0, 0.5], device=d), 0.5))
    assert same_bytes(cpu, pto)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_gradient_when_every_target_is_ignored(reduction):
    """An ignored row's gradient stays 0 even when the mean divides by a total of 0."""
    def grad(device):
        x = torch.randn(3, 4, device=device, requires_grad=True)
        loss = torch.nn.functional.nll_loss(x, torch.tensor([1, 1, 1], device=device), ignore_index=1,
                                            reduction=reduction)
        loss.sum().backward()
        return x.grad
    cpu, pto = on_both(grad)
    assert same_bytes(cpu, pto)


@pytest.mark.parametrize("case", [
    ("full float32", lambda d: torch.full((2,), 1e40, device=d)),
    ("fill_ int8", lambda d: torch.zeros(2, dtype=torch.int8, device=d).fill_(300)),
    ("fill_ float16", lambda d: torch.zeros(2, dtype=torch.float16, device=d).fill_(1e6)),
    ("masked_fill_", lambda d: torch.zeros(2, device=d).masked_fill_(torch.ones(2, dtype=torch.bool, device=d), 1e40)),
], ids=lambda c: c[0])
def test_fill_values_outside_the_dtype_raise(case):
    _, make = case
    with pytest.raises(RuntimeError, match="value cannot be converted to type .* without overflow"):
        make("cpu")
    with pytest.raises(RuntimeError, match="value cannot be converted to type .* without overflow"):
        make("pto")
    assert torch.zeros(2, device="pto").fill_(float("inf")).cpu().isinf().all()


@pytest.mark.parametrize("case", [
    ("eye", lambda d: torch.eye(3, out=torch.zeros(3, 1, device=d).expand(3, 3))),
    ("eye n x m bool", lambda d: torch.eye(2, 3, dtype=torch.bool, device=d)),
    ("full complex", lambda d: torch.full((2, 3), 1 + 2j, out=torch.zeros(1, dtype=torch.complex64, device=d)
                                          .expand(2, 3))),
], ids=lambda c: c[0])
def test_factories_into_an_expanded_out(case):
    """The CPU writes an out= whose elements overlap (expand): so does pto."""
    _, make = case
    cpu, pto = on_both(make)
    assert torch.equal(cpu, pto)


def test_randperm_into_an_expanded_out():
    """Its one element holds a value of the permutation (the CPU's loop writes the last)."""
    out = torch.zeros(1, dtype=torch.long, device="pto").expand(4)
    torch.randperm(4, out=out)
    values = out.cpu()
    assert out.stride() == (0,) and 0 <= values[0].item() < 4 and (values == values[0]).all()


def test_randperm_resizes_its_out_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = torch.zeros(2, dtype=torch.long, device="pto")
        torch.randperm(5, out=out)
    assert sorted(out.cpu().tolist()) == list(range(5))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128, torch.complex32], ids=str)
def test_strided_complex_copies_on_the_device(dtype):
    """Complex tensors move as their real parts (test_index_copy's non-contiguous
    complex128 copies once recursed without end here)."""
    source = torch.randn(4, 5, dtype=torch.complex64).to(dtype)
    on_pto = source.to("pto")
    assert same_bytes(on_pto.t().contiguous().cpu(), source.t().contiguous())
    target = torch.zeros(5, 8, dtype=dtype, device="pto")
    target[:, ::2] = on_pto.t()
    expected = torch.zeros(5, 8, dtype=dtype)
    expected[:, ::2] = source.t()
    assert same_bytes(target.cpu(), expected)
    if dtype == torch.complex32:
        return  # the CPU has no index_copy_ for it
    index = torch.tensor([3, 0, 1], device="pto")
    copied = torch.zeros(5, 5, dtype=dtype, device="pto")[:, ::1].t().index_copy_(0, index, on_pto[:3])
    assert same_bytes(copied.cpu(), torch.zeros(5, 5, dtype=dtype).t().index_copy_(0, index.cpu(), source[:3]))


INDEX_ERRORS = {
    "list into a dimension of size 0": (lambda x: x.new_empty(10, 0)[:, [0, 1]], "for dimension with size 0"),
    "CPU index past the end": (lambda x: x[torch.tensor([10])], "index 10 is out of bounds for dimension 0 with size 10"),
    "CPU index before the start": (lambda x: x[torch.tensor([-11])], "index -11 is out of bounds"),
    "second CPU index": (lambda x: x[torch.tensor([1, 2]), torch.tensor([0, 5])], "index 5 is out of bounds for dimension 1"),
    "setitem with a CPU index": (lambda x: x.__setitem__(torch.tensor([1, 11]), 1.0), "index 11 is out of bounds"),
    "index_fill with a CPU index": (lambda x: x.index_fill(0, torch.tensor([12]), 1.0), "index 12 is out of bounds"),
    "empty index list": (lambda x: torch.ops.aten.index.Tensor(x, []), "at least one index must be provided"),
    "float index": (lambda x: x[x.new_empty(0)], "tensors used as indices must be long"),
    "indices that do not broadcast": (lambda x: x[[0, 1], [0, 1, 2]], "shape mismatch"),
    "mask of another shape": (lambda x: x[torch.tensor([True], device=x.device)], "mask"),
}


@pytest.mark.parametrize("case", list(INDEX_ERRORS))
def test_indexing_errors_the_host_can_see_are_the_cpus_index_errors(case):
    """Raised at the call with the CPU's IndexError. The values of an index already on
    the device (a pto tensor, or a Python list, which torch puts on self's device) are
    checked by the kernel and raise at the next synchronising call, as CUDA asserts."""
    make, message = INDEX_ERRORS[case]
    for device in ("cpu", "pto"):
        with pytest.raises(IndexError, match=message):
            make(torch.zeros(10, 4, device=device))
    assert torch.equal((torch.ones(3, device="pto") * 2).cpu(), torch.full((3,), 2.0))


def test_index_fill_takes_a_cpu_index_and_refuses_a_complex_value():
    cpu, pto = on_both(lambda d: torch.zeros(5, 3, device=d).index_fill(0, torch.tensor([1, -1]), 1.0))
    assert torch.equal(pto, cpu)
    for device in ("cpu", "pto"):
        for dtype in (torch.float32, torch.bool, torch.int64):
            with pytest.raises(RuntimeError, match="Converting complex Scalar to non-complex type"):
                torch.zeros(2, 2, dtype=dtype, device=device).index_fill_(1, torch.tensor([0], device=device), 1 + 1j)


def test_nonzero_refuses_an_out_on_another_device():
    with pytest.raises(RuntimeError, match="on the same device"):
        torch.nonzero(torch.ones(3, device="pto"), out=torch.empty([], dtype=torch.long))
    assert torch.nonzero(torch.tensor([0.0, 2.0, 3.0], device="pto")).cpu().flatten().tolist() == [1, 2]


def test_mode_with_out_runs_on_pto():
    """torch.mode's out= form is a composite that names its devices; on pto it runs the
    CPU's kernel through the fallback (it said "mode only supports CPU, CUDA and XPU")."""
    x = torch.tensor([[1.0, 2.0, 2.0], [3.0, 3.0, 1.0]])
    values, indices = torch.empty(0, device="pto"), torch.empty(0, dtype=torch.long, device="pto")
    torch.mode(x.to("pto"), 1, out=(values, indices))
    expected = torch.mode(x, 1)
    assert torch.equal(values.cpu(), expected.values) and torch.equal(indices.cpu(), expected.indices)
    for device in ("cpu", "pto"):
        with pytest.raises(RuntimeError, match="expected scalar type 'Float' but got 'Long' for values"):
            torch.mode(x.to(device), 1, out=(torch.empty(0, dtype=torch.long, device=device),
                                               torch.empty(0, dtype=torch.long, device=device)))


@pytest.mark.parametrize("op", [torch.var, torch.std, torch.var_mean, torch.std_mean],
                         ids=["var", "std", "var_mean", "std_mean"])
def test_variance_warns_when_no_degrees_of_freedom_remain(op):
    for device in ("cpu", "pto"):
        with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
            op(torch.ones(3, 2, device=device), dim=-1, correction=2)


FACTORY_ERRORS = {
    "randperm past uint8": (lambda d: torch.randperm(257, out=torch.empty(0, dtype=torch.uint8, device=d)),
                            RuntimeError, "value cannot be converted to type uint8_t without overflow"),
    "randperm past half": (lambda d: torch.randperm(2050, out=torch.empty(0, dtype=torch.half, device=d)),
                           RuntimeError, "n cannot be greater than 2049 for Half type"),
    "randperm past float": (lambda d: torch.randperm(2**24 + 2, out=torch.empty(0, device=d)),
                            RuntimeError, r"n cannot be greater than 2\^24\+1 for Float type"),
    "arange of too many elements": (lambda d: torch.arange(1.175494351e-38, 3.402823466e+38, device=d),
                                    RuntimeError, "invalid size, possible overflow"),
    "bincount of floats": (lambda d: torch.bincount(torch.tensor([1.0, 0.3], device=d)),
                           NotImplementedError, "not implemented for 'Float'"),
    "bincount of a matrix": (lambda d: torch.bincount(torch.tensor([[1, 2]], device=d)),
                             RuntimeError, "1-d non-negative integral"),
}


@pytest.mark.parametrize("case", list(FACTORY_ERRORS))
def test_factory_errors_are_the_cpus(case):
    make, error, message = FACTORY_ERRORS[case]
    for device in ("cpu", "pto"):
        with pytest.raises(error, match=message):
            make(device)
    permutation = torch.randperm(256, out=torch.empty(0, dtype=torch.uint8, device="pto")).cpu()
    assert torch.equal(permutation.sort().values, torch.arange(256).to(torch.uint8))


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64], ids=str)
def test_random_integers_of_unsigned_dtypes_pto_lacks(dtype):
    """make_tensor of these dtypes (random_ from/to) raised "not implemented for 'UInt16'"."""
    torch.manual_seed(0)
    drawn = torch.empty(4000, dtype=dtype, device="pto").random_(3, 12).cpu().to(torch.int64)
    assert drawn.min().item() == 3 and drawn.max().item() == 11
    assert torch.testing.make_tensor((5,), dtype=dtype, device="pto").dtype == dtype


@pytest.mark.parametrize("op", [
    lambda a, b: torch.fmod(a, b), lambda a, b: torch.remainder(a, b), lambda a, b: a // b,
    lambda a, b: torch.div(a, b, rounding_mode="trunc"), lambda a, b: a.fmod_(b),
], ids=["fmod", "remainder", "floor_divide", "div-trunc", "fmod_"])
@pytest.mark.parametrize("zero", [0, torch.tensor(0)], ids=["number", "cpu-scalar"])
def test_integer_division_by_a_host_zero_raises_at_the_call(op, zero):
    """A zero the host holds is the CPU's ZeroDivisionError at the call; a zero inside a
    pto tensor fails the kernel and raises at the next synchronising call."""
    for device in ("cpu", "pto"):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            op(torch.tensor([5, -3], device=device), zero)
    assert torch.equal(torch.fmod(torch.tensor([5, -3], device="pto"), 2).cpu(), torch.tensor([1, -1]))


RECURRENT = {
    "LSTM": (lambda: torch.nn.LSTM(5, 7, num_layers=2, bidirectional=True), (3, 4, 5)),
    "LSTM no bias, batch first": (lambda: torch.nn.LSTM(5, 7, bias=False, batch_first=True), (4, 3, 5)),
    "GRU": (lambda: torch.nn.GRU(5, 7, num_layers=2), (3, 4, 5)),
    "LSTMCell": (lambda: torch.nn.LSTMCell(5, 7), (4, 5)),
    "GRUCell": (lambda: torch.nn.GRUCell(5, 7), (4, 5)),
}


@pytest.mark.parametrize("name", list(RECURRENT))
def test_recurrent_modules_forward_and_backward(name):
    """torch's RNN code takes the fused cells (_thnn_fused_lstm_cell, _gru_cell) for any
    device but the CPU; pto composes them. Error bound: each gate is a sum of at most
    12 products (2 gamma_12 |w||x| < 1.5e-6 relative to it in float32, both sides),
    sigmoid/tanh within 4 ulp (5e-7), compounded over 3 steps and 2 layers: 1e-5."""
    import copy

    torch.manual_seed(0)
    make, shape = RECURRENT[name]
    cpu_module = make()
    pto_module = copy.deepcopy(cpu_module).to("pto")
    x = torch.randn(shape, requires_grad=True)
    x_pto = x.detach().to("pto").requires_grad_()
    first = lambda r: r[0] if isinstance(r, tuple) else r  # noqa: E731
    expected, got = first(cpu_module(x)), first(pto_module(x_pto))
    assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-5)
    expected.square().sum().backward()
    got.square().sum().backward()
    assert_close(x_pto.grad.cpu(), x.grad, rtol=1e-5, atol=1e-5)
    for cpu_param, pto_param in zip(cpu_module.parameters(), pto_module.parameters()):
        assert_close(pto_param.grad.cpu(), cpu_param.grad, rtol=1e-5, atol=1e-5)


LAZY = {
    "LazyConv2d": (lambda: torch.nn.LazyConv2d(8, 3), (2, 3, 9, 9)),
    "LazyLinear": (lambda: torch.nn.LazyLinear(4), (2, 3)),
    "LazyBatchNorm1d": (lambda: torch.nn.LazyBatchNorm1d(), (4, 3)),
}


@pytest.mark.parametrize("name", list(LAZY))
def test_lazy_module_moved_to_pto_before_its_first_call(name):
    """module.to("pto") keeps each parameter object (its data replaced, as for CUDA), so
    an UninitializedParameter stays one and materialises at the first call."""
    make, shape = LAZY[name]
    module = make().to("pto")
    assert all(type(p).__name__ == "UninitializedParameter" for p in module.parameters())
    x = torch.randn(shape)
    y = module(x.to("pto"))
    assert y.device.type == "pto" and all(p.device.type == "pto" for p in module.parameters())
    initialised = {k: v.cpu() for k, v in module.state_dict().items()}
    reference = make()
    reference(x)  # materialises it on the CPU, then the same values as pto's
    reference.load_state_dict(initialised)
    assert_close(module(x.to("pto")).cpu(), reference(x), rtol=1e-5, atol=1e-5)


def test_module_to_pto_keeps_its_parameter_objects():
    linear = torch.nn.Linear(3, 4)
    weight = linear.weight
    linear.to("pto")
    assert linear.weight is weight and weight.device.type == "pto"
    t = torch.ones(2)
    t.data = torch.zeros(2, device="pto")
    assert t.device.type == "pto" and t.cpu().tolist() == [0.0, 0.0]


CHANNELS_LAST_OPS = {
    "interpolate bilinear": lambda t: torch.nn.functional.interpolate(t, scale_factor=2, mode="bilinear"),
    "interpolate nearest": lambda t: torch.nn.functional.interpolate(t, scale_factor=2, mode="nearest"),
    "cat": lambda t: torch.cat([t, t], 1),
    "cat of mixed layouts": lambda t: torch.cat([t, t.contiguous()], 0),
    "max_pool2d": lambda t: torch.nn.functional.max_pool2d(t, 2),
    "max_pool2d indices": lambda t: torch.nn.functional.max_pool2d(t, 2, return_indices=True)[1],
    "adaptive_avg_pool2d": lambda t: torch.nn.functional.adaptive_avg_pool2d(t, (2, 3)),
    "avg_pool2d": lambda t: torch.nn.functional.avg_pool2d(t, 2),
    "pad reflect": lambda t: torch.nn.functional.pad(t, (1, 2, 2, 1), mode="reflect"),
    "pad replicate": lambda t: torch.nn.functional.pad(t, (1, 2, 2, 1), mode="replicate"),
    "pad reflect 3d": lambda t: torch.nn.functional.pad(t.unsqueeze(2), (1, 1, 1, 1, 0, 0), mode="reflect"),
    # the gradients, called directly: autograd lays x.grad out as x whatever the kernel gave
    "avg_pool2d backward": lambda t: torch.ops.aten.avg_pool2d_backward(
        torch.ones(2, 3, 3, 4, device=t.device).to(memory_format=torch.channels_last), t, [2, 2], [2, 2], [0, 0],
        False, True, None),
    "max_pool2d backward": lambda t: torch.ops.aten.max_pool2d_with_indices_backward(
        torch.ones(2, 3, 3, 4, device=t.device), t, [2, 2], [2, 2], [0, 0], [1, 1], False,
        torch.nn.functional.max_pool2d(t, 2, return_indices=True)[1]),
    "reflection_pad2d backward": lambda t: torch.ops.aten.reflection_pad2d_backward(
        torch.ones(2, 3, 9, 11, device=t.device), t, [1, 2, 2, 1]),
    "upsample_bilinear2d backward": lambda t: torch.ops.aten.upsample_bilinear2d_backward(
        torch.ones(2, 3, 12, 16, device=t.device).to(memory_format=torch.channels_last), [12, 16], [2, 3, 6, 8],
        False),
    "upsample_nearest2d backward": lambda t: torch.ops.aten.upsample_nearest2d_backward(
        torch.ones(2, 3, 12, 16, device=t.device).to(memory_format=torch.channels_last), [12, 16], [2, 3, 6, 8]),
}


@pytest.mark.parametrize("name", list(CHANNELS_LAST_OPS))
def test_results_keep_the_cpus_memory_format(name):
    """The result's layout follows the CPU's rule (suggest_memory_format of the inputs)."""
    op = CHANNELS_LAST_OPS[name]
    torch.manual_seed(0)
    x = torch.randn(2, 3, 6, 8).to(memory_format=torch.channels_last)
    expected, got = op(x), op(x.to("pto"))
    assert got.stride() == expected.stride()
    assert_close(got.cpu(), expected)


@pytest.mark.parametrize("layouts", [(True, False), (False, True), (True, True), (False, False)],
                         ids=["input", "weight", "both", "neither"])
def test_convolution_results_are_channels_last_when_an_operand_is(layouts):
    """Error bound: each output sums 27 products, 2 gamma_27 sum|x||w| < 4e-6 of it."""
    torch.manual_seed(0)
    x, w = torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3)
    if layouts[0]:
        x = x.to(memory_format=torch.channels_last)
    if layouts[1]:
        w = w.to(memory_format=torch.channels_last)
    results = []
    for device in ("cpu", "pto"):
        xd, wd = x.detach().to(device).requires_grad_(), w.detach().to(device).requires_grad_()
        y = torch.nn.functional.conv2d(xd, wd, padding=1)
        y.backward(torch.ones_like(y))
        results.append((y, xd.grad, wd.grad))
    for expected, got in zip(*results):
        assert got.stride() == expected.stride()
        assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_group_norm_of_a_channels_last_input(dtype):
    """torch's composite views the input as [1, N * groups, -1]: pto hands it a contiguous
    copy and returns the CPU's layout. Each side normalises groups of 32 values in
    float32, and both round once to the dtype: within one unit of the dtype's precision
    (2 eps |y| + float32's 2 gamma_32 error, far below it)."""
    torch.manual_seed(0)
    x = torch.randn(2, 6, 4, 4).to(dtype).to(memory_format=torch.channels_last)
    weight, bias = torch.randn(6).to(dtype), torch.randn(6).to(dtype)
    expected = torch.nn.functional.group_norm(x, 3, weight, bias)
    got = torch.nn.functional.group_norm(x.to("pto"), 3, weight.to("pto"), bias.to("pto"))
    assert got.stride() == expected.stride()
    eps = torch.finfo(dtype).eps
    assert_close(got.cpu().float(), expected.float(), rtol=2 * eps, atol=2 * eps)


def test_loss_and_activation_argument_errors_are_the_cpus():
    for device in ("cpu", "pto"):
        with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 4 classes"):
            torch.nn.functional.nll_loss(torch.randn(3, 4, device=device), torch.tensor([0, 1, 2], device=device),
                                         weight=torch.ones(3, device=device))
        x = torch.randn(3, device=device, requires_grad=True).clone()
        with pytest.raises(RuntimeError, match="In-place elu backward calculation is triggered with a negative slope"):
            torch.nn.functional.elu_(x, alpha=-2.0).sum().backward()


def test_cat_of_zero_dimensional_tensors_raises(python):
    """It wrote past its shape vector (SIGSEGV); in a fresh interpreter, as it once crashed."""
    result = python("""
        import torch
        for device in ("cpu", "pto"):
            for tensors in ([torch.tensor(1.0), torch.tensor(2.0)], [torch.ones(2), torch.tensor(2.0)]):
                try:
                    torch.cat([t.to(device) for t in tensors])
                except RuntimeError as error:
                    print(device, error)
    """)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == [line.replace("pto", "cpu", 1) for line in lines[2:]] and len(lines) == 4
    assert "zero-dimensional tensor (at position 1) cannot be concatenated" in lines[3]


OUT_DTYPE_CASES = {
    "lerp": lambda x, out: torch.lerp(x, x, 0.5, out=out),
    "logaddexp": lambda x, out: torch.logaddexp(x, x, out=out),
    "var": lambda x, out: torch.var(x, 0, out=out),
    "cat": lambda x, out: torch.cat([x], out=out),
}


@pytest.mark.parametrize("name", list(OUT_DTYPE_CASES))
def test_out_of_a_dtype_the_result_cannot_cast_to(name):
    """Refused with the CPU's exception type (cat's is a TypeError)."""
    op = OUT_DTYPE_CASES[name]
    kinds = []
    for device in ("cpu", "pto"):
        out = torch.full((2,), 7, dtype=torch.long, device=device)
        with pytest.raises(RuntimeError if name != "cat" else TypeError) as caught:
            op(torch.rand(3, 4, device=device), out)
        kinds.append(type(caught.value))
    assert kinds[0] is kinds[1]


def test_masked_fill_refuses_a_complex_value_for_a_real_tensor():
    for device in ("cpu", "pto"):
        x, mask = torch.zeros(3, dtype=torch.long, device=device), torch.tensor([True, False, True], device=device)
        for value in (torch.tensor(1 + 1j), 1 + 1j):
            with pytest.raises(RuntimeError, match="value cannot be converted to type int64_t without overflow"):
                x.clone().masked_fill_(mask, value)
        assert x.clone().masked_fill_(mask, torch.tensor(2.5)).cpu().tolist() == [2, 0, 2]


@pytest.mark.parametrize("value_dtype", [torch.float16, torch.float32, torch.float64, torch.int64])
@pytest.mark.parametrize("value_device", ["cpu", "pto"])
def test_masked_fill_converts_a_tensor_value_as_the_scalar_form(value_dtype, value_device):
    """A 0-dim value tensor converts as the Scalar form's value does: a float -3 into uint8
    was written as 253 on pto where the CPU raises; an integer -3 wraps on both, and a value
    that fits is written as on the CPU."""
    mask = torch.tensor([True, False, True])

    def fill(device, value):
        value = torch.tensor(value, dtype=value_dtype, device=value_device if device == "pto" else "cpu")
        return torch.zeros(3, dtype=torch.uint8, device=device).masked_fill(mask.to(device), value)

    if value_dtype.is_floating_point:
        for device in ("cpu", "pto"):
            with pytest.raises(RuntimeError, match="value cannot be converted to type uint8_t without overflow"):
                fill(device, -3)
    else:
        cpu, pto = on_both(lambda d: fill(d, -3))
        assert same_bytes(cpu, pto)
    cpu, pto = on_both(lambda d: fill(d, 7))
    assert same_bytes(cpu, pto)


@pytest.mark.parametrize("form", ["functional", "in-place", "out="])
def test_lerp_refuses_what_the_cpu_refuses(form):
    """lerp does not promote: an end of another dtype is refused, and integer or bool
    tensors have no kernel (pto computed both)."""
    def call(device, self_dtype, end_dtype):
        a = torch.ones(3, dtype=self_dtype, device=device)
        b = torch.full((3,), 2, dtype=end_dtype, device=device)
        if form == "in-place":
            return a.lerp_(b, 0.3)
        if form == "out=":
            return torch.lerp(a, b, 0.3, out=torch.empty(3, dtype=self_dtype, device=device))
        return torch.lerp(a, b, 0.3)

    for device in ("cpu", "pto"):
        with pytest.raises(RuntimeError, match="expected dtype double for `end` but got dtype float"):
            call(device, torch.float64, torch.float32)
        for dtype in (torch.int64, torch.bool):
            with pytest.raises(NotImplementedError, match="not implemented for"):
                call(device, dtype, dtype)
    cpu, pto = on_both(lambda d: call(d, torch.bfloat16, torch.bfloat16))
    assert same_bytes(cpu, pto)


@pytest.mark.parametrize("dtypes", [(torch.int64, torch.int64), (torch.bool, torch.bool), (torch.uint8, torch.int32)],
                         ids=str)
def test_logaddexp_of_integers_is_refused_as_on_the_cpu(dtypes):
    """The CPU's logaddexp kernel has no integer or bool instance; pto computed them in
    float32. A float operand beside an integer one still promotes."""
    for device in ("cpu", "pto"):
        a, b = (torch.arange(3, device=device).to(dtype) for dtype in dtypes)
        with pytest.raises(NotImplementedError, match="not implemented for"):
            torch.logaddexp(a, b)
    cpu, pto = on_both(lambda d: torch.logaddexp(torch.arange(3, device=d), torch.tensor(0.5, device=d)))
    assert_close(pto, cpu, rtol=0, atol=0)


REDUCTIONS_THE_CPU_REFUSES = {
    "argmax of bool": (RuntimeError, lambda d: torch.tensor([True, False], device=d).argmax()),
    "argmin of bool along a dim": (RuntimeError, lambda d: torch.tensor([[True, False]], device=d).argmin(1)),
    "median of bool": (NotImplementedError, lambda d: torch.tensor([True, False, True], device=d).median()),
    "nanmedian of bool along a dim": (NotImplementedError,
                                      lambda d: torch.tensor([[True, False, True]], device=d).nanmedian(1)),
    "kthvalue of bool": (NotImplementedError, lambda d: torch.tensor([True, False, True], device=d).kthvalue(2)),
    "-1 norm of an empty tensor": (RuntimeError, lambda d: torch.linalg.vector_norm(torch.ones(0, device=d), -1)),
    "-0.5 norm along an empty dim": (RuntimeError,
                                     lambda d: torch.linalg.vector_norm(torch.ones(3, 0, device=d), -0.5, dim=1)),
}


@pytest.mark.parametrize("case", REDUCTIONS_THE_CPU_REFUSES)
def test_reductions_refuse_what_the_cpu_refuses(case):
    """pto computed these (argmax of bools 0, the -1 norm of nothing inf); the CPU raises."""
    error, make = REDUCTIONS_THE_CPU_REFUSES[case]
    with pytest.raises(error) as on_cpu:
        make("cpu")
    with pytest.raises(error, match=re.escape(str(on_cpu.value).splitlines()[0][:40])):
        make("pto")


@pytest.mark.parametrize("dim", [None, 0])
def test_mean_of_complex_into_a_real_dtype_as_on_the_cpu(dim):
    """mean(complex, dtype=float64) takes the real parts on the CPU; pto raised that it
    had no complex dtype."""
    def make(device):
        x = torch.tensor([0.5 + 1j, 1.25 - 2j, -3 + 0j], device=device)
        return x.mean(dtype=torch.float64) if dim is None else x.mean(dim, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the CPU's about the discarded imaginary part, the fallback's
        cpu, pto = on_both(make)
    assert_close(pto, cpu, rtol=0, atol=0)


F = torch.nn.functional
ACTIVATIONS_ON_FLOATS_ONLY = {
    "elu": F.elu, "selu": F.selu, "celu": F.celu, "hardsigmoid": F.hardsigmoid, "hardswish": F.hardswish,
    "mish": F.mish, "softplus": F.softplus, "leaky_relu": F.leaky_relu, "leaky_relu_": F.leaky_relu_,
    "glu": lambda x: F.glu(x.reshape(2, 2)), "prelu": lambda x: F.prelu(x, torch.ones(1, dtype=x.dtype, device=x.device)),
}


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8, torch.bool, torch.complex64], ids=str)
@pytest.mark.parametrize("name", ACTIVATIONS_ON_FLOATS_ONLY)
def test_activations_refuse_the_dtypes_the_cpu_kernels_lack(name, dtype):
    """The CPU's kernels of these dispatch on floating types only; pto's compositions
    computed integers and bool (softplus of an int64 tensor came back int64)."""
    op = ACTIVATIONS_ON_FLOATS_ONLY[name]
    for device in ("cpu", "pto"):
        x = torch.tensor([1.0, -2.0, 0.0, 3.0], device=device).to(dtype)
        try:
            op(x)
        except (NotImplementedError, RuntimeError) as error:
            raised = type(error)
        else:
            raised = None
        if device == "cpu":
            expected = raised
        else:
            assert raised is expected, f"{name} {dtype}: the CPU raised {expected}, pto {raised}"


@pytest.mark.parametrize("call, error, message", [
    (lambda x: F.hardtanh(x.bool()), RuntimeError, "Bool inputs not supported for hardtanh"),
    (lambda x: F.hardtanh_(x.to(torch.uint8)), RuntimeError, "unsigned type with negative limits"),
    (lambda x: F.relu6(x.to(torch.complex64)), NotImplementedError, "clamp is not supported for complex types"),
    (lambda x: x.to(torch.complex64).clamp(0, 1), NotImplementedError, "clamp is not supported for complex types"),
    (lambda x: F.threshold(x.bool(), 0.5, 2), NotImplementedError, "not implemented for 'Bool'"),
    (lambda x: torch.logit(x.to(torch.complex64)), NotImplementedError, "not implemented for 'ComplexFloat'"),
], ids=["hardtanh bool", "hardtanh_ uint8", "relu6 complex", "clamp complex", "threshold bool", "logit complex"])
def test_clamps_and_thresholds_refuse_as_the_cpu(call, error, message):
    for device in ("cpu", "pto"):
        with pytest.raises(error, match=message):
            call(torch.tensor([1.0, -2.0, 0.0, 3.0], device=device))


@pytest.mark.parametrize("value", [1.0, torch.tensor(1.0)], ids=["scalar", "tensor"])
def test_index_fill_takes_int64_indices_only(value):
    """torch's index_fill_ checks the index's dtype for every device; pto took int32 too."""
    for device in ("cpu", "pto"):
        x, index = torch.zeros(3, 4, device=device), torch.tensor([0, 2], dtype=torch.int32, device=device)
        with pytest.raises(IndexError, match="index_fill_\\(\\): Expected dtype int64 for index."):
            x.index_fill(1, index, value)


def test_deterministic_mode_fills_new_memory():
    """use_deterministic_algorithms(True): empty and resize_ fill NaN / the largest value."""
    def make(device):
        torch.use_deterministic_algorithms(True)
        try:
            grown = torch.zeros(2, device=device)
            grown.resize_(5)
            return (torch.empty(3, device=device), torch.empty(2, dtype=torch.int32, device=device),
                    torch.empty_strided((2, 2), (1, 2), dtype=torch.complex64, device=device), grown)
        finally:
            torch.use_deterministic_algorithms(False)
    for cpu, pto in zip(*on_both(make)):
        assert same_bytes(cpu, pto)


def test_is_set_to_compares_metadata_on_the_device():
    t = torch.empty(3, 4, device="pto")
    assert t.is_set_to(torch.tensor([], device="pto").set_(t))
    assert not t.is_set_to(t.clone()) and not t.is_set_to(t.view(4, 3))


@pytest.mark.parametrize("op", ["masked_fill_", "index_fill_ along a repeated dim", "index_fill_"])
def test_inplace_fills_of_an_expanded_tensor_warn_and_write_each_element(op):
    def run(device):
        x = torch.zeros(1, 3, device=device).expand(4, 3)
        with pytest.warns(UserWarning, match="on expanded tensors is deprecated"):
            if op == "masked_fill_":
                x.masked_fill_(torch.tensor([[False, True, False]] + [[False] * 3] * 3, device=device), 5.0)
            else:
                x.index_fill_(0 if "repeated" in op else 1, torch.tensor([2], device=device), 7.0)
        return x
    cpu, pto = on_both(run)
    assert torch.equal(cpu, pto)


@pytest.mark.parametrize("draw", ["bernoulli_", "normal_", "uniform_"])
def test_random_draws_refuse_an_expanded_tensor(draw):
    x = torch.zeros(1, device="pto").expand(6)
    with pytest.raises(RuntimeError, match="unsupported operation"):
        getattr(x, draw)()
    assert torch.zeros(6, device="pto").bernoulli_().shape == (6,)


@pytest.mark.parametrize("case", ["1 - mask", "mask - 1", "mask - mask"])
def test_subtraction_with_a_bool_tensor_raises(case):
    mask = torch.tensor([True, False], device="pto")
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with"):
        {"1 - mask": lambda: 1 - mask, "mask - 1": lambda: mask - 1, "mask - mask": lambda: mask - mask}[case]()


def _layouts():
    contiguous = torch.rand(4, 3, 5, 5)
    channels_last = torch.rand(4, 3, 5, 5).contiguous(memory_format=torch.channels_last)
    ambiguous = torch.rand(4, 3, 1, 1).contiguous(memory_format=torch.channels_last)
    return {"contiguous": contiguous, "channels_last": channels_last, "ambiguous": ambiguous,
            "bias": torch.rand(3, 1, 1), "permuted": contiguous.permute(0, 2, 3, 1), "sliced": channels_last[:, :, ::2],
            "sliced last dim": torch.randn(1, 1, 4, 12)[:, :, :, ::2]}


@pytest.mark.parametrize("op", ["add", "eq", "add out=empty", "where", "addcmul", "lerp", "exp", "mul by 5"])
def test_elementwise_results_are_laid_out_as_tensoriterator_lays_out_the_cpus(op):
    """The inputs' stride order (the first input's where they disagree), an ambiguous
    (N, C, 1, 1) input keeps its strides, an out= resized from empty likewise."""
    def run(a, b):
        if op == "add out=empty":
            out = torch.empty(0, device=a.device)
            return torch.add(a, b, out=out)
        return {"add": lambda: a + b, "eq": lambda: torch.eq(a, b), "where": lambda: torch.where(a > 0.5, a, b),
                "addcmul": lambda: torch.addcmul(a, a, b), "lerp": lambda: a.lerp(b.expand_as(a), 0.5),
                "exp": lambda: torch.exp(a), "mul by 5": lambda: a * 5}[op]()
    layouts = _layouts()
    for (na, a), (nb, b) in [(x, y) for x in layouts.items() for y in layouts.items()]:
        try:
            expected = run(a, b)
        except RuntimeError:
            continue
        got = run(a.to("pto"), b.to("pto"))
        assert got.stride() == expected.stride(), (na, nb)
        # exp: two libraries' results within 1 ulp each differ by at most 2 ulp
        # (2^-22 relative); the other ops round one exact result once: equal.
        assert_close(got.cpu(), expected, rtol=2.0 ** -22 if op == "exp" else 0, atol=0)


def test_overlap_errors_come_before_the_cpu_fallback():
    """TensorIterator's 'unsupported operation' even for a dtype pto runs on the CPU."""
    x = torch.rand(3, device="pto")
    with pytest.raises(RuntimeError, match="unsupported operation"):
        x[:-1] <<= x[1:]
    with pytest.raises(RuntimeError, match="unsupported operation"):
        torch.exp(x[1:], out=x[:-1])


def test_put_without_accumulate_is_flagged_nondeterministic():
    a = torch.randn(10, device="pto")
    index, values = torch.tensor([0, 0], device="pto"), torch.tensor([0.0, 1.0], device="pto")
    torch.use_deterministic_algorithms(True)
    try:
        with pytest.raises(RuntimeError, match="put_ does not have a deterministic implementation"):
            a.put_(index, values)
        a.put_(index, values, accumulate=True)
    finally:
        torch.use_deterministic_algorithms(False)


def test_threshold_native_in_place_on_an_expanded_tensor():
    """Idempotent, so the CPU allows it in place on a tensor whose elements repeat."""
    x = torch.randn(1, 6, device="pto").expand(6, 6)
    expected = torch.nn.functional.threshold(x.cpu().contiguous(), 0.5, 0.5)
    torch.nn.functional.threshold(x, 0.5, 0.5, inplace=True)
    assert torch.equal(x.cpu(), expected)
    values = torch.tensor([float("nan"), 0.3, 0.5, 0.7], device="pto")
    assert same_bytes(torch.nn.functional.threshold(values, 0.5, -2.0).cpu(),
                      torch.nn.functional.threshold(values.cpu(), 0.5, -2.0))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
                                   torch.bfloat16, torch.float32, torch.float64])
def test_threshold_takes_its_numbers_as_the_cpus_kernel(dtype):
    """tthreshold's numbers are the CPU kernel's: an integer dtype's truncated toward 0
    (-1.5 is -1, so -1 is replaced), uint8's -1 wrapped to 255 (its -1.5 refused);
    float16/bfloat16 compare with the threshold in float32, unrounded (bfloat16(0.1) =
    0.10009765625 is above 0.1 and kept), and take the value rounded to the dtype.
    Numbers that do not fit the dtype raise the CPU's error; no fallback."""
    x = torch.tensor([-3, -2, -1, 0, 1, 2, 3, 100, 0.1, 0.2, -0.1, 1.5]).to(dtype)
    before = pypto_torch.fallback_ops()
    too_large = 300 if dtype == torch.uint8 else 1e300
    for threshold, value in [(-1.5, 7.9), (0.1, 5.0), (-1, 9), (1.5, -2.25), (2, 0), (too_large, 0), (0, too_large)]:
        assert_same_outcome(lambda d: torch.threshold(x.to(d), threshold, value))
        assert_same_outcome(lambda d: torch.ops.aten.threshold_backward(x.to(d), x.flip(0).to(d), threshold))
    assert pypto_torch.fallback_ops() == before


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16,
                                   torch.bfloat16, torch.float32])
def test_heaviside_runs_every_dtype_and_refuses_as_the_cpu(dtype):
    """theaviside for bool, integers and floats (b where a is 0, else a > 0), broadcast
    and in place, without a fallback; operands of two dtypes and complex ones get the
    CPU's errors."""
    a = torch.tensor([[-2, 0, 3, 1], [0, 0, -1, 5]]).to(dtype)
    b = torch.tensor([7, 0, 1, 9]).to(dtype)
    before = pypto_torch.fallback_ops()
    assert_same_outcome(lambda d: torch.heaviside(a.to(d), b.to(d)))
    assert_same_outcome(lambda d: a.to(d).heaviside_(b[1].to(d)))
    assert pypto_torch.fallback_ops() == before
    other = torch.float64 if dtype != torch.float64 else torch.float32
    assert_same_outcome(lambda d: torch.heaviside(a.to(d), b.to(other).to(d)))
    assert_same_outcome(lambda d: torch.heaviside(a.to(torch.complex64).to(d), b.to(torch.complex64).to(d)))


CLAMP_X = torch.tensor([[1.0, float("nan"), 3.0, -5.0], [0.5, 2.5, -0.0, 9.0]])
CLAMP_LOW = torch.tensor([0.0, 0.0, float("nan"), -1.0])
CLAMP_HIGH = torch.tensor([2.0, 2.0, 2.0, float("nan")])
CLAMP_INT = torch.tensor([[1, 5, -3, 7], [0, 2, 2, -9]])


@pytest.mark.parametrize("call", [
    lambda d: torch.clamp(CLAMP_X.to(d), CLAMP_LOW.to(d), CLAMP_HIGH.to(d)),
    lambda d: torch.clamp(CLAMP_X.to(d), min=CLAMP_LOW.to(d)),
    lambda d: torch.clamp_max(CLAMP_X.to(d), CLAMP_HIGH.to(d)),
    lambda d: CLAMP_X.clone().to(d).clamp_max_(CLAMP_HIGH.to(d)),
    lambda d: torch.clamp_min(CLAMP_X.to(d), CLAMP_LOW.to(d), out=torch.empty(0, device=d)),
    lambda d: torch.clamp(CLAMP_X[:, :1].to(d), CLAMP_LOW.to(d), CLAMP_HIGH.bfloat16().to(d)),
    lambda d: torch.clamp(CLAMP_INT.to(d), min=torch.full((4,), 0.5).to(d)),
    lambda d: torch.clamp(CLAMP_INT.to(torch.int8).to(d), torch.zeros(4, dtype=torch.long).to(d),
                          torch.full((4,), 3).to(d)),
    lambda d: CLAMP_X.clone().to(d).clamp_(CLAMP_LOW.double().to(d), CLAMP_HIGH.double().to(d)),
    lambda d: torch.clamp(CLAMP_X.to(d), CLAMP_LOW.to(d), CLAMP_HIGH.to(d),
                          out=torch.empty(0, dtype=torch.float64, device=d)),
    lambda d: torch.clamp(CLAMP_X.to(d), torch.tensor(0.0, dtype=torch.float64).to(d), torch.tensor(1.0).to(d)),
], ids=["both", "min", "clamp_max", "clamp_max_", "clamp_min out", "broadcast bfloat16 bound",
        "integer with float bound", "int8 with int64 bounds", "float32 in place with float64 bounds",
        "float64 out", "0-dim bounds"])
def test_clamp_with_tensor_bounds_is_native(call):
    """clamp, clamp_min and clamp_max with tensor bounds: the CPU's promotion of self and
    its bounds, NaN from self or either bound (one bound: maximum/minimum's), broadcast
    bounds, an out or an in-place self of any dtype the result safely casts to; no
    fallback."""
    before = pypto_torch.fallback_ops()
    expected, got = call("cpu"), call("pto").cpu()
    assert pypto_torch.fallback_ops() == before
    assert got.dtype == expected.dtype
    assert_close(got, expected, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("call", [
    lambda d: CLAMP_INT.clone().to(d).clamp_(min=torch.full((4,), 0.5).to(d)),
    lambda d: torch.clamp(CLAMP_X.to(d), CLAMP_LOW.to(d), CLAMP_HIGH.to(d),
                          out=torch.empty(0, dtype=torch.int32, device=d)),
    lambda d: torch.ones(4).to(d).clamp_(min=torch.zeros(2, 4).to(d)),
    lambda d: torch.ones(4).to(d).clamp_(torch.zeros(2, 4).to(d), torch.ones(4).to(d)),
    lambda d: torch.ops.aten.clamp.Tensor(CLAMP_X.to(d), None, None),
    lambda d: torch.clamp(torch.tensor([1j]).to(d), min=torch.tensor([0j]).to(d)),
], ids=["integer in place with a float bound", "int32 out of a float result", "in place, bound broadcast larger",
        "in place, both bounds broadcast larger", "no bound", "complex"])
def test_clamp_with_tensor_bounds_refuses_as_the_cpu(call):
    assert_raises_as_cpu(call)


@pytest.mark.parametrize("call", [
    lambda d: torch.zeros(3, 4, device=d).fill_(torch.tensor(2.5, device=d)),
    lambda d: torch.zeros(3, dtype=torch.int32, device=d).fill_(torch.tensor(2.7, device=d)),
    lambda d: torch.zeros(4, 4, device=d).t().fill_(torch.tensor(3.0, dtype=torch.float64, device=d)),
    lambda d: torch.zeros(3, dtype=torch.bool, device=d).fill_(torch.tensor(True, device=d)),
    lambda d: (lambda t: t.fill_(t[1]))(torch.arange(4.0, device=d)),
    lambda d: torch.zeros(1, device=d).expand(3).fill_(torch.tensor(2.0, device=d)),
    lambda d: torch.zeros(3, device=d).fill_(torch.tensor([1.5], device=d)),
], ids=["float", "float into int32", "transposed, float64 value", "bool", "value aliasing self", "expanded self",
        "1-d value"])
def test_fill_with_a_tensor_is_native(call):
    """fill_ with a 0-dim tensor of self's device: a copy on the device (no read on the host),
    as the CPU's; an expanded self and a value of one dimension get its errors."""
    before = pypto_torch.fallback_ops()
    assert_same_outcome(call)
    assert pypto_torch.fallback_ops() == before


def test_fill_with_a_host_value_fills_each_element_of_an_expanded_tensor():
    """A 0-dim CPU value is read as a number (fill_.Scalar's path, as on CUDA), which fills
    each distinct element of an expanded self."""
    base = torch.zeros(1, device="pto")
    base.expand(3).fill_(torch.tensor(2.0))
    assert base.cpu().item() == 2.0


@pytest.mark.parametrize("case", [
    ("negative", lambda d: torch.nn.functional.one_hot(torch.tensor([3, 4, -1, 0], device=d), -1)),
    ("too large", lambda d: torch.nn.functional.one_hot(torch.tensor([3, 4, 1, 0], device=d), 3)),
    ("empty", lambda d: torch.nn.functional.one_hot(torch.tensor([], dtype=torch.long, device=d))),
    ("float", lambda d: torch.nn.functional.one_hot(torch.tensor([1.0], device=d))),
], ids=lambda c: c[0])
def test_one_hot_checks_class_values_at_the_call(case):
    """The CPU's errors, raised at the call (no kernel error left for a later call)."""
    _, make = case
    with pytest.raises(RuntimeError) as cpu_error:
        make("cpu")
    with pytest.raises(RuntimeError, match=cpu_error.value.args[0].split(".")[0]):
        make("pto")
    cpu, pto = on_both(lambda d: torch.nn.functional.one_hot(torch.tensor([[3], [1]], device=d)))
    assert torch.equal(cpu, pto)


def test_channel_shuffle_native_with_its_gradient_and_layout():
    torch.manual_seed(0)
    x = torch.randn(2, 6, 3, 3).to(memory_format=torch.channels_last).requires_grad_()
    xp = x.detach().to("pto").requires_grad_()
    expected, got = torch.channel_shuffle(x, 3), torch.channel_shuffle(xp, 3)
    assert got.stride() == expected.stride() and torch.equal(got.cpu(), expected)
    (expected * torch.arange(expected.numel()).view_as(expected)).sum().backward()
    (got * torch.arange(got.numel(), device="pto").view_as(got)).sum().backward()
    assert torch.equal(xp.grad.cpu(), x.grad)
    with pytest.raises(RuntimeError, match="Number of channels must be divisible by groups"):
        torch.channel_shuffle(xp, 4)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64], ids=str)
def test_nearest_upsampling_refuses_the_dtypes_the_cpu_refuses(dtype):
    x = torch.ones(1, 3, 4, 4, dtype=dtype)
    with pytest.raises(RuntimeError, match="not implemented for"):
        torch.nn.functional.interpolate(x, scale_factor=2)
    with pytest.raises(RuntimeError, match="not implemented for"):
        torch.nn.functional.interpolate(x.to("pto"), scale_factor=2)


@pytest.mark.parametrize("case", ["tensor ** complex", "complex ** tensor", "out="])
def test_complex32_pow_computes_in_complex64_as_cuda(case):
    """The CPU has no complex32 pow kernel; CUDA's computes in complex64 and rounds once:
    so pto's result is the complex64 result (computed on the CPU here) rounded."""
    x = torch.tensor([1.5, 2.0, -0.5], dtype=torch.float16)
    def run(t):
        if case == "tensor ** complex":
            return t ** (1 + 1j)
        if case == "complex ** tensor":
            return (2.2 - 1.6j) ** t
        out = torch.empty(0, dtype=torch.complex32, device=t.device)
        return torch.pow(t, 0.5j, out=out)
    got = run(x.to("pto"))
    assert got.dtype == torch.complex32
    assert same_bytes(got.cpu(), run(x.to(torch.complex64)).to(torch.complex32))


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_into_an_expanded_tensor_writes_memory_as_the_cpu(accumulate):
    """Each write lands where its element lives: the last one wins, or all add up."""
    def run(device):
        x = torch.zeros(1, 3, device=device).expand(4, 3)
        with pytest.warns(UserWarning, match="index_put_ on expanded tensors is deprecated"):
            x.index_put_((torch.tensor([0, 2, 0], device=device), torch.tensor([1, 1, 2], device=device)),
                         torch.tensor([5.0, 6.0, 7.0], device=device), accumulate=accumulate)
        return x
    cpu, pto = on_both(run)
    assert torch.equal(cpu, pto)


def test_legacy_storage_classes_of_pto_tensors():
    """tensor.storage_type() names torch.pto's class, as torch.cuda's for CUDA tensors
    (PyTorch's test_tensor_storage_type expects the CPU's class for any device but CUDA)."""
    x = torch.zeros(3, device="pto")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # TypedStorage's deprecation
        assert x.storage_type() is torch.pto.FloatStorage
        assert x.long().storage_type() is torch.pto.LongStorage
        assert isinstance(x.storage(), torch.pto.FloatStorage) and not isinstance(x.storage(), torch.FloatStorage)
        storage = torch.pto.BFloat16Storage(4)
        assert storage.device.type == "pto" and storage.dtype == torch.bfloat16 and len(storage) == 4


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn], ids=str)
def test_fill_of_dtypes_pto_lacks_goes_through_the_cpu(dtype):
    """fill_'s range check covers PTO's dtypes; the others fill on the CPU, which checks."""
    cpu, pto = on_both(lambda d: torch.zeros(3, dtype=dtype, device=d).fill_(3))
    assert same_bytes(cpu, pto)


def cpu_error(op, *args):
    """The CPU's exception for op(*args on the CPU): type and message, for pto to match."""
    with pytest.raises(Exception) as caught:
        op(*args)
    return type(caught.value), str(caught.value).splitlines()[0]


INPLACE_SHAPE_CASES = {
    "logical_and_": lambda d: torch.ones(5, 1, device=d).logical_and_(torch.ones(5, device=d)),
    "logical_xor_": lambda d: torch.ones(5, 1, device=d).logical_xor_(torch.ones(5, device=d)),
    "addr_-0d": lambda d: torch.tensor(1.0, device=d).addr_(torch.ones(5, device=d), torch.ones(10, device=d)),
    "addr_-broadcast": lambda d: torch.ones(5, 1, device=d).addr_(torch.ones(5, device=d), torch.ones(10, device=d)),
    "logit_-int": lambda d: torch.ones(3, dtype=torch.long, device=d).logit_(),
    "lerp_-broadcast": lambda d: torch.ones(3, 1, device=d).lerp_(torch.ones(3, device=d), 0.5),
}


@pytest.mark.parametrize("name", list(INPLACE_SHAPE_CASES))
def test_inplace_ops_refuse_to_grow_or_recast_self(name):
    """An in-place op's result must have self's shape and cast to its dtype: pto returned
    a resized or silently cast self where the CPU raises."""
    make = INPLACE_SHAPE_CASES[name]
    kind, message = cpu_error(make, "cpu")
    with pytest.raises(kind) as caught:
        make("pto")
    assert str(caught.value).splitlines()[0] == message
    assert torch.ones(2, device="pto").add(1).cpu().tolist() == [2, 2]  # the device still computes


def test_addr_in_place_of_the_right_shape_matches_the_cpu():
    torch.manual_seed(0)
    self, a, b = torch.randn(4, 3), torch.randn(4), torch.randn(3)
    cpu, pto = on_both(lambda d: self.to(d, copy=True).addr_(a.to(d), b.to(d), beta=0.5, alpha=2))
    assert_close(pto, cpu)


@pytest.mark.parametrize("case", ["empty normalized_shape", "weight shape", "bias shape"])
def test_layer_norm_shape_errors_are_the_cpus(case):
    x = torch.randn(1, 2, 3)
    args = {"empty normalized_shape": ((), None, None), "weight shape": ((2, 3), torch.ones(1, 2), None),
            "bias shape": ((2, 3), None, torch.ones(3))}[case]
    run = lambda d: torch.native_layer_norm(x.to(d), args[0], *[a if a is None else a.to(d) for a in args[1:]], 1e-5)
    kind, message = cpu_error(run, "cpu")
    with pytest.raises(kind, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")):
        run("pto")


def test_softshrink_refuses_a_negative_lambda_as_the_cpu():
    for device in ("cpu", "pto"):
        with pytest.raises(RuntimeError, match=r"lambda must be in range \[0, .*\] for input dtype Float, but found -0.5"):
            torch.nn.functional.softshrink(torch.ones(2, device=device), -0.5)


def test_native_group_norm_wants_an_input_dense_in_its_memory_format():
    for device in ("cpu", "pto"):
        strided = torch.randn(1, 6, 6).to(device)[..., ::2]  # sliced on the device: .to() would densify it
        with pytest.raises(RuntimeError, match=r"Expected X.is_contiguous\(memory_format\) to be true"):
            torch.native_group_norm(strided, None, None, 1, 6, 3, 2, 0.5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_reduced_precision_group_norm_and_softplus_compute_in_float32_as_the_cpu(dtype):
    """They rounded every step to the dtype (group_norm 11 bfloat16 ulps off the CPU's)."""
    torch.manual_seed(0)
    x, w, b = torch.randn(4, 6, 5, dtype=dtype), torch.randn(6, dtype=dtype), torch.randn(6, dtype=dtype)
    cpu, pto = on_both(lambda d: torch.nn.functional.group_norm(x.to(d), 2, w.to(d), b.to(d), eps=0.5))
    exact = torch.nn.functional.group_norm(x.double(), 2, w.double(), b.double(), eps=0.5)
    # Both round a float32 result once: each within one unit in the last place of exact.
    ulp = torch.finfo(dtype).eps * exact.abs().clamp_min(torch.finfo(dtype).tiny)
    assert ((pto.double() - exact).abs() <= ulp + 1e-6).all() and ((cpu.double() - exact).abs() <= ulp + 1e-6).all()
    y = torch.randn(1000, dtype=dtype)
    cpu, pto = on_both(lambda d: torch.nn.functional.softplus(y.to(d), beta=3, threshold=0.2))
    assert same_bytes(cpu, pto)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_reduced_precision_grid_sample_samples_in_float32(dtype):
    """The CPU's kernel computes pixel positions in the dtype: wrong pixels at a width of
    600, and reads outside a 345 x 456 image (NaN, garbage, a crash). pto samples in
    float32 and rounds once: within one rounding of the float64 result."""
    torch.manual_seed(0)
    x = torch.randn(1, 2, 40, 600, dtype=dtype)
    grid = (torch.rand(1, 40, 600, 2) * 2 - 1).to(dtype)
    exact = torch.nn.functional.grid_sample(x.double(), grid.double(), align_corners=False)
    got = torch.nn.functional.grid_sample(x.to("pto"), grid.to("pto"), align_corners=False).cpu()
    # One rounding to the dtype (eps/2 of |exact|), plus what float32 positions cost: a
    # position up to W = 600 pixels off by a few float32 roundings (2 W eps32 pixels),
    # each pixel of it moving the blend by at most the range of x (2 max|x|).
    position = 2 * 600 * torch.finfo(torch.float32).eps * 2 * x.double().abs().max()
    bound = torch.finfo(dtype).eps / 2 * exact.abs() + position
    assert ((got.double() - exact).abs() <= bound).all()
    cpu = torch.nn.functional.grid_sample(x, grid, align_corners=False)
    assert not ((cpu.double() - exact).abs() <= bound).all()  # the bound tells the CPU's kernel apart
    inputs = x.to("pto").requires_grad_()
    torch.nn.functional.grid_sample(inputs, grid.to("pto"), align_corners=False).sum().backward()
    assert inputs.grad.dtype == dtype and inputs.grad.isfinite().all()


def test_complex_conj_physical_in_place_and_svd_into_out():
    """conj_physical_ calls a CPU/CUDA DispatchStub itself: pto raised "DispatchStub:
    missing kernel for pto", there and in svd's out= of a complex input, which resolves
    a conjugate with it."""
    torch.manual_seed(0)
    a = torch.randn(4, 3, dtype=torch.complex64)
    cpu, pto = on_both(lambda d: a.to(d, copy=True).conj_physical_())
    assert same_bytes(cpu, pto)

    def svd_into_out(device):
        outs = tuple(torch.empty(0, dtype=t, device=device) for t in (torch.complex64, torch.float32, torch.complex64))
        torch.svd(a.to(device), out=outs)
        return outs[0] @ torch.diag(outs[1]).to(outs[0].dtype) @ outs[2].mH  # U S V^H, unique where U is not

    cpu, pto = on_both(svd_into_out)
    # U S V^H rebuilds a within a few float32 roundings of its entries (|a| ~ 1, 4 x 3).
    assert_close(cpu, a, atol=1e-5, rtol=1e-5)
    assert_close(pto, a, atol=1e-5, rtol=1e-5)


OUT_DTYPE_ERRORS = {
    "bitwise_not bool into int64": lambda d: torch.bitwise_not(torch.ones(3, dtype=torch.bool, device=d),
                                                             out=torch.empty(3, dtype=torch.long, device=d)),
    "abs int32 into int64": lambda d: torch.abs(torch.ones(3, dtype=torch.int32, device=d),
                                                out=torch.empty(3, dtype=torch.long, device=d)),
    "floor float32 into float64": lambda d: torch.floor(torch.ones(3, device=d),
                                                        out=torch.empty(3, dtype=torch.double, device=d)),
    "where float32 into float64": lambda d: torch.where(torch.ones(3, dtype=torch.bool, device=d), torch.ones(3, device=d),
                                                        torch.ones(3, device=d),
                                                        out=torch.empty(3, dtype=torch.double, device=d)),
    "ldexp_ complex growing self": lambda d: torch.ones(5, 1, dtype=torch.complex64, device=d).ldexp_(
        torch.ones(5, dtype=torch.complex64, device=d)),
    "all into float32": lambda d: torch.all(torch.ones(3, device=d), out=torch.empty(0, device=d)),
    "any over dim 0 into int64": lambda d: torch.any(torch.ones(3, 2, device=d), 0,
                                                     out=torch.empty(0, dtype=torch.long, device=d)),
    "all over dims into float64": lambda d: torch.all(torch.ones(3, 2, device=d), (0, 1),
                                                      out=torch.empty(0, dtype=torch.double, device=d)),
}


@pytest.mark.parametrize("name", list(OUT_DTYPE_ERRORS))
def test_outs_the_cpu_refuses_without_a_cast(name):
    """Ops the CPU builds with check_all_same_dtype (abs, neg, floor, bitwise_not ...) and
    where take an out of exactly their result's dtype; pto cast into any castable one."""
    make = OUT_DTYPE_ERRORS[name]
    kind, message = cpu_error(make, "cpu")
    with pytest.raises(kind) as caught:
        make("pto")
    assert str(caught.value).splitlines()[0] == message


def test_all_and_any_of_uint8_into_a_bool_out():
    x = torch.tensor([[1, 0], [2, 3]], dtype=torch.uint8)
    for op in (torch.all, torch.any):
        cpu, pto = on_both(lambda d: op(x.to(d), 1, out=torch.empty(0, dtype=torch.bool, device=d)))
        assert same_bytes(cpu, pto)


CLAMP_PROMOTION_CASES = {
    "clamp int by 0.5": lambda d: torch.arange(4, device=d).clamp(0.5),
    "clamp int below 2.5": lambda d: torch.arange(4, device=d).clamp(max=2.5),
    "clamp_min int by 1.5": lambda d: torch.clamp_min(torch.arange(4, device=d), 1.5),
    "clamp int32 by ints": lambda d: torch.arange(4, dtype=torch.int32, device=d).clamp(1, 2),
    "hardtanh int keeps its dtype": lambda d: torch.nn.functional.hardtanh(torch.arange(-3, 3, device=d), -1.5, 2.5),
}


@pytest.mark.parametrize("name", list(CLAMP_PROMOTION_CASES))
def test_clamp_promotes_with_its_bounds_as_the_cpu(name):
    """clamp's result type is self's promoted with the bounds: pto cast 0.5 to an integer
    tensor's dtype (0) and returned [0, 1, 2, 3] as int64 where the CPU gives [0.5, 1, 2, 3]."""
    cpu, pto = on_both(CLAMP_PROMOTION_CASES[name])
    assert same_bytes(cpu, pto)


def test_clamp_in_place_refuses_a_bound_its_dtype_cannot_hold():
    for device in ("cpu", "pto"):
        with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type"):
            torch.arange(4, device=device).clamp_(0.5, 2.5)


def test_nansum_refuses_complex_inputs_as_the_cpu():
    """pto summed a complex tensor (nan+1j for [1+1j, nan, 2]) where the CPU refuses it."""
    for device in ("cpu", "pto"):
        x = torch.tensor([1 + 1j, complex("nan"), 2], device=device)
        for call in (lambda: torch.nansum(x), lambda: torch.nansum(x, 0),
                     lambda: torch.nansum(x, 0, out=torch.empty((), dtype=x.dtype, device=device))):
            with pytest.raises(RuntimeError, match="nansum (on CPU )?does not support complex inputs"):
                call()
    assert torch.nansum(torch.tensor([1.0, float("nan")], device="pto")).item() == 1.0
