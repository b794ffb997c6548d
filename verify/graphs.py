"""CUDA Graphs: a full training step of the GPT (bf16 autocast, fused AdamW with its state on the GPU)
captured once and replayed, against the same steps run eagerly from the same seed (the training
check's bf16 run, whose optimizer is the same capturable one, or a run of its own).

Checks that capture works and that every replayed step's loss equals the eager step's within a
tolerance; figures are the replayed step time and its speedup over the eager step. A capture that
raises, or a replay that computes something else, fails with the exception text or the losses.

`VERIFY_FAULT_GRAPH=sync` (a host sync inside the capture, as a stack or model that is not graph-safe
does) and `=corrupt` (a weight overwritten behind the graph's back after the capture) show that each
failure is caught and named.
"""

from __future__ import annotations

import math
import os
import statistics
from typing import Any

import torch

from verify.results import Results, mark_phase
from verify.schema import GRAPHS_BF16_REPLAY, GRAPHS_SPEEDUP, Figure
from verify.train import FULL, TRAINING_SEED, GptConfig, StepClock, run_steps, seeded_run, train_step

WARMUP = 3  # eager steps before the capture, on a side stream, as torch.cuda.graph requires
TOLERANCE = 2e-2  # relative, per step: the same kernels run, only the optimizer's bias correction moves on device


def _replayed(
    config: GptConfig, device: torch.device, steps: int, ops_optimizer: bool
) -> tuple[list[float], list[float]]:
    """Losses of WARMUP eager steps then `steps` replays of the captured step, and the replays' times (the
    optimizer the training check used: `ops_optimizer` with --quick)."""
    model, optimizer, (inputs, targets) = seeded_run(config, device, TRAINING_SEED, ops_optimizer)
    scaler = torch.amp.GradScaler(device.type, enabled=False)
    losses = []
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(WARMUP):
            losses.append(train_step(model, optimizer, scaler, inputs, targets, config, "bf16", in_graph=True).detach())
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    fault = os.environ.get("VERIFY_FAULT_GRAPH", "")
    mark_phase("cuda_graphs/capture")
    with torch.cuda.graph(graph):
        static_loss = train_step(model, optimizer, scaler, inputs, targets, config, "bf16", in_graph=True)
        if fault == "sync":
            static_loss.item()
    if fault == "corrupt":
        with torch.no_grad():
            model.embed.weight.mul_(3.0)
    mark_phase("cuda_graphs/replay")
    clock = StepClock(device)
    for _ in range(steps):
        clock.mark()
        graph.replay()
        losses.append(static_loss.detach().clone())
    clock.mark()
    return [x.item() for x in losses], clock.step_seconds()


def cuda_graphs(results: Results, device: torch.device, quick: bool, eager: dict[str, Any] | None = None) -> None:
    """Capture and replay of the training step, judged against the eager run (`eager`: the training check's
    bf16 run; run here when it is missing); on CPUs, a note that it did not run."""
    if device.type != "cuda":
        results.figure(GRAPHS_BF16_REPLAY, Figure(None, "ms", reason="CUDA graphs need a GPU"))
        return
    steps = 6 if quick else 10
    if eager is None or len(eager["losses"]) < WARMUP + steps:
        eager = run_steps(FULL, device, "bf16", WARMUP + steps, ops_optimizer=quick)
    eager_losses = eager["losses"][: WARMUP + steps]
    try:
        replay_losses, replay_s = _replayed(FULL, device, steps, quick)
    except RuntimeError as exc:
        text = str(exc).strip().splitlines()
        results.check(
            "graphs", "capture", False, f"capturing the bf16 training step raised: {text[0][:300] if text else exc!r}"
        )
        return
    results.check("graphs", "capture", True, f"bf16 training step captured, replayed {steps} times")
    worst = max(abs(r - e) / max(abs(e), 1e-6) for r, e in zip(replay_losses, eager_losses))
    finite = all(math.isfinite(x) for x in replay_losses)
    matches = finite and worst <= TOLERANCE
    results.check(
        "graphs",
        "replay_matches_eager",
        matches,
        f"replayed losses {replay_losses[WARMUP]:.4f} -> {replay_losses[-1]:.4f}, eager "
        f"{eager_losses[WARMUP]:.4f} -> {eager_losses[-1]:.4f}: largest relative difference {worst:.1e} "
        f"(limit {TOLERANCE:.0e})",
        worst,
    )
    replay_ms, eager_ms = statistics.median(replay_s) * 1000, eager["step_s"] * 1000
    if not matches:  # the time of a replay that computed something else is no figure of the step (lockgen's
        # training floors judge a host-bound step by the replay's time)
        reason = "the replay computed something other than the eager step (graphs/replay_matches_eager)"
        results.figure(GRAPHS_BF16_REPLAY, Figure(None, "ms", reason=reason, eager_step_ms=round(eager_ms, 2)))
        results.figure(GRAPHS_SPEEDUP, Figure(None, "x", reason=reason))
        return
    results.figure(GRAPHS_BF16_REPLAY, Figure(replay_ms, "ms", steps=steps, eager_step_ms=round(eager_ms, 2)))
    results.figure(GRAPHS_SPEEDUP, Figure(eager_ms / replay_ms, "x"))
