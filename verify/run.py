"""One kernel run: the stack probe, every check group in order, and the JSON document.

Imported by `python -m verify` once it has set cuBLAS's deterministic workspace (`verify.determinism`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import threading
import time

import torch

from verify import SCHEMA, determinism, preflight, process_env
from verify.conv import conv_throughput
from verify.correctness import attention, convolution, gemm
from verify.expect import expectations, stack_checks
from verify.schema import Figure, as_json, phase
from verify.graphs import cuda_graphs
from verify.nvml import Nvml, Telemetry
from verify.perf import bandwidth, gemm_throughput
from verify.results import Results, mark_phase
from verify.stack import arch_cc, describe, seconds_since_start
from verify.train import TRAINING_SEED, attention_built_in, initial_model, training, training_config

# torch.optim's first step imports torch._dynamo (and sympy with it: 5.7 s on an H200 VM, more than torch
# itself); every training job pays it once. The full run imports it on a thread during the correctness
# checks, which time nothing, and joins it before the first timed figure; --quick does without it.
OPTIMIZER_IMPORT = "torch._dynamo"
HOST_GONE = 4  # the exit code of a kernel whose host closed stdin before giving the expectations


def run(
    args: argparse.Namespace, import_s: float, given_workspace: str | None, early: preflight.EarlyReading | None = None
) -> int:
    """Runs the checks and writes the document; `given_workspace`: CUBLAS_WORKSPACE_CONFIG as the environment
    gave it (the document records the environment's settings, not the kernel's own); `early`: the node's
    readings taken while torch was imported."""
    mark_phase("stack")
    started = time.perf_counter()
    arch = args.arch.lower().replace("_", "")
    results = Results()
    results.log = lambda line: print(line, file=sys.stderr, flush=True)
    results.phase("startup", seconds_since_start() or 0.0)  # interpreter start and imports, torch's among them
    results.figure(phase("torch_import"), Figure(import_s, "s", reason=process_env.unkept_bytecode(torch)))
    nvml = Nvml()
    stack = describe(arch, nvml)
    waited = time.perf_counter()
    expected = _expectations(args.expect)
    if expected is None:
        print("the host closed stdin without giving the expectations: nothing verified", file=sys.stderr)
        return HOST_GONE
    plan_wait = time.perf_counter() - waited  # a kernel started with lockgen waits here for lockgen's plan
    results.phase("plan_wait", plan_wait)
    gpu_ready = stack_checks(results, arch, stack, args.allow_ptx, expected.get("gpu_count"))
    expectations(results, stack, expected)
    device = torch.device("cuda", 0) if arch_cc(arch) and gpu_ready else torch.device("cpu")
    environ = {name: value for name, value in os.environ.items() if name != determinism.WORKSPACE_VARIABLE}
    environ.update({determinism.WORKSPACE_VARIABLE: given_workspace} if given_workspace is not None else {})
    settings = preflight.settings_check(results, environ)
    stack["settings"], stack["slowing_settings"] = settings, process_env.slowing_settings(settings)
    if device.type == "cuda":  # before the first kernel: who else is on the GPU, its memory and health
        stack["node"] = preflight.node_checks(
            results, nvml, {os.getpid()}, expected.get("node") or {}, early.result() if early else None
        )
    results.phase("stack", time.perf_counter() - started - plan_wait)  # NVML, CUDA's start, the stack and node checks
    telemetry_devices = list(range(nvml.device_count() or 0)) if device.type == "cuda" else []
    with Telemetry(nvml, telemetry_devices) as telemetry:
        if arch == "cpu" or gpu_ready:
            _checks(results, device, args, expected, telemetry)
    stack["libraries"] = preflight.libraries_check(results)  # after the checks: every library they needed is loaded
    total = seconds_since_start()
    results.phase("total", total if total is not None else time.perf_counter() - started)
    document = {
        "schema": SCHEMA,
        "kind": "single",
        "arch": arch,
        "mode": "quick" if args.quick else "full",
        "device": str(device),
        "stack": stack,
        "expected": expected,
        "checks": results.checks_json(),
        "figures": results.figures_json(),
        "telemetry": telemetry.summary(),
        "numerics": None if results.numerics is None else as_json(results.numerics),
        "passed": results.passed(),
        "duration_s": round(time.perf_counter() - started, 2),
    }
    text = json.dumps(document, indent=2, sort_keys=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as stream:
            stream.write(text + "\n")
    print(text)
    return 0


def _expectations(source: str | None) -> dict | None:
    """The expectations: none, a JSON file, or (`-`) JSON on stdin, which the host writes once it has them (a
    JSON object, `{}` for none); None when stdin ends empty: the host went away before it had them."""
    if not source:
        return {}
    text = sys.stdin.read() if source == "-" else open(source, encoding="utf-8").read()
    if source == "-" and not text.strip():
        return None
    return json.loads(text) if text.strip() else {}


def _checks(
    results: Results, device: torch.device, args: argparse.Namespace, expected: dict, telemetry: Telemetry
) -> None:
    """Every check group in order: correctness and the deterministic work (the fingerprint, and in full runs
    the determinism check) first, as they time nothing; then the timed figures."""
    # --quick trains with an optimizer in torch ops (verify.adamw), which needs no dynamo
    optimizer_import = (
        None if args.quick else threading.Thread(target=importlib.import_module, args=(OPTIMIZER_IMPORT,), daemon=True)
    )
    if optimizer_import is not None:
        optimizer_import.start()
    # the training model's CPU initialisation (0.7-0.8 s for the full model on an H100 host) during the correctness
    # checks too: they draw no number from torch's global generator, which it seeds and draws from
    model_build = threading.Thread(target=initial_model, args=(training_config(device), TRAINING_SEED), daemon=True)
    model_build.start()
    has_fp8 = device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 9)
    results.guarded(
        "correctness", "gemm", lambda: gemm(results, device, has_fp8, 1024 if device.type == "cuda" else 256)
    )
    results.guarded("correctness", "convolution", lambda: convolution(results, device))
    results.guarded("correctness", "attention", lambda: attention(results, device))
    if optimizer_import is not None:  # before the determinism check, whose fused AdamW imports it too (two threads
        # importing torch._dynamo at once deadlocked on its module lock on the lent H100)
        results.guarded("training", "optimizer_import", optimizer_import.join)
    results.guarded("training", "model_build", model_build.join)  # before the fingerprint seeds the generator
    results.guarded("training", "determinism", lambda: determinism.judge(results, device, losses=not args.quick))
    # GEMM rates first, while the board is below its power cap (see verify.perf.gemm_throughput)
    results.guarded("performance", "gemm_throughput", lambda: gemm_throughput(results, device, has_fp8, args.quick))
    floors = expected.get("conv_floor_tflops") or {}
    results.guarded("performance", "conv_throughput", lambda: conv_throughput(results, device, args.quick, floors))
    runs: dict = {}
    with attention_built_in():
        results.guarded(
            "training",
            "training",
            lambda: runs.update(training(results, device, args.quick, args.compile, telemetry)),
        )
        results.guarded("graphs", "cuda_graphs", lambda: cuda_graphs(results, device, args.quick, runs.get("bf16")))
    results.guarded("performance", "bandwidth", lambda: bandwidth(results, device))
