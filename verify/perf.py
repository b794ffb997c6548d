"""Performance figures: GEMM TFLOP/s per dtype and memory bandwidths (device copy, host to device and back)."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from verify.results import Results


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


def gemm_throughput(results: Results, device: torch.device, has_fp8: bool, quick: bool) -> None:
    """TFLOP/s of square matrix products on random data, per dtype (TF32 explicitly on for `tf32`)."""
    size = 8192 if device.type == "cuda" else 1024
    flops = 2 * size**3
    plans = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16}
    if device.type == "cuda":
        plans["fp16"] = torch.float16
    for name, dtype in plans.items():
        a = torch.randn(size, size, device=device, dtype=dtype)
        b = torch.randn(size, size, device=device, dtype=dtype)
        torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
        repeats = (5 if name == "fp32" else 20 if name == "tf32" else 50) if device.type == "cuda" else 3
        seconds = _time(lambda: a @ b, device, repeats if not quick else max(2, repeats // 2),
                        warmup=10 if device.type == "cuda" else 1)
        torch.backends.cuda.matmul.allow_tf32 = False
        results.figure("gemm", name, flops / seconds / 1e12, "TFLOP/s", size=size)
    if has_fp8:
        a = torch.randn(size, size, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(size, size, device=device).to(torch.float8_e4m3fn).t().contiguous().t()
        scale = torch.tensor(1.0, device=device)
        seconds = _time(lambda: torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16), device, 50,
                        warmup=10)
        results.figure("gemm", "fp8", flops / seconds / 1e12, "TFLOP/s", size=size)


def bandwidth(results: Results, device: torch.device) -> None:
    """Device-to-device copy (bytes read + written) and pinned host<->device copies, in GB/s."""
    if device.type != "cuda":
        source = torch.empty(64 * 2**20, dtype=torch.uint8)
        target = torch.empty_like(source)
        seconds = _time(lambda: target.copy_(source), device, 5)
        results.figure("bandwidth", "host_copy", 2 * source.numel() / seconds / 1e9, "GB/s", bytes=source.numel())
        return
    source = torch.empty(2 * 2**30, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    seconds = _time(lambda: target.copy_(source), device, 10)
    results.figure("bandwidth", "device_copy", 2 * source.numel() / seconds / 1e9, "GB/s", bytes=source.numel())
    del source, target
    host = torch.empty(512 * 2**20, dtype=torch.uint8, pin_memory=True)
    on_device = torch.empty(host.numel(), dtype=torch.uint8, device=device)
    seconds = _time(lambda: on_device.copy_(host, non_blocking=True), device, 5)
    results.figure("bandwidth", "host_to_device", host.numel() / seconds / 1e9, "GB/s", bytes=host.numel())
    seconds = _time(lambda: host.copy_(on_device, non_blocking=True), device, 5)
    results.figure("bandwidth", "device_to_host", host.numel() / seconds / 1e9, "GB/s", bytes=host.numel())
