"""Benchmark the verify kernel's GPT training step in bf16 autocast against the shape it had before
(LayerNorm and biases, loss in autocast's fp32): step time, model TFLOP/s, and the ratio, on one GPU.

    python benchmarks/bench_gpt_step.py [--steps 25] [--repeats 3]      (on the device: needs CUDA)
    python benchmarks/bench_gpt_step.py --small                         (CPU smoke run of the same code)

Target (issue 6): the kernel's eager bf16 step >= 280 TFLOP/s of model FLOPs on one H200.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from verify.train import FULL, SMALL, Block, Gpt, GptConfig, StepClock, batch_of, flops_per_token  # noqa: E402


class OldBlock(Block):
    """The block as it was: LayerNorm with bias, Linear layers with biases (the same forward)."""

    def __init__(self, config: GptConfig) -> None:
        nn.Module.__init__(self)
        self.heads, width = config.heads, config.width
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))


def old_model(config: GptConfig) -> Gpt:
    model = Gpt(config)
    model.blocks = nn.ModuleList(OldBlock(config) for _ in range(config.layers))
    model.norm = nn.LayerNorm(config.width)
    return model


def step_ms(model: nn.Module, config: GptConfig, device: torch.device, steps: int, loss_in_autocast: bool) -> float:
    """Median per-step time after 5 warm-up steps, queued without a host sync and timed as the kernel times
    them (`verify.train.StepClock`: CUDA events on GPUs, wall clock on CPUs)."""
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, fused=device.type == "cuda")
    inputs, targets = batch_of(config, device, torch.Generator().manual_seed(0))
    clock = StepClock(device)
    for step in range(steps + 5):
        if step == 5:
            clock.mark()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = model(inputs)
            if loss_in_autocast:
                loss = F.cross_entropy(logits.view(-1, config.vocab), targets.reshape(-1))
        if not loss_in_autocast:
            loss = F.cross_entropy(logits.view(-1, config.vocab), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        if step >= 5:
            clock.mark()
    return statistics.median(clock.step_seconds()) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--small", action="store_true", help="the kernel's CPU configuration")
    args = parser.parse_args()
    config = SMALL if args.small else FULL
    device = torch.device("cuda", 0) if torch.cuda.is_available() and not args.small else torch.device("cpu")
    tokens = config.batch * config.sequence
    results = {}
    for name, build, in_autocast in (("before: LayerNorm, biases, fp32 loss", old_model, True),
                                     ("kernel: RMSNorm, no biases, bf16 loss", Gpt, False)):
        runs = []
        for repeat in range(args.repeats):
            torch.manual_seed(repeat)
            model = build(config)
            runs.append(step_ms(model, config, device, args.steps, in_autocast))
        ms = statistics.median(runs)
        results[name] = ms
        tflops = tokens / (ms / 1000) * flops_per_token(model, config) / 1e12
        print(f"{name}: {ms:.2f} ms a step, {tflops:.3g} TFLOP/s of model FLOPs ({device}, median of {args.repeats})")
    before, after = results.values()
    print(f"ratio kernel/before: {after / before:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
