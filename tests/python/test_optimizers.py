"""Training on pto without leaving the device: activations, their gradients,
losses and the SGD/Adam/AdamW updates (foreach implementations) are native and
give the CPU's parameters."""

import copy

import pytest
import torch
from torch.testing import assert_close

import pypto_torch

OPTIMIZERS = {
    "SGD": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-4),
    "Adam": lambda params: torch.optim.Adam(params, lr=1e-2),
    "AdamW": lambda params: torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1),
}


def _train(model, optimizer_factory, device, steps=10):
    torch.manual_seed(0)
    x, y = torch.randn(16, 12), torch.randn(16, 3)
    model = copy.deepcopy(model).to(device)
    optimizer = optimizer_factory(model.parameters())
    for _ in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
    return [p.detach().cpu() for p in model.parameters()], loss.item()


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_steps_match_cpu_and_stay_native(name):
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.ReLU(), torch.nn.Linear(24, 24),
                                torch.nn.GELU(), torch.nn.Linear(24, 24), torch.nn.Tanh(),
                                torch.nn.Linear(24, 24), torch.nn.SiLU(), torch.nn.Linear(24, 3),
                                torch.nn.Sigmoid())
    expected, expected_loss = _train(model, OPTIMIZERS[name], "cpu")
    before = pypto_torch.fallback_ops()
    actual, actual_loss = _train(model, OPTIMIZERS[name], "pto")
    assert pypto_torch.fallback_ops() == before, "a training step left the device"
    assert actual_loss == pytest.approx(expected_loss, rel=1e-5)
    for want, got in zip(expected, actual):
        assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_classifier_forward_and_backward_are_native():
    model = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.ReLU(), torch.nn.Linear(20, 5)).to("pto")
    x = torch.randn(4, 10, device="pto")
    before = pypto_torch.fallback_ops()
    logits = model(x)
    torch.log_softmax(logits, -1).sum().backward()
    assert pypto_torch.fallback_ops() == before
