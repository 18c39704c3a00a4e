"""Seeds and generator state of the pto devices (``torch.pto.manual_seed`` ...)."""

from typing import Any

import torch

from pypto_torch import _C


def _index(device: Any) -> int:
    from pypto_torch.pto import _device_index

    return _device_index(device)


def _generator(device: Any = None) -> torch.Generator:
    return _C._default_generator(_index(device))


def manual_seed(seed: int) -> None:
    """Seed the current pto device's generator."""
    _generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for index in range(_C._device_count()):
        _generator(index).manual_seed(int(seed))


def seed() -> None:
    """Seed the current device's generator with a non-deterministic number."""
    _generator().seed()


def seed_all() -> None:
    random_seed = _generator().seed()
    for index in range(_C._device_count()):
        _generator(index).manual_seed(random_seed)


def initial_seed() -> int:
    return _generator().initial_seed()


def get_rng_state(device: Any = "pto") -> torch.Tensor:
    return _generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "pto") -> None:
    _generator(device).set_state(new_state.clone())


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(index) for index in range(_C._device_count())]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    for index, state in enumerate(new_states):
        set_rng_state(state, index)
