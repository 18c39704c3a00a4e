"""The pto device as a user meets it: after a bare `import torch`."""

import pytest
import torch
from torch.testing import assert_close

from error_bounds import Bound, assert_within_bound, matmul_bound, multilinear_bound


def test_bare_import_torch_registers_pto(python):
    result = python("""
        import torch
        x = torch.randn(2, 3, device="pto")
        print(x.device, x.is_pto, torch.pto.is_available(), torch.pto.device_count())
        print(x)
    """, PTO_FALLBACK="silent")
    assert result.returncode == 0, result.stderr
    first, *rest = result.stdout.splitlines()
    assert first == "pto:0 True True 2"
    assert "device='pto:0'" in "\n".join(rest)


def test_importing_pypto_torch_before_torch(python):
    result = python("""
        import pypto_torch
        import torch
        print(torch.ones(2, device="pto").device)
    """, PTO_FALLBACK="silent")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "pto:0"


def test_device_count_follows_environment(python):
    result = python("import torch; print(torch.pto.device_count())", PTO_SIM_DEVICES="3")
    assert result.stdout.strip() == "3", result.stderr


def test_to_cpu_pto_and_back():
    x = torch.randn(4, 5)
    on_device = x.to("pto")
    assert on_device.device == torch.device("pto", 0)
    assert on_device.is_pto and not x.is_pto
    assert torch.equal(on_device.cpu(), x)
    assert torch.equal(x.pto().cpu(), x)
    assert torch.equal(x.to("pto:1").cpu(), x)
    assert x.to("pto:1").device.index == 1


def test_results_match_cpu():
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    # The product within matmul_bound (2 gamma_8 |a| @ |b|), the + 1 a rounding more, u |y| a side.
    expected = a @ b + 1
    bound = matmul_bound(a, b).value + 2 * 2.0 ** -24 * expected.double().abs()
    assert_within_bound((a.to("pto") @ b.to("pto") + 1).cpu(), expected, Bound(bound, "matmul_bound + 2u|y|"))
    assert_close(torch.softmax(a.to("pto"), -1).cpu(), torch.softmax(a, -1))


def test_module_to_pto():
    layer = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    expected = layer(x)
    bound = multilinear_bound(torch.nn.functional.linear, (x, layer.weight, layer.bias))
    layer = layer.to("pto")
    assert layer.weight.device.type == "pto"
    assert_within_bound(layer(x.to("pto")).cpu().detach(), expected.detach(), bound)


def test_current_device_and_context_manager():
    assert torch.pto.current_device() == 0
    with torch.pto.device(1):
        assert torch.pto.current_device() == 1
        assert torch.empty(1, device="pto").device.index == 1
    assert torch.pto.current_device() == 0
    torch.pto.set_device("pto:1")
    try:
        assert torch.pto.current_device() == 1
    finally:
        torch.pto.set_device(0)


def test_accelerator_api():
    assert torch.accelerator.current_accelerator() == torch.device("pto")
    assert torch.accelerator.device_count() == torch.pto.device_count()
    torch.accelerator.synchronize()
    assert torch.pto.get_device_name().startswith("PTO")


def test_invalid_device_index_is_a_clear_error():
    with pytest.raises(RuntimeError, match=r"pto:7 is not a valid device: there are 2 pto device"):
        torch.empty(2, device="pto:7")
    with pytest.raises(RuntimeError, match="not a valid device"):
        torch.pto.set_device(9)
    assert torch.ones(2, device="pto").sum().item() == 2  # still usable


def test_mixing_devices_errors_like_cuda():
    with pytest.raises(RuntimeError, match=r"Expected all tensors to be on the same device, but found "
                                           r"at least two devices, pto:0 and cpu!"):
        torch.ones(2) + torch.ones(2, device="pto")
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(2, device="pto:0") + torch.ones(2, device="pto:1")
    # A 0-dim CPU tensor is a scalar, as with CUDA.
    assert torch.equal((torch.ones(2, device="pto") + torch.tensor(1.0)).cpu(), torch.full((2,), 2.0))


def test_pinned_tensors_cannot_live_on_device():
    with pytest.raises(RuntimeError, match="only CPU tensors can be pinned"):
        torch.empty(2, device="pto", pin_memory=True)


def test_device_properties_come_from_the_runtime_attributes():
    props = torch.pto.get_device_properties(0)
    assert props.name == torch.pto.get_device_name(0)
    assert props.multi_processor_count >= 1
    assert props.unified_buffer_bytes == 192 * 1024
    # The simulated device's memory is host memory: programs may bind CPU tensors.
    assert props.pageable_memory_access is True
    assert props.total_memory == torch.pto.mem_get_info(0)[1]
    assert torch.pto.is_bf16_supported()
    assert torch.pto.get_device_properties("pto:1") == torch.pto.get_device_properties(1)


def test_device_properties_of_a_bad_index_raise_clearly():
    with pytest.raises(RuntimeError, match="pto:99 is not a valid device"):
        torch.pto.get_device_properties(99)
