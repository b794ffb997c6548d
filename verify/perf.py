"""Performance figures: GEMM TFLOP/s per dtype and memory bandwidths (device copy, host to device and back)."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import torch

from verify.results import Results
from verify.schema import (
    DEVICE_COPY,
    DEVICE_TO_HOST,
    GEMM_BF16_SUSTAINED,
    HOST_COPY,
    HOST_TO_DEVICE,
    Figure,
    gemm,
)


def _time(function: Callable[[], object], device: torch.device, repeats: int, warmup: int = 3) -> float:
    """Seconds per call, after warm-up: CUDA events on GPUs, perf_counter on CPUs."""
    for _ in range(warmup):
        function()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeats):
            function()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000 / repeats
    started = time.perf_counter()
    for _ in range(repeats):
        function()
    return (time.perf_counter() - started) / repeats


def time_bursts(
    function: Callable[[], object], device: torch.device, bursts: int, per_burst: int, warmup: int = 0
) -> list[float]:
    """Seconds per call in each of several short timed bursts, each after its own warm-up call, after
    `warmup` calls first (an autotuner's first call, say)."""
    for _ in range(warmup):
        function()
    return [_time(function, device, per_burst, warmup=1) for _ in range(bursts)]


def _burst_figure(results: Results, name: str, flops: int, seconds: list[float], size: int) -> None:
    """The best burst's TFLOP/s as the figure, every burst's beside it."""
    bursts = tuple(round(flops / s / 1e12, 1) for s in seconds)
    results.figure(gemm(name), Figure(flops / min(seconds) / 1e12, "TFLOP/s", size=size, bursts=bursts))


def rest(device: torch.device, quick: bool) -> None:
    """An idle pause on GPUs, so that a figure starts below the power cap: 0.25 s, 0.05 s for --quick, whose
    bursts are short (0.4 s before issue 20, twelve of them a full run). On an H100 (2026-12-06, the quick
    GEMM figures, two runs of each): 0.05 s gave what 0.15 s gave (bf16 787-796 against 792-795 TFLOP/s, fp16
    763 against 765-767, TF32 407-409 against 409-411), no rest did not (bf16 768, fp16 690-699, TF32 340-351);
    the convolution figures held even with no rest (418-419 against 420)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        time.sleep(0.05 if quick else 0.25)


def gemm_throughput(results: Results, device: torch.device, has_fp8: bool, quick: bool) -> None:
    """TFLOP/s of square matrix products on random data, per dtype (TF32 explicitly on for `tf32`).

    The figure is the best of a few short bursts: what the stack reaches before the board's power cap
    pulls the clocks down (on an H200 at 700 W, bf16 products on random data hold about 790 TFLOP/s for
    some 60 ms, then about 690). The capped rate is the hardware's, not the stack's, and is recorded
    for bf16 as `bf16_sustained`, with the throttle reasons in the telemetry.
    """
    # on a CPU the figures only show the kernel runs: 256, since one bf16 product of 1024 took 3 s on a CPU with
    # AVX2 alone (no native bf16: 0.03 s in fp32), and eight of them pushed the CPU kernel past the tests' limits
    size = 8192 if device.type == "cuda" else 256
    flops = 2 * size**3
    cuda = device.type == "cuda"
    # the headline dtypes first, fp32 (SIMT, 21 ms a product on an H200) last, each from a short rest:
    # the power cap's running average otherwise carries one dtype's load into the next one's figure
    plans = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32}
    if not cuda:
        del plans["fp16"]
    bursts = (2 if quick else 5) if cuda else 2
    for name, dtype in plans.items():
        a = torch.randn(size, size, device=device, dtype=dtype)
        b = torch.randn(size, size, device=device, dtype=dtype)
        torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
        per_burst = (1 if name == "fp32" else 5 if name == "tf32" else 10) if cuda else 2
        rest(device, quick)
        _time(lambda: a @ b, device, 1, warmup=2)
        seconds = time_bursts(lambda: a @ b, device, bursts, per_burst)
        torch.backends.cuda.matmul.allow_tf32 = False
        _burst_figure(results, name, flops, seconds, size)
    if has_fp8:
        rest(device, quick)
        a = torch.randn(size, size, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(size, size, device=device).to(torch.float8_e4m3fn).t().contiguous().t()
        scale = torch.tensor(1.0, device=device)
        seconds = time_bursts(
            lambda: torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16), device, bursts, 10
        )
        _burst_figure(results, "fp8", flops, seconds, size)
    if cuda and not quick:
        rest(device, quick)
        a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
        b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
        sustained = _time(lambda: a @ b, device, 100, warmup=3)
        results.figure(GEMM_BF16_SUSTAINED, Figure(flops / sustained / 1e12, "TFLOP/s", size=size, products=100))


def bandwidth(results: Results, device: torch.device) -> None:
    """Device-to-device copy (bytes read + written) and pinned host<->device copies, in GB/s."""
    if device.type != "cuda":
        source = torch.empty(64 * 2**20, dtype=torch.uint8)
        target = torch.empty_like(source)
        seconds = _time(partial(target.copy_, source), device, 5)
        results.figure(HOST_COPY, Figure(2 * source.numel() / seconds / 1e9, "GB/s", bytes=source.numel()))
        return
    source = torch.empty(2 * 2**30, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    seconds = _time(partial(target.copy_, source), device, 10)
    results.figure(DEVICE_COPY, Figure(2 * source.numel() / seconds / 1e9, "GB/s", bytes=source.numel()))
    del source, target
    host = torch.empty(512 * 2**20, dtype=torch.uint8, pin_memory=True)
    on_device = torch.empty(host.numel(), dtype=torch.uint8, device=device)
    seconds = _time(lambda: on_device.copy_(host, non_blocking=True), device, 5)
    results.figure(HOST_TO_DEVICE, Figure(host.numel() / seconds / 1e9, "GB/s", bytes=host.numel()))
    seconds = _time(lambda: host.copy_(on_device, non_blocking=True), device, 5)
    results.figure(DEVICE_TO_HOST, Figure(host.numel() / seconds / 1e9, "GB/s", bytes=host.numel()))
