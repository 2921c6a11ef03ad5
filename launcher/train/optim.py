"""Optimizers and LR schedules named in the training config.

decoupled_adamw is Composer's DecoupledAdamW. Composer has no Lion, and
llm-foundry's is not a dependency, so DecoupledLionW is written out here
(Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"), with the
weight decay decoupled from the LR the way Composer's DecoupledAdamW does it:
scaled by lr / initial_lr, so `weight_decay` means the same in both.
"""

from __future__ import annotations

from typing import Any

import torch


class DecoupledLionW(torch.optim.Optimizer):
    def __init__(
        self, params: Any, lr: float = 1e-4, betas: tuple[float, float] = (0.9, 0.99), weight_decay: float = 0.0
    ):
        if lr <= 0:
            raise ValueError(f"lr must be positive, got {lr}")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"betas must lie in [0, 1), got {betas}")
        super().__init__(params, {"lr": lr, "betas": betas, "weight_decay": weight_decay})
        for group in self.param_groups:
            group["initial_lr"] = group["lr"]

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, wd = group["lr"], group["weight_decay"]
            beta1, beta2 = group["betas"]
            initial_lr = group["initial_lr"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if wd:
                    decay_factor = lr / initial_lr if initial_lr else 1.0
                    p.mul_(1 - decay_factor * wd)
                state = self.state[p]
                if "exp_avg" not in state:
                    state["exp_avg"] = torch.zeros_like(p)
                exp_avg = state["exp_avg"]
                # The update is the sign of an interpolation between momentum and gradient;
                # the momentum itself then moves toward the gradient with the slower beta2.
                update = exp_avg.lerp(p.grad, 1 - beta1).sign_()
                p.add_(update, alpha=-lr)
                exp_avg.lerp_(p.grad, 1 - beta2)
        return loss


def build_optimizer(o: Any, params: Any) -> torch.optim.Optimizer:
    """`o` is an OptimizerConfig."""
    if o.name == "decoupled_adamw":
        from composer.optim import DecoupledAdamW

        return DecoupledAdamW(params, lr=o.lr, betas=tuple(o.betas), eps=o.eps, weight_decay=o.weight_decay)
    if o.name == "decoupled_lionw":
        return DecoupledLionW(params, lr=o.lr, betas=tuple(o.betas), weight_decay=o.weight_decay)
    raise ValueError(f"unknown optimizer {o.name!r}")


def build_scheduler(s: Any) -> Any:
    """`s` is a SchedulerConfig."""
    from composer.optim import (
        ConstantWithWarmupScheduler,
        CosineAnnealingWithWarmupScheduler,
        LinearScheduler,
        LinearWithWarmupScheduler,
    )

    if s.name == "cosine_with_warmup":
        return CosineAnnealingWithWarmupScheduler(t_warmup=s.t_warmup, t_max=s.t_max, alpha_f=s.alpha_f)
    if s.name == "linear_decay_with_warmup":
        return LinearWithWarmupScheduler(t_warmup=s.t_warmup, alpha_i=1.0, alpha_f=s.alpha_f, t_max=s.t_max)
    if s.name == "linear":
        return LinearScheduler(alpha_i=s.alpha_i, alpha_f=s.alpha_f, t_max=s.t_max)
    if s.name == "constant_with_warmup":
        return ConstantWithWarmupScheduler(t_warmup=s.t_warmup, t_max=s.t_max)
    raise ValueError(f"unknown scheduler {s.name!r}")
