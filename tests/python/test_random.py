"""Random numbers on pto: seeded per device, reproducible, CPU-identical draws."""

import pytest
import torch


def test_manual_seed_makes_draws_reproducible():
    torch.pto.manual_seed(123)
    first = torch.randn(100, device="pto")
    torch.pto.manual_seed(123)
    assert torch.equal(torch.randn(100, device="pto").cpu(), first.cpu())
    assert torch.pto.initial_seed() == 123


def test_draws_use_the_pto_generator_not_the_cpu_one():
    torch.pto.manual_seed(7)
    torch.default_generator.manual_seed(99)  # the CPU generator alone
    x = torch.rand(10, device="pto")
    torch.default_generator.manual_seed(7)
    assert torch.equal(x.cpu(), torch.rand(10))  # same engine as CPU, seeded by torch.pto


def test_rng_state_round_trip():
    state = torch.pto.get_rng_state()
    a = torch.randn(8, device="pto")
    torch.pto.set_rng_state(state)
    assert torch.equal(torch.randn(8, device="pto").cpu(), a.cpu())
    states = torch.pto.get_rng_state_all()
    assert len(states) == torch.pto.device_count()
    torch.pto.set_rng_state_all(states)


def test_generator_objects_on_pto():
    generator = torch.Generator(device="pto").manual_seed(5)
    assert generator.device.type == "pto"
    a = torch.randn(4, device="pto", generator=generator)
    generator.manual_seed(5)
    assert torch.equal(torch.randn(4, device="pto", generator=generator).cpu(), a.cpu())


def test_devices_have_their_own_generators():
    torch.pto.manual_seed_all(1)
    with torch.pto.device(1):
        torch.pto.manual_seed(2)
    assert torch.pto.initial_seed() == 1
    with torch.pto.device(1):
        assert torch.pto.initial_seed() == 2


def test_dropout_and_fork_rng():
    with torch.random.fork_rng(device_type="pto"):
        torch.pto.manual_seed(0)
        mask = torch.nn.functional.dropout(torch.ones(1000, device="pto"), 0.5)
    kept = (mask.cpu() > 0).float().mean().item()
    assert kept == pytest.approx(0.5, abs=0.1)
