"""Autograd and training on pto give CPU's numbers."""

import copy

import torch
from torch.testing import assert_close

from error_bounds import Bound, assert_within_bound, gamma, matmul_bound


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
    # No per-element bound follows a training run; to first order (the run's feedback of
    # a parameter's difference into later gradients left out): each step's gradients are
    # GEMMs over the batch (64 terms) or the widths (32, 1), within 2 gamma_64 M_t, M_t the
    # largest sum|g||a| of the step (at most 1.7 in this run, seed 0: 2 gamma_64 M_t <= 1.3e-5);
    # SGD with momentum 0.9 and lr 0.05 sums them into the parameters as
    # lr sum_t b_t / (1 - 0.9) = 1.4e-4 after 50 steps; the forward's own (2 gamma_33 x 6.7
    # = 2.6e-5 a step, |x| @ |W| at most 6.7) reaches them through the loss's gradient,
    # less than doubling that: atol 3e-4, not below it (the losses' alike, |dL| <=
    # 2 |y - t| |dy| mean over the batch, smaller).
    tolerance = {"atol": 3e-4, "rtol": 1e-5}
    assert_close(torch.tensor(pto_losses), torch.tensor(cpu_losses), **tolerance)
    for cpu_param, pto_param in zip(cpu_model.parameters(), pto_model.parameters()):
        assert pto_param.device.type == "pto"
        assert_close(pto_param.cpu(), cpu_param, **tolerance)
    assert pto_losses[-1] < pto_losses[0]


def test_gradients_match_cpu():
    x = torch.randn(5, 3, requires_grad=True)
    w = torch.randn(3, 4, requires_grad=True)
    (torch.tanh(x @ w) ** 2).sum().backward()
    x_pto = x.detach().to("pto").requires_grad_()
    w_pto = w.detach().to("pto").requires_grad_()
    (torch.tanh(x_pto @ w_pto) ** 2).sum().backward()
    assert x_pto.grad.device.type == "pto"
    # The upstream gradient G = 2 t (1 - t^2), t = tanh(z), z = x @ w: z within
    # 2 gamma_3 (|x| @ |w|) (matmul_bound), G' = (2 - 6t^2)(1 - t^2) at most 2 in size, and
    # G's own chain (tanh within 2 ulps, three roundings after it) within 20 u per side
    # (absolute: |t| <= 1).
    # The gradients are GEMMs of G (4 and 5 terms): G's difference carried through them
    # (times 1 + gamma, each side's rounding of it), plus their own matmul_bound. First
    # order (G's second derivative times dz^2 left out).
    u = torch.finfo(torch.float32).eps / 2
    xd, wd = x.detach().double(), w.detach().double()
    t = torch.tanh(xd @ wd)
    g = 2 * t * (1 - t ** 2)
    d_g = 2 * matmul_bound(x.detach(), w.detach()).value + 2 * 20 * u
    x_bound = (1 + gamma(4)) * (d_g @ wd.abs().t()) + matmul_bound(g.float(), w.detach().t()).value
    w_bound = (1 + gamma(5)) * (xd.abs().t() @ d_g) + matmul_bound(x.detach().t(), g.float()).value
    assert_within_bound(x_pto.grad.cpu(), x.grad, Bound(x_bound, "G's bound @ |w|^T + matmul_bound"), "x.grad")
    assert_within_bound(w_pto.grad.cpu(), w.grad, Bound(w_bound, "|x|^T @ G's bound + matmul_bound"), "w.grad")
