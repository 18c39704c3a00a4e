"""Autograd and training on pto give CPU's numbers."""

import copy

import torch
from torch.testing import assert_close


def _train(model: torch.nn.Module, inputs, targets, device: str, steps: int = 50):
    model = copy.deepcopy(model).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = inputs.to(device), targets.to(device)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, model


def test_mlp_trains_like_cpu_for_50_steps():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    inputs, targets = torch.randn(64, 16), torch.randn(64, 1)
    cpu_losses, cpu_model = _train(model, inputs, targets, "cpu")
    pto_losses, pto_model = _train(model, inputs, targets, "pto")
    assert_close(torch.tensor(pto_losses), torch.tensor(cpu_losses), atol=1e-5, rtol=1e-5)
    for cpu_param, pto_param in zip(cpu_model.parameters(), pto_model.parameters()):
        assert pto_param.device.type == "pto"
        assert_close(pto_param.cpu(), cpu_param, atol=1e-5, rtol=1e-5)
    assert pto_losses[-1] < pto_losses[0]


def test_gradients_match_cpu():
    x = torch.randn(5, 3, requires_grad=True)
    w = torch.randn(3, 4, requires_grad=True)
    (torch.tanh(x @ w) ** 2).sum().backward()
    x_pto = x.detach().to("pto").requires_grad_()
    w_pto = w.detach().to("pto").requires_grad_()
    (torch.tanh(x_pto @ w_pto) ** 2).sum().backward()
    assert x_pto.grad.device.type == "pto"
    assert_close(x_pto.grad.cpu(), x.grad)
    assert_close(w_pto.grad.cpu(), w.grad)
