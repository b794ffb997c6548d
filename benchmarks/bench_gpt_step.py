"""Benchmark the verify kernel's GPT training step in bf16 autocast against the shape it had before
(LayerNorm and biases, loss in autocast's fp32): step time, model TFLOP/s, and the ratio, on one GPU.
Then the host's side of the kernel's step: how long the host takes to issue one step with autograd's
worker thread and without it (the kernel's choice), against what the GPU alone needs (the same step
captured once in a CUDA graph and replayed). A step is steady only while the host issues faster than the
GPU runs it.

    python benchmarks/bench_gpt_step.py [--steps 25] [--repeats 3]      (on the device: needs CUDA)
    python benchmarks/bench_gpt_step.py --small                         (CPU run of the same code)
    python benchmarks/bench_gpt_step.py --smoke                         (the same, 2 steps, 1 repeat: CI)

Target (issue 6): the kernel's eager bf16 step >= 280 TFLOP/s of model FLOPs on one H200.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import add_smoke
from verify.train import FULL, SMALL, Block, Gpt, GptConfig, StepClock, batch_of, flops_per_token


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
        train_step(model, optimizer, inputs, targets, config, device, loss_in_autocast=loss_in_autocast)
        if step >= 5:
            clock.mark()
    return statistics.median(clock.step_seconds()) * 1000


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    config: GptConfig,
    device: torch.device,
    in_graph: bool = False,
    loss_in_autocast: bool = False,
) -> None:
    """The kernel's bf16 step: autocast forward, loss on the bf16 logits (in autocast's fp32 with
    `loss_in_autocast`, as before), backward, AdamW (autocast's cast cache off inside a CUDA graph, where
    cached casts would outlive the capture)."""
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=not in_graph):
        logits = model(inputs)
        if loss_in_autocast:
            loss = F.cross_entropy(logits.view(-1, config.vocab), targets.reshape(-1))
    if not loss_in_autocast:
        loss = F.cross_entropy(logits.view(-1, config.vocab), targets.reshape(-1))
    loss.backward()
    optimizer.step()


def issue_ms(config: GptConfig, device: torch.device, steps: int, worker_thread: bool) -> float:
    """Median host time to issue one step from an idle GPU (synchronised before each step)."""
    torch.manual_seed(0)
    model = Gpt(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, fused=device.type == "cuda")
    inputs, targets = batch_of(config, device, torch.Generator().manual_seed(0))
    times = []
    with torch.autograd.set_multithreading_enabled(worker_thread):
        for step in range(steps + 3):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            started = time.perf_counter()
            train_step(model, optimizer, inputs, targets, config, device)
            if step >= 3:
                times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def graphed_ms(config: GptConfig, device: torch.device, steps: int) -> float:
    """Median GPU time of the step captured in one CUDA graph: the step with no host in the way."""
    torch.manual_seed(0)
    model = Gpt(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, fused=True, capturable=True)
    inputs, targets = batch_of(config, device, torch.Generator().manual_seed(0))
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):  # warm-up off the default stream, as torch.cuda.graph requires
        for _ in range(3):
            train_step(model, optimizer, inputs, targets, config, device, in_graph=True)
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        train_step(model, optimizer, inputs, targets, config, device, in_graph=True)
    clock = StepClock(device)
    for _ in range(steps + 1):
        clock.mark()
        graph.replay()
    clock.mark()
    return statistics.median(clock.step_seconds()[1:]) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--small", action="store_true", help="the kernel's CPU configuration")
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.small, args.steps, args.repeats = True, 2, 1
    config = SMALL if args.small else FULL
    device = torch.device("cuda", 0) if torch.cuda.is_available() and not args.small else torch.device("cpu")
    tokens = config.batch * config.sequence
    results = {}
    for name, build, in_autocast in (
        ("before: LayerNorm, biases, fp32 loss", old_model, True),
        ("kernel: RMSNorm, no biases, bf16 loss", Gpt, False),
    ):
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
    threaded = statistics.median(issue_ms(config, device, args.steps, True) for _ in range(args.repeats))
    calling = statistics.median(issue_ms(config, device, args.steps, False) for _ in range(args.repeats))
    print(
        f"host issue time of one step: {threaded:.2f} ms with autograd's worker thread, {calling:.2f} ms on the "
        f"calling thread (the kernel's), ratio {calling / threaded:.2f}"
    )
    if device.type == "cuda":
        gpu = statistics.median(graphed_ms(config, device, args.steps) for _ in range(args.repeats))
        print(
            f"GPU alone (step in a CUDA graph): {gpu:.2f} ms; host headroom {gpu / threaded:.2f}x with the "
            f"worker thread, {gpu / calling:.2f}x on the calling thread"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
