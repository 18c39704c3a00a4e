"""Copies between CPU and pto, and within pto, for every dtype and layout; reading one
element on the host (item, _assert_async)."""

import re

import pytest
import torch

import pypto_torch

ALL_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.int16,
              torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64, torch.complex128]


def _sample(dtype: torch.dtype, shape=(5, 7)) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype)
    if dtype.is_floating_point:
        values = torch.randn(shape, dtype=torch.float64) * 1e3
        values[0, :3] = torch.tensor([float("nan"), float("inf"), -0.0])
        return values.to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, shape, dtype=torch.int64).to(dtype)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t if t.dtype == torch.bool else t.contiguous().view(torch.uint8)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_round_trip_is_bit_exact(dtype):
    x = _sample(dtype)
    back = x.to("pto").cpu()
    assert back.dtype == dtype
    assert torch.equal(_bits(back), _bits(x))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_device_to_device_round_trip(dtype):
    x = _sample(dtype)
    assert torch.equal(_bits(x.to("pto:0").to("pto:1").clone().cpu()), _bits(x))


@pytest.mark.parametrize("view", ["transpose", "slice", "expand", "permute", "step"])
def test_strided_views_copy_both_ways(view):
    base = torch.randn(6, 8, 4)
    make = {
        "transpose": lambda t: t.transpose(0, 2),
        "slice": lambda t: t[1:4, ::2],
        "expand": lambda t: t[:, :1].expand(6, 8, 4),
        "permute": lambda t: t.permute(2, 0, 1),
        "step": lambda t: t[::3, 1::2],
    }[view]
    expected = make(base)
    assert torch.equal(make(base.to("pto")).cpu(), expected)          # device view -> host
    assert torch.equal(expected.to("pto").cpu(), expected)            # host view -> device
    assert torch.equal(make(base.to("pto")).contiguous().cpu(), expected.contiguous())
    if view != "expand":  # an expanded view cannot be written to
        target = torch.zeros(6, 8, 4, device="pto")
        make(target).copy_(expected)                                  # host -> device view
        reference = torch.zeros(6, 8, 4)
        make(reference).copy_(expected)
        assert torch.equal(target.cpu(), reference)


def test_copy_with_cast_and_broadcast():
    x = torch.randn(3, 4)
    assert torch.equal(x.to("pto").to(torch.float16).cpu(), x.half())
    assert torch.equal(x.to("pto", dtype=torch.bfloat16).cpu(), x.bfloat16())
    target = torch.empty(3, 4, device="pto", dtype=torch.float64)
    target.copy_(x[0])
    assert torch.equal(target.cpu(), x[0].double().expand(3, 4))


def test_non_blocking_copies_with_pinned_memory():
    x = torch.randn(1024, 256)
    pinned = x.pin_memory()
    assert pinned.is_pinned() and not x.is_pinned()
    on_device = pinned.to("pto", non_blocking=True)
    back = torch.empty_like(pinned).pin_memory()
    back.copy_(on_device, non_blocking=True)
    torch.pto.synchronize()
    assert torch.equal(back, x)


def test_empty_and_scalar_tensors():
    assert torch.empty(0, 3, device="pto").cpu().shape == (0, 3)
    scalar = torch.tensor(3.5).to("pto")
    assert scalar.dim() == 0 and scalar.item() == 3.5


@pytest.mark.parametrize("value", [torch.tensor(0), torch.tensor(0.0), torch.tensor([]), torch.tensor([1, 1]),
                                   torch.tensor(True), torch.tensor(-2.5)], ids=str)
def test_assert_async_reads_its_element_as_the_cpu(value):
    """torch._assert_async: a single nonzero element passes, anything else raises the CPU's
    error (its message, or the one given), natively: the element read on the host."""
    before = pypto_torch.fallback_ops()
    for message in ((), ("the value must not be zero",)):
        try:
            torch._assert_async(value, *message)
        except RuntimeError as on_cpu:
            with pytest.raises(RuntimeError, match=re.escape(str(on_cpu))):
                torch._assert_async(value.to("pto"), *message)
        else:
            torch._assert_async(value.to("pto"), *message)
    assert pypto_torch.fallback_ops() == before


def test_in_place_update_of_a_view_reaches_the_base():
    x = torch.zeros(4, 4, device="pto")
    x[1:3, 1:3] = 1
    x[0].add_(2)
    expected = torch.zeros(4, 4)
    expected[1:3, 1:3] = 1
    expected[0] += 2
    assert torch.equal(x.cpu(), expected)
