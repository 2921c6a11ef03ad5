"""DecoupledLionW (ours; Composer has no Lion) and the scheduler names."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from launcher.train.optim import DecoupledLionW


def regression() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 8, generator=g)
    return x, x @ torch.arange(1.0, 9.0)


def test_lion_minimises_a_regression() -> None:
    x, y = regression()
    w = torch.zeros(8, requires_grad=True)
    opt = DecoupledLionW([w], lr=0.05, betas=(0.9, 0.99))
    start = ((x @ w - y) ** 2).mean().item()
    for _ in range(300):
        loss = ((x @ w - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < start * 0.01
    assert torch.allclose(w.detach(), torch.arange(1.0, 9.0), atol=0.2)


def test_lion_update_is_a_sign_step_of_size_lr() -> None:
    w = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    opt = DecoupledLionW([w], lr=0.1, betas=(0.9, 0.99))
    w.grad = torch.tensor([0.5, -7.0, 0.0])
    opt.step()
    assert torch.allclose(w.detach(), torch.tensor([0.9, -1.9, 3.0]))


def test_lion_weight_decay_is_decoupled_and_scaled_by_the_schedule() -> None:
    w = torch.tensor([2.0], requires_grad=True)
    opt = DecoupledLionW([w], lr=0.1, weight_decay=0.5)
    w.grad = torch.zeros(1)
    opt.step()  # decay by lr/initial_lr * wd = 0.5, no gradient step
    assert torch.allclose(w.detach(), torch.tensor([1.0]))
    opt.param_groups[0]["lr"] = 0.05  # a scheduler halved the LR: half the decay
    opt.step()
    assert torch.allclose(w.detach(), torch.tensor([0.75]))
