"""Saving, loading and sharing pto tensors."""

import io

import torch
import torch.utils.dlpack


def _saved(obj) -> io.BytesIO:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return buffer


def test_save_and_load_keeps_the_device():
    x = torch.randn(3, 4, device="pto:1")
    loaded = torch.load(_saved({"x": x, "view": x[1]}))
    assert loaded["x"].device == torch.device("pto", 1)
    assert torch.equal(loaded["x"].cpu(), x.cpu())
    assert torch.equal(loaded["view"].cpu(), x[1].cpu())


def test_load_with_map_location():
    x = torch.randn(3, 4, device="pto")
    assert torch.load(_saved(x), map_location="cpu").device.type == "cpu"
    assert torch.load(_saved(x), map_location="pto:1").device == torch.device("pto", 1)
    cpu = torch.randn(2)
    assert torch.load(_saved(cpu), map_location="pto").device.type == "pto"


def test_module_state_dict_round_trip():
    model = torch.nn.Linear(3, 2).to("pto")
    state = torch.load(_saved(model.state_dict()))
    fresh = torch.nn.Linear(3, 2).to("pto")
    fresh.load_state_dict(state)
    assert torch.equal(fresh.weight.cpu(), model.weight.cpu())


def test_dlpack_round_trip_shares_memory():
    x = torch.randn(5, device="pto")
    shared = torch.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(x))
    assert shared.device == x.device and shared.data_ptr() == x.data_ptr()
    shared.add_(1)
    assert torch.equal(shared.cpu(), x.cpu())


def test_storage_moves_between_devices():
    storage = torch.randn(4).untyped_storage()
    on_device = storage.pto()
    assert on_device.device.type == "pto"
    assert bytes(on_device.cpu()) == bytes(storage)
