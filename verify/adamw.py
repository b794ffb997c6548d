"""AdamW written in torch's foreach ops, for `--quick`: `torch.optim`'s first step imports torch._dynamo
(and sympy with it), 2.7 s of a quick run on an H200, which a health check should not pay. The update is
torch.optim.AdamW's (decoupled weight decay, bias-corrected moments); the step count lives on the device,
so the step is capturable in a CUDA graph (`verify.graphs`) and never syncs the host. The full run keeps
`torch.optim.AdamW` (fused), as training jobs use it."""

from __future__ import annotations

from collections.abc import Iterable

import torch


class TorchOpsAdamW:
    """`zero_grad` and `step` of AdamW over `params`, with torch.optim.AdamW's defaults but `lr`."""

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
    ) -> None:
        self.params: list[torch.Tensor] = [p for p in params if p.requires_grad]  # the foreach ops take Tensor lists
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.param_groups = [{"params": self.params, "lr": lr}]  # GradScaler.unscale_ reads the groups' params
        self.state: dict = {}
        self.steps = torch.zeros((), device=self.params[0].device, dtype=torch.float32)
        self.exp_avg = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for param in self.params:
            param.grad = None

    @torch.no_grad()
    def step(self) -> None:
        beta1, beta2 = self.betas
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        self.steps += 1
        torch._foreach_mul_(self.params, 1 - self.lr * self.weight_decay)
        torch._foreach_lerp_(self.exp_avg, grads, 1 - beta1)
        torch._foreach_mul_(self.exp_avg_sq, beta2)
        torch._foreach_addcmul_(self.exp_avg_sq, grads, grads, 1 - beta2)
        step_size = self.lr / (1 - torch.pow(beta1, self.steps))
        inverse_root = torch.rsqrt(1 - torch.pow(beta2, self.steps))
        denominators = torch._foreach_sqrt(self.exp_avg_sq)
        torch._foreach_mul_(denominators, inverse_root)
        torch._foreach_add_(denominators, self.eps)
        updates = torch._foreach_div(self.exp_avg, denominators)
        torch._foreach_mul_(updates, step_size)
        torch._foreach_sub_(self.params, updates)
