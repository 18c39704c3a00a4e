"""The seed-style pypto API (`import pypto_torch as pypto`): creation, dtypes and layouts,
zero-copy interop with torch and NumPy, Context and devices, every op against torch on
the CPU, NHWC conv2d, and the errors the origin warns about."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import pypto_torch as pypto
from error_bounds import (Bound, assert_within_bound, conv_bound, gamma, matmul_bound, normalization_bounds,
                          normalize_bound, rms_norm_bound, softmax_bound, sum_bound)
from pypto_torch import api


@pytest.fixture(autouse=True)
def _fresh_device_state():
    """Every test starts and ends with no pypto device chosen (the current torch.pto one, pto:0)."""
    api._state.on_cpu = False
    torch.pto.set_device(0)
    yield
    api._state.on_cpu = False
    torch.pto.set_device(0)


PTO0 = torch.device("pto", 0)
PTO1 = torch.device("pto", 1)
CPU = torch.device("cpu")


def softmax_pypto(x, axis=-1):
    x_max = pypto.reduce_max(x, axis=axis, keepdims=True)
    e = pypto.exp(x - x_max)
    return e / pypto.reduce_sum(e, axis=axis, keepdims=True)


# ---------------------------------------------------------------- dtypes


@pytest.mark.parametrize("name, dtype", [
    ("float16", torch.float16), ("float32", torch.float32), ("float64", torch.float64),
    ("bfloat16", torch.bfloat16), ("int8", torch.int8), ("int16", torch.int16), ("int32", torch.int32),
    ("int64", torch.int64), ("uint8", torch.uint8), ("bool", torch.bool), ("half", torch.float16),
    ("fp16", torch.float16), ("bf16", torch.bfloat16), ("float", torch.float32), ("double", torch.float64),
])
def test_dtype_strings_as_the_origin_writes_them(name, dtype):
    assert pypto.as_dtype(name) == dtype
    assert pypto.zeros(2, 3, dtype=name).dtype == dtype
    assert pypto.tensor([1, 0, 1], dtype=name).dtype == dtype


def test_torch_and_numpy_dtypes_are_accepted():
    assert pypto.ones(2, dtype=torch.bfloat16).dtype == torch.bfloat16
    assert pypto.ones(2, dtype=np.float16).dtype == torch.float16
    assert pypto.ones(2, dtype=np.dtype("int32")).dtype == torch.int32
    assert pypto.ones(2, dtype="torch.float64").dtype == torch.float64


def test_unknown_dtype_string_lists_the_valid_names():
    with pytest.raises(ValueError, match="unknown dtype 'float17'") as error:
        pypto.zeros(2, dtype="float17")
    for name in ("float16", "bfloat16", "float32", "int32", "int64", "bool"):
        assert name in str(error.value)
    with pytest.raises(ValueError, match="unknown dtype"):
        pypto.as_dtype(object)


# ---------------------------------------------------------------- creation


@pytest.mark.parametrize("create", [pypto.randn, pypto.rand, pypto.zeros, pypto.ones, pypto.empty])
def test_shape_factories_put_tensors_on_the_current_device(create):
    for x in (create(2, 3), create((2, 3)), create([2, 3], dtype="float16")):
        assert x.device == PTO0 and x.shape == (2, 3)
    assert create(4, dtype="bfloat16").dtype == torch.bfloat16
    assert create(2, 3, layout="NHWC").pypto_layout == "NHWC"


def test_factory_values_match_torch():
    assert_close(pypto.zeros(2, 3).cpu(), torch.zeros(2, 3))
    assert_close(pypto.ones(2, 3, dtype="int32").cpu(), torch.ones(2, 3, dtype=torch.int32))
    assert_close(pypto.full((2, 3), 7.5).cpu(), torch.full((2, 3), 7.5))
    assert_close(pypto.full(4, 3, dtype="int64").cpu(), torch.full((4,), 3))
    assert_close(pypto.arange(5).cpu(), torch.arange(5))
    assert_close(pypto.arange(1, 2, 0.25, dtype="float32").cpu(), torch.arange(1, 2, 0.25))
    assert pypto.arange(3).device == PTO0


def test_random_factories_are_seeded_by_the_device_generator():
    torch.pto.manual_seed(123)
    a, u = pypto.randn(64), pypto.rand(64)
    torch.pto.manual_seed(123)
    assert torch.equal(a.cpu(), pypto.randn(64).cpu()) and torch.equal(u.cpu(), pypto.rand(64).cpu())
    assert 0 <= u.cpu().min() and u.cpu().max() < 1
    assert pypto.randn(2, 2, requires_grad=True).requires_grad


@pytest.mark.parametrize("create, check", [
    (pypto.zeros_like, lambda x: torch.equal(x.cpu(), torch.zeros(2, 3))),
    (pypto.ones_like, lambda x: torch.equal(x.cpu(), torch.ones(2, 3))),
    (pypto.randn_like, lambda x: x.cpu().std() > 0),
])
def test_like_factories_follow_their_argument(create, check):
    x = pypto.randn(2, 3, layout="NHWC")
    made = create(x)
    assert made.device == x.device and made.shape == x.shape and made.dtype == x.dtype and check(made)
    assert made.pypto_layout == "NHWC"
    assert create(x, dtype="float16").dtype == torch.float16
    assert create(x, device="cpu").device == CPU
    assert create(x.cpu()).device == CPU
    with pytest.raises(TypeError, match="expects a pypto tensor"):
        create(np.zeros(3))


def test_tensor_from_python_numpy_and_torch_data():
    assert_close(pypto.tensor([[1, 2], [3, 4]]).cpu(), torch.tensor([[1, 2], [3, 4]]))
    assert pypto.tensor([1, 2, 3], dtype="int32").dtype == torch.int32
    assert pypto.tensor(2.5).shape == ()
    array = np.arange(12, dtype=np.float32).reshape(3, 4)[::-1, ::2]  # negative and gapped strides
    assert_close(pypto.tensor(array).cpu(), torch.from_numpy(array.copy()))
    assert pypto.tensor(np.random.rand(4, 4), dtype="float16").dtype == torch.float16
    source = torch.arange(4.0, device="pto")
    copy = pypto.tensor(source)
    assert copy.data_ptr() != source.data_ptr()
    source.add_(1)
    assert_close(copy.cpu(), torch.arange(4.0))
    assert pypto.tensor([1.0], device="cpu").device == CPU
    assert pypto.tensor([1.0], device="pto:1").device == PTO1


def test_tensor_records_its_layout():
    assert pypto.tensor(np.zeros((1, 4, 4, 3)), layout="NHWC").pypto_layout == "NHWC"
    x = pypto.tensor(np.zeros((1, 3, 4, 4)))
    assert x.pypto_layout == "NCHW" and pypto.layout_of(x) == "NCHW"
    assert pypto.layout_of(torch.zeros(1)) == "NCHW"  # nothing recorded: NCHW
    with pytest.raises(ValueError, match="unknown layout 'NWHC'.*NCHW, NHWC"):
        pypto.tensor([1.0], layout="NWHC")


# ---------------------------------------------------------------- torch and NumPy interop


def test_from_torch_and_to_torch_share_storage():
    t = torch.randn(8, 8, device="pto")
    x = pypto.from_torch(t)
    assert x is t and x.data_ptr() == t.data_ptr()
    y = pypto.exp(x)
    back = pypto.to_torch(y)
    assert back is y and back.data_ptr() == y.data_ptr()
    x.mul_(2)  # one storage: a write through one name shows through the other
    assert torch.equal(t.cpu(), x.cpu())


def test_from_torch_copies_what_is_elsewhere():
    t = torch.randn(3, 3)
    x = pypto.from_torch(t)
    assert x.device == PTO0 and torch.equal(x.cpu(), t)
    on_second = pypto.from_torch(torch.ones(2, device="pto:1"))
    assert on_second.device == PTO0
    with pypto.Context("cpu"):
        assert pypto.from_torch(t) is t
    with pytest.raises(TypeError, match="pypto.from_numpy"):
        pypto.from_torch(np.zeros(3))
    with pytest.raises(TypeError, match="expects a pypto tensor"):
        pypto.to_torch([1, 2])


def test_from_numpy_copies_to_the_device_and_to_numpy_back():
    array = np.random.rand(4, 5).astype(np.float32)
    x = pypto.from_numpy(array)
    assert x.device == PTO0 and x.dtype == torch.float32
    array[0, 0] = 100.0  # a copy: the device tensor does not change
    assert x[0, 0].item() != 100.0
    back = pypto.to_numpy(x)
    assert isinstance(back, np.ndarray) and back.dtype == np.float32
    np.testing.assert_array_equal(back[1:], array[1:])
    assert pypto.from_numpy(np.random.randn(3)).dtype == torch.float64  # NumPy's dtype kept
    assert pypto.from_numpy(np.ones(3), dtype="float16").dtype == torch.float16
    assert pypto.from_numpy(np.float32(2.0)).shape == ()
    assert pypto.from_numpy(np.ones((1, 2, 2, 3)), layout="NHWC").pypto_layout == "NHWC"
    assert pypto.to_numpy(pypto.ones(3, dtype="bfloat16")).dtype == np.float32  # NumPy has no bfloat16
    assert pypto.to_numpy(pypto.randn(2, requires_grad=True)).shape == (2,)
    with pytest.raises(TypeError, match="expects a NumPy array"):
        pypto.from_numpy([1, 2])


# ---------------------------------------------------------------- devices and Context


def test_current_device_defaults_to_the_current_pto_device():
    assert pypto.current_device() == PTO0
    torch.pto.set_device(1)
    assert pypto.current_device() == PTO1 and pypto.randn(2).device == PTO1


def test_context_on_the_cpu_gives_cpu_tensors():
    with pypto.Context(device_type="cpu") as ctx:
        assert pypto.current_device() == CPU
        x = pypto.randn(4, 4)
        assert x.device == CPU and pypto.tensor([1.0]).device == CPU and pypto.arange(3).device == CPU
        assert pypto.exp(x).device == CPU and pypto.add(x, 1.0).device == CPU
    assert pypto.current_device() == PTO0
    assert "cpu" in repr(ctx)


def test_context_is_nestable_reentrant_and_restores_on_errors():
    cpu, second = pypto.Context("cpu"), pypto.Context("pto", 1)
    with second:
        assert pypto.zeros(1).device == PTO1 and torch.pto.current_device() == 1
        with cpu:
            assert pypto.zeros(1).device == CPU
            with second:  # the same object again, inside itself
                assert pypto.zeros(1).device == PTO1
            assert pypto.zeros(1).device == CPU
        assert pypto.zeros(1).device == PTO1
    assert pypto.current_device() == PTO0 and torch.pto.current_device() == 0
    with pytest.raises(KeyError):
        with second:
            raise KeyError("boom")
    assert pypto.current_device() == PTO0 and torch.pto.current_device() == 0


def test_context_accepts_the_origins_spellings():
    assert pypto.Context("pto:1").device == PTO1
    assert pypto.Context(device_type="npu", device_id=1).device == PTO1  # the origin's name
    assert pypto.Context(device_type="pto", device_id=0).device == PTO0
    with pytest.raises(ValueError, match="'pto' or 'cpu'"):
        pypto.Context("meta")
    with pytest.raises(ValueError, match="no device pto:99"):
        pypto.Context("pto", 99)
    with pytest.raises(ValueError, match="disagree"):
        pypto.Context("pto:1", 0)


def test_set_device():
    assert pypto.set_device("pto:1") == PTO1
    assert pypto.current_device() == PTO1 and torch.pto.current_device() == 1
    assert pypto.ones(2).device == PTO1
    pypto.set_device("cpu")
    assert pypto.ones(2).device == CPU
    with pypto.Context("pto", 0):
        assert pypto.ones(2).device == PTO0
    assert pypto.current_device() == CPU  # the Context restored what set_device chose
    pypto.set_device("pto", 0)
    assert pypto.ones(2).device == PTO0


def test_synchronize_memory_allocated_and_empty_cache():
    pypto.synchronize()
    before = pypto.memory_allocated()
    assert before == torch.pto.memory_allocated(0)
    x = pypto.empty(1 << 18)  # 1 MiB
    assert pypto.memory_allocated() >= before + (1 << 20)
    del x
    pypto.empty_cache()
    assert pypto.memory_allocated() == before
    with pypto.Context("pto", 1):
        y = pypto.empty(1 << 18)
        assert pypto.memory_allocated() == torch.pto.memory_allocated(1) >= 1 << 20
        pypto.synchronize()
        del y
    with pypto.Context("cpu"):  # harmless on the CPU
        pypto.synchronize()
        pypto.empty_cache()
        assert pypto.memory_allocated() == 0


# ---------------------------------------------------------------- ops against torch on the CPU


# OPS' inputs are drawn when pytest imports this module, before any test's seed and
# after whatever the modules imported earlier drew: a generator of their own keeps them
# the same in every session.
_INPUTS = torch.Generator().manual_seed(0)


def _randn(*shape):
    return torch.randn(*shape, generator=_INPUTS)


def _pos(*shape):
    return torch.rand(*shape, generator=_INPUTS) + 0.5


# name -> (CPU arguments, keyword arguments, the same computation in plain torch)
OPS = {
    "add": ((_randn(4, 6), _randn(6)), {}, torch.add),
    "sub": ((_randn(4, 6), _randn(4, 1)), {}, torch.sub),
    "mul": ((_randn(4, 6), _randn(4, 6)), {}, torch.mul),
    "div": ((_randn(4, 6), _pos(4, 6)), {}, torch.div),
    "exp": ((_randn(4, 6),), {}, torch.exp),
    "log": ((_pos(4, 6),), {}, torch.log),
    "relu": ((_randn(4, 6),), {}, torch.relu),
    "gelu": ((_randn(4, 6),), {"approximate": "tanh"}, lambda x, approximate: F.gelu(x, approximate=approximate)),
    "matmul": ((_randn(2, 4, 5), _randn(5, 3)), {}, torch.matmul),
    "reduce_sum": ((_randn(4, 6),), {"axis": 1}, lambda x, axis: x.sum(axis)),
    "reduce_mean": ((_randn(4, 6),), {"axis": 0, "keepdims": True}, lambda x, axis, keepdims: x.mean(axis, True)),
    "reduce_max": ((_randn(4, 6),), {}, lambda x: x.amax(-1)),
    "reduce_min": ((_randn(4, 6),), {"axis": -2}, lambda x, axis: x.amin(axis)),
    "softmax": ((_randn(4, 6),), {"axis": 0}, lambda x, axis: torch.softmax(x, axis)),
    "transpose": ((_randn(2, 4, 6),), {}, lambda x: x.transpose(-2, -1)),
    "normalize": ((_randn(4, 6),), {"axis": 1}, lambda x, axis: F.normalize(x, dim=axis)),
    "layer_norm": ((_randn(4, 6), 6, _randn(6), _randn(6)), {},
                   lambda x, n, w, b: F.layer_norm(x, [n], w, b)),
    "rms_norm": ((_randn(4, 6),), {"weight": _randn(6)}, lambda x, weight: F.rms_norm(x, [6], weight, 1e-6)),
    "conv2d": ((_randn(1, 3, 6, 6), _randn(4, 3, 3, 3), _randn(4)), {"padding": 1},
               lambda x, w, b, padding: F.conv2d(x, w, b, padding=padding)),
}
TENSOR_OPS = list(OPS)
# The ops that accumulate compare within their error_bounds bound (which grows with the
# count summed); the elementwise ones within rtol = atol = 1e-5, a few ulps.
BOUNDS = {
    "matmul": lambda x, y: matmul_bound(x, y),
    "reduce_sum": lambda x, axis: sum_bound(x, axis),
    "reduce_mean": lambda x, axis, keepdims: sum_bound(x, axis, keepdims, mean=True),
    "softmax": lambda x, axis: softmax_bound(x, axis),
    "normalize": lambda x, axis: normalize_bound(x, axis),
    "layer_norm": lambda x, n, w, b: normalization_bounds(x, (-1,), w, b, 1e-5)[0],
    "rms_norm": lambda x, weight: rms_norm_bound(x, (-1,), weight, 1e-6),
    "conv2d": lambda x, w, b, padding: conv_bound(x, w, b, padding=padding),
}


def _assert_matches(name, result, args, kwargs, reference):
    expected = reference(*args, **kwargs)
    if name in BOUNDS:
        assert_within_bound(result, expected, BOUNDS[name](*args, **kwargs), name)
    else:
        assert_close(result, expected, rtol=1e-5, atol=1e-5)
# ops taking two or more tensors, whose devices can disagree
MULTI_TENSOR_OPS = [name for name, (args, kwargs, _) in OPS.items()
                    if sum(isinstance(v, torch.Tensor) for v in (*args, *kwargs.values())) > 1]


def _to(values, device):
    if isinstance(values, dict):
        return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in values.items()}
    return tuple(v.to(device) if isinstance(v, torch.Tensor) else v for v in values)


@pytest.mark.parametrize("name", TENSOR_OPS)
def test_op_on_pto_matches_torch_on_the_cpu(name):
    args, kwargs, reference = OPS[name]
    before = pypto.fallback_ops()
    result = getattr(pypto, name)(*_to(args, "pto"), **_to(kwargs, "pto"))
    assert result.device == PTO0
    _assert_matches(name, result.cpu(), args, kwargs, reference)
    assert pypto.fallback_ops() == before, f"pypto.{name} left the device"


@pytest.mark.parametrize("name", TENSOR_OPS)
def test_op_runs_on_cpu_tensors_too(name):
    args, kwargs, reference = OPS[name]
    with pypto.Context("cpu"):
        result = getattr(pypto, name)(*args, **kwargs)
    assert result.device == CPU
    _assert_matches(name, result, args, kwargs, reference)


def test_norms_default_their_normalized_shape():
    x, w = torch.randn(3, 5), torch.randn(5)
    assert_within_bound(pypto.layer_norm(x.to("pto")).cpu(), F.layer_norm(x, [5]),
                        normalization_bounds(x, (-1,))[0], "layer_norm")
    assert_within_bound(pypto.layer_norm(x.to("pto"), weight=w.to("pto")).cpu(), F.layer_norm(x, [5], w),
                        normalization_bounds(x, (-1,), w)[0], "layer_norm with a weight")
    assert_within_bound(pypto.rms_norm(x.to("pto"), [5]).cpu(), F.rms_norm(x, [5], eps=1e-6),
                        rms_norm_bound(x, (-1,), eps=1e-6), "rms_norm")


@pytest.mark.parametrize("op, scalar, dtype", [
    ("add", 1.0, "float32"), ("add", 1e-3, "float16"), ("sub", 2, "int32"), ("mul", 2, "int32"),
    ("mul", 0.5, "int32"), ("div", 2, "int64"), ("add", True, "bool"), ("add", 3, "bool"),
    ("mul", 2.0, "bfloat16"), ("sub", 1e-6, "float64"),
])
def test_python_scalars_promote_as_in_torch(op, scalar, dtype):
    x = torch.arange(1, 7).reshape(2, 3).to(pypto.as_dtype(dtype))
    for args in ((x, scalar), (scalar, x)):
        expected = getattr(torch, op)(*args)
        got = getattr(pypto, op)(*_to(args, "pto"))
        assert got.dtype == expected.dtype and got.device == PTO0
        assert_close(got.cpu(), expected)


@pytest.mark.parametrize("dtype", list(dict.fromkeys(pypto.api.DTYPES.values())), ids=str)
def test_a_scalar_takes_the_dtype_torch_result_type_gives(dtype):
    """The dtype pypto gives a Python scalar next to a tensor is torch.result_type's, which
    api._scalar_dtype writes out because Dynamo cannot trace torch.result_type."""
    for scalar in (True, 2, 0.5, 1j):
        assert api._scalar_dtype(dtype, scalar) == torch.result_type(torch.zeros((), dtype=dtype), scalar), scalar


def test_scalars_alone_land_on_the_current_device():
    assert pypto.add(1.0, 2.0).device == PTO0 and pypto.add(1.0, 2.0).item() == 3.0
    assert_close(pypto.exp(0.0).cpu(), torch.tensor(1.0))


@pytest.mark.parametrize("op, torch_op", [
    ("reduce_sum", torch.sum), ("reduce_mean", torch.mean), ("reduce_max", torch.amax), ("reduce_min", torch.amin),
])
def test_reductions_over_one_several_or_all_axes(op, torch_op):
    x = torch.randn(3, 4, 5)
    reduce = getattr(pypto, op)
    on_pto = x.to("pto")
    sums = op in ("reduce_sum", "reduce_mean")

    def check(got, expected, axis, keepdims=False):
        if sums:  # within 2 gamma_N sum|x| (mean: over N); max and min exactly
            bound = sum_bound(x, tuple(axis) if isinstance(axis, list) else axis, keepdims, mean=op == "reduce_mean")
            assert_within_bound(got, expected, bound, f"{op} over {axis}")
        else:
            assert_close(got, expected, rtol=0, atol=0)

    for axis in (0, 1, -1, (0, 2), [1, 2], (-1, 0)):
        for keepdims in (False, True):
            expected = torch_op(x, axis, keepdim=keepdims)
            check(reduce(on_pto, axis=axis, keepdims=keepdims).cpu(), expected, axis, keepdims)
    check(reduce(on_pto, axis=None).cpu(), torch_op(x), None)
    kept = reduce(on_pto, axis=None, keepdims=True)
    assert kept.shape == (1, 1, 1)
    check(kept.cpu().reshape(()), torch_op(x), None)
    scalar = torch.tensor(2.5, device="pto")
    assert reduce(scalar, axis=None).item() == 2.5


# ---------------------------------------------------------------- conv2d and layouts


def test_conv2d_nhwc_matches_torch_on_the_permuted_input():
    x, w, b = torch.randn(2, 7, 6, 3), torch.randn(5, 3, 3, 3), torch.randn(5)
    expected = F.conv2d(x.permute(0, 3, 1, 2), w, b, stride=2, padding=1).permute(0, 2, 3, 1)
    got = pypto.conv2d(x.to("pto"), w.to("pto"), b.to("pto"), stride=2, padding=1, layout="NHWC")
    assert got.shape == expected.shape == (2, 4, 3, 5)
    assert got.pypto_layout == "NHWC" and got.is_contiguous()  # NHWC in memory too
    bound = conv_bound(x.permute(0, 3, 1, 2), w, b, stride=2, padding=1)
    assert_within_bound(got.cpu(), expected, Bound(bound.value.permute(0, 2, 3, 1), bound.name), "NHWC conv2d")


def test_conv2d_reads_the_recorded_layout():
    data = np.random.rand(1, 6, 6, 2).astype(np.float32)
    w = torch.randn(4, 2, 3, 3)
    expected = F.conv2d(torch.from_numpy(data).permute(0, 3, 1, 2), w).permute(0, 2, 3, 1)
    x = pypto.tensor(data, layout="NHWC")
    y = pypto.conv2d(x, pypto.from_torch(w))
    assert y.shape == (1, 4, 4, 4) and y.pypto_layout == "NHWC"
    first = conv_bound(torch.from_numpy(data).permute(0, 3, 1, 2), w).value  # NCHW
    assert_within_bound(y.cpu(), expected, Bound(first.permute(0, 2, 3, 1), "conv_bound"), "NHWC conv2d")
    # NHWC in, NHWC out: a second convolution chains without saying the layout again.
    # Its inputs differ by `first` already: that difference carried through |w2| (times
    # 1 + gamma_4, each side's own rounding of it), plus its own bound.
    w2 = torch.randn(3, 4, 1, 1)
    expected2 = F.conv2d(expected.permute(0, 3, 1, 2), w2).permute(0, 2, 3, 1)
    second = conv_bound(expected.permute(0, 3, 1, 2), w2).value + (1 + gamma(4)) * F.conv2d(first, w2.double().abs())
    assert_within_bound(pypto.conv2d(y, pypto.from_torch(w2)).cpu(), expected2,
                        Bound(second.permute(0, 2, 3, 1), "conv_bound, the first's carried through |w2|"), "chained")
    # the argument wins over what is recorded
    nchw = pypto.conv2d(pypto.tensor(np.random.rand(1, 2, 5, 5), dtype="float32", layout="NHWC"),
                        pypto.from_torch(w), layout="NCHW")
    assert nchw.shape == (1, 4, 3, 3) and nchw.pypto_layout == "NCHW"


def test_conv2d_layout_errors():
    w = pypto.randn(4, 3, 3, 3)
    with pytest.raises(ValueError, match="NHWC input must be 4-D"):
        pypto.conv2d(pypto.randn(5, 5, 3), w, layout="NHWC")
    with pytest.raises(ValueError, match="unknown layout 'CHWN'"):
        pypto.conv2d(pypto.randn(1, 5, 5, 3), w, layout="CHWN")


# ---------------------------------------------------------------- the errors the origin warns about


def _calls(name, bad):
    """pypto.`name` called with `bad` in each tensor position in turn (the rest good pto tensors)."""
    args, kwargs, _ = OPS[name]
    args = _to(args, "pto")
    for i, value in enumerate(args):
        if isinstance(value, torch.Tensor):
            yield (lambda i=i: getattr(pypto, name)(*args[:i], bad(value), *args[i + 1:], **_to(kwargs, "pto")))
    for key, value in kwargs.items():
        if isinstance(value, torch.Tensor):
            yield (lambda key=key: getattr(pypto, name)(*args, **{**_to(kwargs, "pto"), key: bad(value)}))


@pytest.mark.parametrize("name", TENSOR_OPS)
def test_numpy_arrays_mixed_with_device_tensors_say_from_numpy(name):
    for call in _calls(name, lambda t: t.cpu().numpy()):
        with pytest.raises(TypeError, match=rf"pypto\.{name}: .*NumPy array.*pypto\.from_numpy"):
            call()


@pytest.mark.parametrize("name", TENSOR_OPS)
def test_python_lists_mixed_with_device_tensors_say_tensor(name):
    for call in _calls(name, lambda t: t.cpu().tolist()):
        with pytest.raises(TypeError, match=rf"pypto\.{name}: .*Python list.*pypto\.tensor"):
            call()


@pytest.mark.parametrize("name", MULTI_TENSOR_OPS)
def test_tensors_on_different_devices_say_which_is_where(name):
    for elsewhere in ("cpu", "pto:1"):
        for call in _calls(name, lambda t: t.to(elsewhere)):
            with pytest.raises(RuntimeError, match=rf"pypto\.{name}: tensors on different devices") as error:
                call()
            assert "is on pto:0" in str(error.value) and f"is on {elsewhere}" in str(error.value)


def test_the_origins_pitfall_message():
    x = pypto.randn(256)
    y = np.random.randn(256)
    with pytest.raises(TypeError, match=r"argument 'y' is a NumPy array.*pypto\.from_numpy\(y\)"):
        pypto.add(x, y)
    with pytest.raises(RuntimeError, match=r"'x' is on pto:0, 'y' is on cpu"):
        pypto.add(x, torch.from_numpy(y))
    with pytest.raises(TypeError, match="not a tensor or a number"):
        pypto.exp("1.0")
    assert pypto.add(x, pypto.from_numpy(y)).dtype == torch.float64  # the fix the origin gives


# ---------------------------------------------------------------- the same code on the CPU and on pto


def test_seed_style_code_gives_the_same_numbers_on_cpu_and_pto():
    torch.manual_seed(0)
    torch.pto.manual_seed(0)
    x = pypto.randn(64, 128)
    a, b = pypto.randn(32, 16), pypto.randn(16, 32)

    def compute(x, a, b):
        y = pypto.exp(x)
        z = pypto.log(x + 1e-6)
        w = x + y - z * 0.5
        c = pypto.matmul(a, b)
        return (w, c, pypto.reduce_sum(x, axis=1), pypto.reduce_max(x, axis=0), softmax_pypto(x),
                pypto.normalize(x, axis=1))

    on_pto = compute(x, a, b)
    with pypto.Context(device_type="cpu"):
        on_cpu = compute(*(pypto.from_torch(t) for t in (x, a, b)))
    xs, as_, bs = (pypto.to_torch(t).cpu() for t in (x, a, b))
    # w: elementwise, a few ulps; the matmul (K = 16), the row sums (128), softmax and
    # normalize over 128: within their bounds; the column max exactly.
    bounds = [None, matmul_bound(as_, bs), sum_bound(xs, 1), "exact", softmax_bound(xs, -1), normalize_bound(xs, 1)]
    for got, want, bound in zip(on_pto, on_cpu, bounds):
        assert got.device == PTO0 and want.device == CPU
        if bound is None:
            assert_close(pypto.to_torch(got).cpu(), want, rtol=1e-5, atol=1e-5, equal_nan=True)
        elif bound == "exact":
            assert_close(pypto.to_torch(got).cpu(), want, rtol=0, atol=0)
        else:
            assert_within_bound(pypto.to_torch(got).cpu(), pypto.to_torch(want), bound)
    assert_within_bound(pypto.to_torch(on_cpu[4]), torch.softmax(xs, -1), softmax_bound(xs, -1), "softmax")


def test_ops_trace_into_one_graph_for_kernels():
    """@pypto.kernel compiles with fullgraph=True: the argument checks must not break the graph."""
    x = pypto.randn(16, 32)
    compiled = torch.compile(lambda t: pypto.relu(pypto.add(softmax_pypto(t), 1.0)), backend="eager",
                             fullgraph=True)
    assert_close(compiled(x).cpu(), torch.softmax(x.cpu(), -1) + 1.0)


def test_import_stays_light(python):
    result = python("""
        import sys, torch
        import pypto_torch as pypto
        print(hasattr(pypto, "exp"), "torch._dynamo" in sys.modules)
        print(all(hasattr(pypto, name) for name in pypto.__all__))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "False", "True"], result.stdout
