"""Training: a small GPT on learnable synthetic data in fp32, TF32, bf16 autocast and fp16 with GradScaler.

The model is today's GPT shape (RMSNorm, no biases, tied embedding, causal SDPA), eager by default.

Checks that loss falls, stays finite and that memory does not grow across steps; figures are step
time, tokens/s and model TFLOP/s (llm.c's 6N + 12·L·d·T FLOPs per token), and the AMP speedups.
"""

from __future__ import annotations

import contextlib
import copy
import math
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from verify.adamw import TorchOpsAdamW
from verify.nvml import Telemetry, nvml_index
from verify.perf import rest
from verify.results import Results
from verify.schema import (
    Figure,
    training_model_tflops,
    training_speedup,
    training_step_ms,
    training_tokens,
)


@dataclass(frozen=True)
class GptConfig:
    vocab: int
    width: int
    layers: int
    heads: int
    sequence: int
    batch: int


FULL = GptConfig(vocab=32768, width=512, layers=12, heads=8, sequence=512, batch=32)  # about 55M parameters
SMALL = GptConfig(vocab=256, width=64, layers=2, heads=4, sequence=32, batch=8)
HOST_PROBE_STEPS = 3  # after the timed steps of the AMP modes, on GPUs: see run_steps
# the models as their seeds initialise them, on the CPU: initialising the full model took 0.7-0.8 s of CPU on
# an H100 host (2026-12-06), a copy 0.03-0.1 s, and the training, graph and determinism runs start from the same seeds
_INITIAL: dict[tuple[GptConfig, int], Gpt] = {}
TRAINING_SEED = 0  # the training and graph runs' (verify.run builds its model on a thread: `initial_model`)


def _norm(width: int) -> nn.Module:
    """RMSNorm where this torch has it (2.4 on), else a bias-free LayerNorm: the kernel runs on older stacks too."""
    rms_norm = getattr(nn, "RMSNorm", None)
    return rms_norm(width) if rms_norm is not None else nn.LayerNorm(width, bias=False)


class Block(nn.Module):
    def __init__(self, config: GptConfig) -> None:
        super().__init__()
        self.heads = config.heads
        self.norm1, self.norm2 = _norm(config.width), _norm(config.width)
        self.qkv = nn.Linear(config.width, 3 * config.width, bias=False)
        self.proj = nn.Linear(config.width, config.width, bias=False)
        self.mlp = nn.Sequential(
            nn.Linear(config.width, 4 * config.width, bias=False),
            nn.GELU(),
            nn.Linear(4 * config.width, config.width, bias=False),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, length, width))
        return x + self.mlp(self.norm2(x))


class Gpt(nn.Module):
    def __init__(self, config: GptConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(config.vocab, config.width)
        self.position = nn.Embedding(config.sequence, config.width)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.norm = _norm(config.width)
        self.head = nn.Linear(config.width, config.vocab, bias=False)
        self.head.weight = self.embed.weight
        nn.init.normal_(self.embed.weight, std=0.02)  # GPT-2's init: logits start near uniform, loss near ln(vocab)
        nn.init.normal_(self.position.weight, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.position(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def flops_per_token(model: nn.Module, config: GptConfig) -> float:
    params = sum(p.numel() for p in model.parameters())
    return 6 * params + 12 * config.layers * config.width * config.sequence


def batch_of(config: GptConfig, device: torch.device, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Counting sequences over a sixteenth of the vocabulary: the unigram statistics alone take the
    loss from ln(vocab) to ln(vocab/16) within a few steps, so a loss that does not fall is a broken stack."""
    span = max(config.vocab // 16, 2)
    starts = torch.randint(0, span, (config.batch, 1), generator=generator)
    tokens = ((starts + torch.arange(config.sequence + 1)) % span).to(device)
    return tokens[:, :-1], tokens[:, 1:]


def seeded_run(
    config: GptConfig, device: torch.device, seed: int, ops_optimizer: bool = False
) -> tuple[Gpt, torch.optim.Optimizer | TorchOpsAdamW, tuple[torch.Tensor, torch.Tensor]]:
    """The model, its AdamW and the batch of a run from `seed`. On GPUs the optimizer is fused and capturable
    (the step count stays on the GPU, as a CUDA graph needs: verify.graphs replays this run); with
    `ops_optimizer` it is the same update in torch ops (`verify.adamw`: no torch._dynamo import)."""
    initial_model(config, seed)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    model = copy.deepcopy(_INITIAL[config, seed]).to(device)  # the same bits as a fresh model from `seed`
    cuda = device.type == "cuda"
    optimizer = (
        TorchOpsAdamW(model.parameters(), lr=3e-3)
        if ops_optimizer
        else torch.optim.AdamW(model.parameters(), lr=3e-3, fused=cuda, capturable=cuda)
    )
    return model, optimizer, batch_of(config, device, generator)


def training_config(device: torch.device) -> GptConfig:
    """The model the training and graph runs train: the full one on GPUs, the small one on CPUs."""
    return FULL if device.type == "cuda" else SMALL


def initial_model(config: GptConfig, seed: int) -> None:
    """Seeds torch's global generator with `seed` and, once per config and seed, initialises the model from it on
    the CPU (kept in `_INITIAL`): the same bits in whichever thread, provided no other draws from the global
    generator meanwhile (verify.run builds the training model during the correctness checks, whose random inputs
    come from generators of their own, and joins it before the fingerprint, which seeds the global one)."""
    torch.manual_seed(seed)
    if (config, seed) not in _INITIAL:
        _INITIAL[config, seed] = Gpt(config)


def run_steps(
    config: GptConfig,
    device: torch.device,
    mode: str,
    steps: int,
    seed: int = TRAINING_SEED,
    compiled: bool = False,
    warmup: int = 3,
    ops_optimizer: bool = False,
) -> dict[str, Any]:
    """Trains from a fixed seed on one fixed batch. Steps are queued without a host sync; each step after
    `warmup` is timed with CUDA events (wall clock on CPUs) and the figure is their median. On GPUs, in the
    AMP modes, a few more steps each start from an idle GPU, and the median host time to issue one is
    `host_issue_ms`: when it comes near the step time, the host, not the GPU, set the pace (an fp32 or TF32
    step, 70-140 ms of GPU work on an H100, is never host-bound, so those modes do without)."""
    model, optimizer, (inputs, targets) = seeded_run(config, device, seed, ops_optimizer)
    forward = torch.compile(model) if compiled else model
    scaler = torch.amp.GradScaler(device.type, enabled=mode == "fp16")
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    torch.backends.cudnn.allow_tf32 = mode == "tf32"
    losses, memory = [], []
    clock = StepClock(device)
    issue_s = []
    with backward_on_this_thread():
        for step in range(steps + (HOST_PROBE_STEPS if device.type == "cuda" and mode in ("bf16", "fp16") else 0)):
            if step == warmup:
                clock.mark()
            probing = step >= steps
            if probing:
                torch.cuda.synchronize(device)
                started = time.perf_counter()
            loss = train_step(forward, optimizer, scaler, inputs, targets, config, mode)
            losses.append(loss.detach())
            if probing:
                issue_s.append(time.perf_counter() - started)
            memory.append(torch.cuda.memory_allocated(device) if device.type == "cuda" else 0)
            if warmup <= step < steps:
                clock.mark()
    per_step = clock.step_seconds()
    seconds = statistics.median(per_step) if per_step else float("nan")
    torch.backends.cuda.matmul.allow_tf32 = False
    return {
        "losses": [x.item() for x in losses],
        "step_s": seconds,
        "steps_ms": [round(x * 1000, 2) for x in per_step],
        "memory": memory,
        "host_issue_ms": round(statistics.median(issue_s) * 1000, 2) if issue_s else None,
        "flops_per_token": flops_per_token(model, config),
    }


def train_step(
    forward: Callable[[torch.Tensor], torch.Tensor],
    optimizer: torch.optim.Optimizer | TorchOpsAdamW,
    scaler: torch.amp.GradScaler,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    config: GptConfig,
    mode: str,
    in_graph: bool = False,
) -> torch.Tensor:
    """One step in a precision mode (fp32, tf32, bf16 autocast, fp16 autocast with the scaler): the loss.
    Inside a CUDA graph autocast's cast cache is off (cached casts would outlive the capture)."""
    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(mode)
    device_type = inputs.device.type
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(
        device_type,
        dtype=autocast_dtype or torch.float32,
        enabled=autocast_dtype is not None,
        cache_enabled=not in_graph,
    ):
        logits = forward(inputs)
        if mode != "bf16":
            loss = F.cross_entropy(logits.view(-1, config.vocab), targets.reshape(-1))
    if mode == "bf16":  # on the bf16 logits, as llm.c does: the softmax accumulates in fp32, and autocast's
        # fp32 copy of the logits (2 GiB for the full model, each step, both ways) is what this saves;
        # fp16 keeps autocast's fp32 loss, since its range would underflow the softmax gradients
        loss = F.cross_entropy(logits.view(-1, config.vocab), targets.reshape(-1))
    scaler.scale(loss).backward()
    # GradScaler duck-types it: TorchOpsAdamW has the param_groups and step() it uses
    scaler.step(optimizer)  # type: ignore[arg-type]
    scaler.update()
    return loss


def backward_on_this_thread() -> contextlib.AbstractContextManager:
    """Backward on the calling thread instead of autograd's per-device worker thread: the same arithmetic
    with one thread hand-off less each way, so the host issues a step sooner.

    The eager step is queued while the GPU runs the one before it, so it is steady only while the host
    issues a step faster than the GPU runs it. Measured on H200 VMs (torch 2.11, full model, bf16): the GPU
    alone needs 20.0-20.2 ms a step (the step replayed from a CUDA graph); the host issued one in 15.9 ms
    with the worker thread and 11.7 ms without on one machine, 21.7 and 19.9 ms on another
    (`benchmarks/bench_gpt_step.py`). torch before 1.13 has no switch and keeps the worker thread."""
    switch = getattr(torch.autograd, "set_multithreading_enabled", None)
    return switch(False) if switch is not None else contextlib.nullcontext()


@contextlib.contextmanager
def attention_built_in() -> Iterator[None]:
    """Training and graph replay with cuDNN's fused attention off: bf16 and fp16 attention runs FlashAttention's
    kernels and fp32 the memory-efficient ones, all compiled into torch, where cuDNN's are compiled at run time
    through the CUDA JIT cache. On a node whose cache was empty (its first verify) the training phase took 2.9-3.4 s
    with cuDNN's and 1.5-1.8 s without; with the cache filled 1.75-2.0 s against 1.5-1.8 s, the bf16 steps in the
    same spread (lent H100s, torch 2.11, 2026-12-07: `envs/examples/numerics-fingerprint/budget/`). The
    correctness checks still hold cuDNN's attention to the math reference. A torch without the switch has no cuDNN
    attention."""
    switches = torch.backends.cuda
    enabled = getattr(switches, "cudnn_sdp_enabled", None)
    enable = getattr(switches, "enable_cudnn_sdp", None)
    if enabled is None or enable is None:
        yield
        return
    was_on = enabled()
    enable(False)
    try:
        yield
    finally:
        enable(was_on)


class StepClock:
    """Per-step times without a host sync: a CUDA event after each step (a wall-clock reading on CPUs)."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.marks: list = []

    def mark(self) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def step_seconds(self) -> list[float]:
        if self.cuda and self.marks:
            self.marks[-1].synchronize()
            return [a.elapsed_time(b) / 1000 for a, b in zip(self.marks, self.marks[1:])]
        return [b - a for a, b in zip(self.marks, self.marks[1:])]


def training(
    results: Results, device: torch.device, quick: bool, compiled: bool, telemetry: Telemetry | None = None
) -> dict[str, dict[str, object]]:
    """Every precision mode: loss falls, finite, no memory growth; figures for speed and AMP speedups.
    Each step-time figure carries the GPU's clocks, power and clock limits during that mode. Returns
    each mode's run. fp32 and tf32 (whose steps vary by under 1% on an H200) take 10 steps, the fast
    AMP modes 20 (10 with --quick, whose optimizer is written in torch ops: `verify.adamw`). --quick's fp32
    takes 6, 4 of them timed: on an H100 (2026-12-06) its steps spread by 0.1% (137.8-137.9 ms) and its loss
    was 10.49, 10.18, 8.03, 7.68, 7.62, 7.63 in the first six (the loss check's bound: 8.39)."""
    config = training_config(device)
    modes = ["fp32", "tf32", "bf16", "fp16"] if device.type == "cuda" and not quick else ["fp32", "bf16"]
    step_ms: dict[str, float] = {}
    runs = {}
    for mode in modes + (["bf16-compiled"] if compiled else []):
        steps, warmup = (6, 2) if quick and mode == "fp32" else (10 if quick or mode in ("fp32", "tf32") else 20, 3)
        rest(device, quick)  # each mode from below the power cap, as the GEMM figures
        started = time.monotonic()
        run = runs[mode] = run_steps(
            config,
            device,
            mode.split("-")[0],
            steps,
            compiled=mode.endswith("compiled"),
            warmup=warmup,
            ops_optimizer=quick,
        )
        ended = time.monotonic()
        results.phase(f"training_{mode}", ended - started)
        during = (
            telemetry.during(nvml_index(device.index or 0), started, ended)
            if telemetry and device.type == "cuda"
            else None
        )
        losses = run["losses"]
        finite = all(math.isfinite(x) for x in losses)
        results.check(
            "training", f"{mode}_finite", finite, f"{len(losses)} steps, losses {losses[0]:.3f} -> {losses[-1]:.3f}"
        )
        tail = statistics.mean(losses[-3:])
        results.check(
            "training",
            f"{mode}_loss_falls",
            finite and tail < losses[0] * 0.8,
            f"first {losses[0]:.3f}, mean of last 3 {tail:.3f} (must be < 80% of first)",
            tail,
        )
        if device.type == "cuda":
            growth = run["memory"][-1] - run["memory"][2]
            results.check(
                "training",
                f"{mode}_no_memory_growth",
                growth <= 2**20,
                f"allocated memory grew {growth / 2**20:.2f} MiB from step 3 to step {steps}",
                growth,
            )
        median = run["step_s"]
        step_ms[mode] = median * 1000
        tokens = config.batch * config.sequence / median
        step = Figure(
            median * 1000,
            "ms",
            batch=config.batch,
            sequence=config.sequence,
            steps_ms=tuple(run["steps_ms"]),
            gpu=during,
            host_issue_ms=run["host_issue_ms"],
        )
        results.figure(training_step_ms(mode), step)
        results.figure(training_tokens(mode), Figure(tokens, "tokens/s"))
        params = run["flops_per_token"] - 12 * config.layers * config.width * config.sequence
        model_tflops = tokens * run["flops_per_token"] / 1e12
        results.figure(training_model_tflops(mode), Figure(model_tflops, "TFLOP/s", params_m=round(params / 6e6, 1)))
    for fast in ("bf16", "fp16"):
        for slow in ("fp32", "tf32"):
            if fast in step_ms and slow in step_ms:
                results.figure(training_speedup(fast, slow), Figure(step_ms[slow] / step_ms[fast], "x"))
    return runs
