"""Convolution throughput: a stack of ResNet-style basic blocks (3x3 conv, ReLU, 3x3 conv, residual add),
channels_last, bf16 and fp16 (bf16 alone with `--quick`), forward and backward, with cuDNN's autotuner on
(`cudnn.benchmark`).

The figure is TFLOP/s of the convolutions alone (forward, gradient of the input, gradient of the
weights: three times the forward's 2·N·H·W·C_in·C_out·9), the best of a few short bursts, as the GEMM
figures. Beside it: cuDNN's version, the settings that steer its algorithm choice (enabled, benchmark,
deterministic) as they were during the run, and on GPUs the kernels that took the time (read through
torch's profiler, only when lockgen passed the floor and the figure missed it: profiling costs seconds),
so a slow figure names what cuDNN picked. lockgen judges the figure against the arch's floor.

`VERIFY_FAULT_CUDNN=untuned` (autotuner off, deterministic algorithms on) and `=off` (cuDNN disabled:
torch's own convolutions) stand in for a stack whose cuDNN picks slow algorithms, to show the floor
catches it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F

from verify.perf import rest, time_bursts
from verify.results import Results
from verify.schema import CudnnChoice, Figure, KernelShare, conv

BLOCKS = 4


def _shape(device: torch.device) -> tuple[int, int, int]:
    """(batch, channels, side): ResNet's 28x28 stage at 256 channels on GPUs, a smoke size on CPUs."""
    return (128, 256, 28) if device.type == "cuda" else (4, 16, 8)


def _flops(batch: int, channels: int, side: int) -> int:
    forward = 2 * batch * side * side * channels * channels * 9
    return 3 * forward * 2 * BLOCKS  # two convolutions a block; forward, input gradient, weight gradient


def _step(x: torch.Tensor, weights: list[torch.Tensor]) -> None:
    out = x
    for first, second in zip(weights[::2], weights[1::2]):
        out = out + F.conv2d(F.relu(F.conv2d(out, first, padding=1)), second, padding=1)
    out.float().square().mean().backward()


def _cudnn_settings() -> dict[str, bool]:
    backend = torch.backends.cudnn
    return {"enabled": backend.enabled, "benchmark": backend.benchmark, "deterministic": backend.deterministic}


class _CudnnSettings:
    """cuDNN's switches for the measurement (autotuner on, unless a fault stands in for a bad stack), restored after."""

    def __init__(self) -> None:
        self.saved = _cudnn_settings()

    def __enter__(self) -> CudnnChoice:
        backend = torch.backends.cudnn
        fault = os.environ.get("VERIFY_FAULT_CUDNN", "")
        backend.benchmark = fault != "untuned"
        backend.deterministic = fault == "untuned"
        backend.enabled = fault != "off"
        return CudnnChoice(backend.enabled, backend.benchmark, backend.deterministic, fault or None)

    def __exit__(self, *_: object) -> None:
        backend = torch.backends.cudnn
        backend.enabled, backend.benchmark, backend.deterministic = (
            self.saved["enabled"],
            self.saved["benchmark"],
            self.saved["deterministic"],
        )


def _top_kernels(run: Callable[[], None], count: int = 3) -> tuple[KernelShare, ...]:
    """The GPU kernels one step spends the most time in, by name, through torch's profiler."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as profiler:
        run()
        torch.cuda.synchronize()
    rows = [
        (e.key, e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total)
        for e in profiler.key_averages()
    ]
    rows = [(name, us) for name, us in rows if us > 0]
    total = sum(us for _, us in rows) or 1.0
    top = sorted(rows, key=lambda r: -r[1])[:count]
    return tuple(KernelShare(name[:160], round(us / total, 3)) for name, us in top)


def _weights(
    channels: int, device: torch.device, dtype: torch.dtype, generator: torch.Generator
) -> Iterator[torch.Tensor]:
    for _ in range(2 * BLOCKS):
        weight = torch.randn(channels, channels, 3, 3, generator=generator) / (3 * channels**0.5)
        yield weight.to(device=device, dtype=dtype).to(memory_format=torch.channels_last).requires_grad_()


def dtypes_measured(cuda: bool, quick: bool) -> dict[str, torch.dtype]:
    """The dtypes whose throughput is measured, by figure name: fp32 on CPUs; bf16 on GPUs, and fp16 unless quick."""
    if not cuda:
        return {"fp32": torch.float32}
    return {"bf16": torch.bfloat16} if quick else {"bf16": torch.bfloat16, "fp16": torch.float16}


def conv_throughput(results: Results, device: torch.device, quick: bool, floors: dict[str, float]) -> None:
    """TFLOP/s of the block stack's convolutions per dtype (bf16, and fp16 unless `quick`; fp32 on CPUs), with
    what chose the kernels; the kernels that took the time too where the figure is below its floor (TFLOP/s by
    dtype). `quick` measures bf16 alone, as it trains in bf16 alone: fp16 convolutions run on the same tensor
    cores, and cuDNN's autotuner costs 1.3 s for them on a node whose CUDA JIT cache is empty (its
    runtime-compiled kernels are compiled then), 0.3-0.5 s after."""
    cuda = device.type == "cuda"
    batch, channels, side = _shape(device)
    flops = _flops(batch, channels, side)
    plans = dtypes_measured(cuda, quick)
    generator = torch.Generator(device="cpu").manual_seed(5)
    with _CudnnSettings() as settings:
        for name, dtype in plans.items():
            x = torch.randn(batch, channels, side, side, generator=generator).to(device=device, dtype=dtype)
            x = x.to(memory_format=torch.channels_last).requires_grad_()
            weights = list(_weights(channels, device, dtype, generator))
            rest(device, quick)
            seconds = time_bursts(
                lambda: _step(x, weights),
                device,
                bursts=2 if quick or not cuda else 3,
                per_burst=5 if cuda else 1,
                warmup=2,
            )
            measured = flops / min(seconds) / 1e12
            below_floor = cuda and name in floors and measured < floors[name]
            figure = Figure(
                measured,
                "TFLOP/s",
                batch=batch,
                channels=channels,
                side=side,
                blocks=BLOCKS,
                bursts=tuple(round(flops / s / 1e12, 1) for s in seconds),
                cudnn=settings,
                kernels=_top_kernels(lambda: _step(x, weights)) if below_floor else None,
            )
            results.figure(conv(name), figure)
