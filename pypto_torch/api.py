"""The seed-style ``pypto`` API: NumPy-like operator writing on the pto device.

``import pypto_torch as pypto`` and write ``pypto.exp(x)``, ``pypto.reduce_sum(x,
axis=1)``, ``pypto.matmul(a, b)``. A pypto tensor IS a ``torch.Tensor`` on pto:
nothing converts between the two worlds, ``from_torch``/``to_torch`` share storage.

Where new tensors go is the *current pypto device*: ``pto:<torch.pto.current_device()>``
(which :func:`set_device` and a :class:`Context` set) unless one of them chose the CPU:
``Context(device_type="cpu")`` runs the same code on CPU tensors (the origin's "debug on
CPU, accelerate on the device").

Every op is the ``torch.ops.pto`` operator of the same name (CPU, pto and Meta kernels,
autograd), behind one argument check that turns the origin's usual mistakes into
clear errors: NumPy arrays or Python lists where a tensor belongs, tensors on
different devices.
"""

import numbers
import threading
from collections.abc import Sequence
from typing import Any, Optional, Union

import numpy as np
import torch
import torch.nn.functional as F

DTypeLike = Union[str, torch.dtype, np.dtype, type, None]
DeviceLike = Union[str, torch.device, None]

# ---------------------------------------------------------------- dtypes and layouts

# The dtype names as the origin (and NumPy) writes them, with torch's aliases.
DTYPES: dict[str, torch.dtype] = {
    "bool": torch.bool,
    "uint8": torch.uint8,
    "int8": torch.int8,
    "int16": torch.int16,
    "short": torch.int16,
    "int32": torch.int32,
    "int": torch.int32,
    "int64": torch.int64,
    "long": torch.int64,
    "float16": torch.float16,
    "half": torch.float16,
    "fp16": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float32": torch.float32,
    "float": torch.float32,
    "fp32": torch.float32,
    "float64": torch.float64,
    "double": torch.float64,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
}

LAYOUTS = ("NCHW", "NHWC")


def as_dtype(dtype: DTypeLike) -> Optional[torch.dtype]:
    """A torch dtype from a name ('float16', 'int32', ...), a torch dtype, a NumPy dtype, or None."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        name = dtype.lower().removeprefix("torch.").removeprefix("np.").removeprefix("numpy.")
        if name in DTYPES:
            return DTYPES[name]
        raise ValueError(f"unknown dtype {dtype!r}; valid names: {', '.join(DTYPES)}")
    try:
        return DTYPES[np.dtype(dtype).name]
    except (TypeError, KeyError):
        raise ValueError(f"unknown dtype {dtype!r}; use a torch dtype or one of: {', '.join(DTYPES)}") from None


def _check_layout(layout: str) -> str:
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; valid layouts: {', '.join(LAYOUTS)}")
    return layout


def _with_layout(tensor: torch.Tensor, layout: Optional[str]) -> torch.Tensor:
    """Record the order the tensor's dimensions are given in (read by conv2d)."""
    if layout is not None:
        tensor.pypto_layout = _check_layout(layout)
    return tensor


def layout_of(x: torch.Tensor) -> str:
    """The layout recorded on `x` ('NCHW' when none was)."""
    return getattr(x, "pypto_layout", "NCHW")


# ---------------------------------------------------------------- devices


def _parse_device(device_type: DeviceLike, device_id: Optional[int] = None) -> torch.device:
    """torch.device from ('pto', 0), 'pto:1', 'cpu', a torch.device or an int (a pto index).

    'npu' is the origin's name for the device and means 'pto'. A pto device without an
    index is the current torch.pto device.
    """
    if isinstance(device_type, int):
        device_type, device_id = "pto", device_type
    if isinstance(device_type, str) and device_type.split(":")[0] == "npu":
        device_type = "pto" + device_type[3:]
    device = torch.device(device_type)
    if device_id is not None:
        if device.index is not None and device.index != device_id:
            raise ValueError(f"device {device_type!r} and device_id={device_id} disagree")
        device = torch.device(device.type, device_id)
    if device.type not in ("pto", "cpu"):
        raise ValueError(f"pypto runs on 'pto' or 'cpu' devices, not {device.type!r}")
    if device.type == "pto":
        index = torch.pto.current_device() if device.index is None else device.index
        if not 0 <= index < torch.pto.device_count():
            raise ValueError(f"no device pto:{index}: there are {torch.pto.device_count()} pto devices")
        return torch.device("pto", index)
    return torch.device("cpu")


class _State(threading.local):
    on_cpu: bool = False  # a Context or set_device chose the CPU; else torch.pto's current device


_state = _State()


def current_device() -> torch.device:
    """Where new pypto tensors go in this thread."""
    return torch.device("cpu") if _state.on_cpu else torch.device("pto", torch.pto.current_device())


def _make_current(device: torch.device) -> None:
    _state.on_cpu = device.type == "cpu"
    if device.type == "pto":
        torch.pto.set_device(device.index)


def set_device(device_type: DeviceLike = "pto", device_id: Optional[int] = None) -> torch.device:
    """Make a device current for new pypto tensors: set_device('pto', 1), set_device('pto:1'),
    set_device('cpu'). A pto device also becomes torch.pto's current device. Returns it."""
    device = _parse_device(device_type, device_id)
    _make_current(device)
    return device


class Context:
    """Where new tensors go inside a ``with`` block, restored after it.

    ``Context(device_type="cpu")`` runs pypto code on CPU tensors; ``Context("pto", 1)``
    on the second pto device (also torch.pto's current device inside the block).
    Re-entrant and nestable: the same object may be entered again inside itself.
    """

    def __init__(self, device_type: DeviceLike = "pto", device_id: Optional[int] = None):
        self.device = _parse_device(device_type, device_id)
        self._saved: list[tuple[bool, int]] = []

    def __enter__(self) -> "Context":
        self._saved.append((_state.on_cpu, torch.pto.current_device()))
        _make_current(self.device)
        return self

    def __exit__(self, *exc_info) -> bool:
        _state.on_cpu, pto_index = self._saved.pop()
        torch.pto.set_device(pto_index)
        return False

    def __repr__(self) -> str:
        return f"pypto.Context(device_type={self.device.type!r}, device_id={self.device.index})"


def _device(device: DeviceLike) -> torch.device:
    return current_device() if device is None else _parse_device(device)


def synchronize() -> None:
    """Wait for all work queued on the current pypto device (nothing to wait for on the CPU)."""
    device = current_device()
    if device.type == "pto":
        torch.pto.synchronize(device.index)


def memory_allocated() -> int:
    """Bytes held by tensors on the current pypto device (0 on the CPU)."""
    device = current_device()
    return torch.pto.memory_allocated(device.index) if device.type == "pto" else 0


def empty_cache() -> None:
    """Return the cached, unused device memory to the devices (nothing to do on the CPU)."""
    if current_device().type == "pto":
        torch.pto.empty_cache()


# ---------------------------------------------------------------- to and from torch / NumPy


def _host(array: Any) -> torch.Tensor:
    """A CPU tensor over `array`'s data, or over a C-ordered writable copy when torch can't share it."""
    array = np.asarray(array)
    if not (array.flags.c_contiguous and array.flags.writeable):
        array = array.copy(order="C")
    return torch.from_numpy(array)


def from_torch(t: torch.Tensor) -> torch.Tensor:
    """`t` itself when it is on the current pypto device (zero copy), else a copy there."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"from_torch expects a torch.Tensor, got {type(t).__name__}; "
                        "use pypto.from_numpy(...) for NumPy arrays and pypto.tensor(...) for Python data")
    device = current_device()
    return t if t.device == device else t.to(device)


def to_torch(x: torch.Tensor) -> torch.Tensor:
    """`x` itself: a pypto tensor is a torch.Tensor (zero copy)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"to_torch expects a pypto tensor, got {type(x).__name__}")
    return x


def from_numpy(array: np.ndarray, dtype: DTypeLike = None, layout: Optional[str] = None) -> torch.Tensor:
    """A copy of `array` on the current pypto device (its dtype unless `dtype` is given)."""
    if not isinstance(array, (np.ndarray, np.generic)):
        raise TypeError(f"from_numpy expects a NumPy array, got {type(array).__name__}")
    return _with_layout(_host(array).to(current_device(), as_dtype(dtype), copy=True), layout)


def to_numpy(x: torch.Tensor) -> np.ndarray:
    """A NumPy copy of `x` on the host (bfloat16, which NumPy lacks, comes back as float32)."""
    x = to_torch(x).detach()
    if x.dtype == torch.bfloat16:
        x = x.float()
    return x.cpu().numpy()


# ---------------------------------------------------------------- creation


def tensor(data: Any, dtype: DTypeLike = None, layout: str = "NCHW", device: DeviceLike = None) -> torch.Tensor:
    """A new tensor holding `data` (Python numbers and lists, a NumPy array, a tensor).

    `layout` says the order `data`'s dimensions are given in ('NCHW' or 'NHWC'); it is
    recorded on the tensor (``pypto_layout``) for conv2d, the data is not reordered.
    """
    dtype, device = as_dtype(dtype), _device(device)
    _check_layout(layout)
    if isinstance(data, torch.Tensor):
        result = data.detach().to(device=device, dtype=dtype, copy=True)
    elif isinstance(data, np.ndarray):
        result = _host(data).to(device=device, dtype=dtype, copy=True)
    else:
        result = torch.tensor(data, dtype=dtype, device=device)
    return _with_layout(result, layout)


def _factory(name: str, doc: str):
    torch_factory = getattr(torch, name)

    def create(*shape, dtype: DTypeLike = None, layout: Optional[str] = None, device: DeviceLike = None,
               requires_grad: bool = False) -> torch.Tensor:
        result = torch_factory(*shape, dtype=as_dtype(dtype), device=_device(device), requires_grad=requires_grad)
        return _with_layout(result, layout)

    create.__name__ = create.__qualname__ = name
    create.__doc__ = f"{doc} on the current pypto device: {name}(2, 3) or {name}((2, 3)), dtype='float16' ..."
    return create


randn = _factory("randn", "Normal random numbers")
rand = _factory("rand", "Uniform random numbers in [0, 1)")
zeros = _factory("zeros", "Zeros")
ones = _factory("ones", "Ones")
empty = _factory("empty", "An uninitialised tensor")


def full(shape: Union[int, Sequence[int]], fill_value: Any, dtype: DTypeLike = None, layout: Optional[str] = None,
         device: DeviceLike = None) -> torch.Tensor:
    """A tensor of `shape` filled with `fill_value` on the current pypto device."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return _with_layout(torch.full(shape, fill_value, dtype=as_dtype(dtype), device=_device(device)), layout)


def arange(start: Any, end: Any = None, step: Any = 1, dtype: DTypeLike = None,
           device: DeviceLike = None) -> torch.Tensor:
    """start, start + step, ... below end (arange(n): 0 ... n-1) on the current pypto device."""
    if end is None:
        start, end = 0, start
    return torch.arange(start, end, step, dtype=as_dtype(dtype), device=_device(device))


def _like_factory(name: str, doc: str):
    torch_factory = getattr(torch, name)

    def create(x: torch.Tensor, dtype: DTypeLike = None, device: DeviceLike = None) -> torch.Tensor:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} expects a pypto tensor, got {type(x).__name__}")
        result = torch_factory(x, dtype=as_dtype(dtype), device=None if device is None else _parse_device(device))
        return _with_layout(result, getattr(x, "pypto_layout", None))

    create.__name__ = create.__qualname__ = name
    create.__doc__ = f"{doc} with x's shape, on x's device unless `device` is given"
    return create


zeros_like = _like_factory("zeros_like", "Zeros")
ones_like = _like_factory("ones_like", "Ones")
randn_like = _like_factory("randn_like", "Normal random numbers")


# ---------------------------------------------------------------- argument checks


def _scalar_dtype(like: torch.dtype, value: numbers.Number) -> torch.dtype:
    """The dtype a Python scalar takes next to a tensor of dtype `like` (torch's promotion):
    a 0-dim tensor of it promotes with the tensor exactly as the scalar would. This is
    torch.result_type(tensor, value), which Dynamo cannot trace (a torch function that
    returns a dtype breaks the graph), and @pypto.kernel traces these checks whole."""
    if isinstance(value, bool):
        return like
    if isinstance(value, numbers.Integral):
        return torch.int64 if like == torch.bool else like
    if isinstance(value, numbers.Real):
        return like if like.is_floating_point or like.is_complex else torch.get_default_dtype()
    if like.is_complex:
        return like
    return {torch.float64: torch.complex128, torch.float16: torch.complex32}.get(like, torch.complex64)


def _operands(op: str, **operands: Any) -> list[Optional[torch.Tensor]]:
    """The operands of pypto.`op` as tensors on one device, Python scalars made 0-dim tensors
    (None, for an optional operand not given, stays None).

    Raises TypeError for NumPy arrays, lists and other non-tensors, and RuntimeError
    naming each argument's device when the tensors are on different devices.
    """
    tensors = {name: value for name, value in operands.items() if isinstance(value, torch.Tensor)}
    for name, value in operands.items():
        if value is None or isinstance(value, (torch.Tensor, numbers.Number)):
            continue
        if isinstance(value, np.ndarray):
            raise TypeError(f"pypto.{op}: argument {name!r} is a NumPy array; pypto ops take device tensors: "
                            f"convert it with pypto.from_numpy({name})")
        if isinstance(value, (list, tuple)):
            raise TypeError(f"pypto.{op}: argument {name!r} is a Python {type(value).__name__}; pypto ops take "
                            f"device tensors: convert it with pypto.tensor({name})")
        raise TypeError(f"pypto.{op}: argument {name!r} is a {type(value).__name__}, not a tensor or a number; "
                        "make tensors with pypto.tensor(...), pypto.from_numpy(...) or pypto.from_torch(...)")
    devices = {value.device for value in tensors.values()}
    if len(devices) > 1:
        where = ", ".join(f"{name!r} is on {value.device}" for name, value in tensors.items())
        raise RuntimeError(f"pypto.{op}: tensors on different devices: {where}; "
                           "move them to one device (pypto.from_torch(x) copies x to the current pypto device)")
    like = next(iter(tensors.values()), None)
    result = []
    for value in operands.values():
        if value is not None and not isinstance(value, torch.Tensor):
            if like is None:
                value = torch.tensor(value, device=current_device())
            else:
                value = torch.full((), value, dtype=_scalar_dtype(like.dtype, value), device=like.device)
        result.append(value)
    return result


# ---------------------------------------------------------------- ops


def add(x: Any, y: Any) -> torch.Tensor:
    """x + y, elementwise with broadcasting."""
    return torch.ops.pto.add(*_operands("add", x=x, y=y))


def sub(x: Any, y: Any) -> torch.Tensor:
    """x - y, elementwise with broadcasting."""
    return torch.ops.pto.sub(*_operands("sub", x=x, y=y))


def mul(x: Any, y: Any) -> torch.Tensor:
    """x * y, elementwise with broadcasting."""
    return torch.ops.pto.mul(*_operands("mul", x=x, y=y))


def div(x: Any, y: Any) -> torch.Tensor:
    """x / y (true division), elementwise with broadcasting."""
    return torch.ops.pto.div(*_operands("div", x=x, y=y))


def exp(x: Any) -> torch.Tensor:
    return torch.ops.pto.exp(*_operands("exp", x=x))


def log(x: Any) -> torch.Tensor:
    return torch.ops.pto.log(*_operands("log", x=x))


def relu(x: Any) -> torch.Tensor:
    return torch.ops.pto.relu(*_operands("relu", x=x))


def gelu(x: Any, approximate: str = "none") -> torch.Tensor:
    """GELU; approximate='tanh' for the tanh approximation."""
    return torch.ops.pto.gelu(*_operands("gelu", x=x), approximate)


def matmul(a: Any, b: Any) -> torch.Tensor:
    """Matrix product with torch.matmul's batching and broadcasting."""
    return torch.ops.pto.matmul(*_operands("matmul", a=a, b=b))


def _reduce(op: str, x: Any, axis: Union[int, Sequence[int], None], keepdims: bool) -> torch.Tensor:
    (x,) = _operands(op, x=x)
    if isinstance(axis, int):
        return getattr(torch.ops.pto, op)(x, axis, keepdims)
    axes = tuple(range(x.dim())) if axis is None else tuple(axis)
    if not axes:  # a 0-dim tensor reduced over all of its (no) axes
        axes = None if x.dim() == 0 else axes
    torch_op = {"reduce_sum": torch.sum, "reduce_mean": torch.mean,
                "reduce_max": torch.amax, "reduce_min": torch.amin}[op]
    if axes is None:
        return torch_op(x)
    return torch_op(x, axes, keepdim=keepdims)


def reduce_sum(x: Any, axis: Union[int, Sequence[int], None] = -1, keepdims: bool = False) -> torch.Tensor:
    """Sum over `axis` (an int, a tuple of ints, or None for all axes)."""
    return _reduce("reduce_sum", x, axis, keepdims)


def reduce_mean(x: Any, axis: Union[int, Sequence[int], None] = -1, keepdims: bool = False) -> torch.Tensor:
    """Mean over `axis` (an int, a tuple of ints, or None for all axes)."""
    return _reduce("reduce_mean", x, axis, keepdims)


def reduce_max(x: Any, axis: Union[int, Sequence[int], None] = -1, keepdims: bool = False) -> torch.Tensor:
    """Maximum over `axis` (an int, a tuple of ints, or None for all axes)."""
    return _reduce("reduce_max", x, axis, keepdims)


def reduce_min(x: Any, axis: Union[int, Sequence[int], None] = -1, keepdims: bool = False) -> torch.Tensor:
    """Minimum over `axis` (an int, a tuple of ints, or None for all axes)."""
    return _reduce("reduce_min", x, axis, keepdims)


def softmax(x: Any, axis: int = -1) -> torch.Tensor:
    return torch.ops.pto.softmax(*_operands("softmax", x=x), axis)


def transpose(x: Any, dim0: int = -2, dim1: int = -1) -> torch.Tensor:
    """A new tensor with dimensions dim0 and dim1 swapped (the last two by default)."""
    return torch.ops.pto.transpose(*_operands("transpose", x=x), dim0, dim1)


def normalize(x: Any, axis: int = -1, eps: float = 1e-12) -> torch.Tensor:
    """L2 normalisation along `axis`: x / max(||x||, eps)."""
    return torch.ops.pto.normalize(*_operands("normalize", x=x), axis, eps)


def _normalized_shape(x: torch.Tensor, normalized_shape: Union[int, Sequence[int], None],
                      weight: Optional[torch.Tensor]) -> list[int]:
    if normalized_shape is None:
        return list(weight.shape) if weight is not None else [x.shape[-1]]
    return [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)


def layer_norm(x: Any, normalized_shape: Union[int, Sequence[int], None] = None, weight: Any = None,
               bias: Any = None, eps: float = 1e-5) -> torch.Tensor:
    """Layer normalisation over the trailing `normalized_shape` dims (default: weight's shape, else the last dim)."""
    x, weight, bias = _operands("layer_norm", x=x, weight=weight, bias=bias)
    return torch.ops.pto.layer_norm(x, _normalized_shape(x, normalized_shape, weight), weight, bias, eps)


def rms_norm(x: Any, normalized_shape: Union[int, Sequence[int], None] = None, weight: Any = None,
             eps: float = 1e-6) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the trailing `normalized_shape` dims."""
    x, weight = _operands("rms_norm", x=x, weight=weight)
    return torch.ops.pto.rms_norm(x, _normalized_shape(x, normalized_shape, weight), weight, eps)


def conv2d(x: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
           groups: int = 1, layout: Optional[str] = None) -> torch.Tensor:
    """2-D convolution honouring the input's layout.

    `layout` (default: the one recorded on x, else 'NCHW') is the order of x's
    dimensions: with 'NHWC', x is (N, H, W, C) and the result is (N, H', W', C_out),
    recorded as NHWC. `weight` is (C_out, C_in / groups, kH, kW) in either case.
    """
    if layout is None:
        layout = layout_of(x) if isinstance(x, torch.Tensor) else "NCHW"
    _check_layout(layout)
    x, weight, bias = _operands("conv2d", x=x, weight=weight, bias=bias)
    if layout == "NCHW":
        return _with_layout(F.conv2d(x, weight, bias, stride, padding, dilation, groups), "NCHW")
    if x.dim() != 4:
        raise ValueError(f"pypto.conv2d: an NHWC input must be 4-D (N, H, W, C), got shape {tuple(x.shape)}")
    out = F.conv2d(x.permute(0, 3, 1, 2), weight, bias, stride, padding, dilation, groups)
    return _with_layout(out.permute(0, 2, 3, 1).contiguous(), "NHWC")


__all__ = [
    # devices
    "Context",
    "current_device",
    "set_device",
    "synchronize",
    "memory_allocated",
    "empty_cache",
    # tensors
    "from_torch",
    "to_torch",
    "from_numpy",
    "to_numpy",
    "tensor",
    "randn",
    "rand",
    "zeros",
    "ones",
    "full",
    "arange",
    "empty",
    "zeros_like",
    "ones_like",
    "randn_like",
    "as_dtype",
    "layout_of",
    # ops
    "add",
    "sub",
    "mul",
    "div",
    "exp",
    "log",
    "relu",
    "gelu",
    "matmul",
    "reduce_sum",
    "reduce_mean",
    "reduce_max",
    "reduce_min",
    "softmax",
    "transpose",
    "normalize",
    "layer_norm",
    "rms_norm",
    "conv2d",
]
