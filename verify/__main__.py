"""`python -m verify --arch sm90 [--expect FILE] [--quick] [--out FILE] [--compile]`: one JSON document on stdout.

Progress lines go to stderr. The exit code is 0 whenever the document was written, whatever the
checks say: judging is lockgen's job (and the document's `passed` field says it for humans).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch  # noqa: E402

from verify import SCHEMA  # noqa: E402
from verify.correctness import attention, convolution, gemm  # noqa: E402
from verify.expect import expectations, stack_checks  # noqa: E402
from verify.nvml import Nvml, Telemetry  # noqa: E402
from verify.perf import bandwidth, gemm_throughput  # noqa: E402
from verify.results import Results  # noqa: E402
from verify.stack import arch_cc, describe  # noqa: E402
from verify.train import determinism, training  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verify", description=__doc__.splitlines()[0])
    parser.add_argument("--arch", required=True, help="the arch to certify: sm80, sm90, sm100 ... or cpu")
    parser.add_argument("--expect", help="a JSON file of expectations (arch, driver_min, torch, cuda, cudnn, nccl, gpu_count)")
    parser.add_argument("--quick", action="store_true",
                        help="fp32 and bf16 training only, fewer steps and repeats, no determinism check")
    parser.add_argument("--compile", action="store_true", help="also train with torch.compile (slower start)")
    parser.add_argument("--allow-ptx", action="store_true", help="accept a build that reaches the arch only through PTX JIT")
    parser.add_argument("--out", help="write the document here as well as to stdout")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    arch = args.arch.lower().replace("_", "")
    results = Results()
    results.log = lambda line: print(line, file=sys.stderr, flush=True)
    nvml = Nvml()
    stack = describe(arch, nvml)
    expected = json.loads(open(args.expect, encoding="utf-8").read()) if args.expect else {}
    gpu_ready = stack_checks(results, arch, stack, args.allow_ptx, expected.get("gpu_count"))
    expectations(results, stack, expected)
    device = torch.device("cuda", 0) if arch_cc(arch) and gpu_ready else torch.device("cpu")
    telemetry_devices = list(range(nvml.device_count() or 0)) if device.type == "cuda" else []
    with Telemetry(nvml, telemetry_devices) as telemetry:
        if arch == "cpu" or gpu_ready:
            has_fp8 = device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 9)
            results.guarded("correctness", "gemm", lambda: gemm(results, device, has_fp8, 2048 if device.type == "cuda" else 256))
            results.guarded("correctness", "convolution", lambda: convolution(results, device))
            results.guarded("correctness", "attention", lambda: attention(results, device))
            # GEMM rates first, while the board is below its power cap (see verify.perf.gemm_throughput)
            results.guarded("performance", "gemm_throughput", lambda: gemm_throughput(results, device, has_fp8, args.quick))
            results.guarded("training", "training", lambda: training(results, device, args.quick, args.compile, telemetry))
            if not args.quick:  # a second interpreter and CUDA start: the one check --quick leaves out
                results.guarded("training", "determinism", lambda: determinism(results, device))
            results.guarded("performance", "bandwidth", lambda: bandwidth(results, device))
    document = {
        "schema": SCHEMA,
        "kind": "single",
        "arch": arch,
        "mode": "quick" if args.quick else "full",
        "device": str(device),
        "stack": stack,
        "expected": expected,
        "checks": results.checks,
        "figures": results.figures,
        "telemetry": telemetry.summary(),
        "passed": all(c["passed"] for c in results.checks),
        "duration_s": round(time.perf_counter() - started, 2),
    }
    text = json.dumps(document, indent=2, sort_keys=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as stream:
            stream.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
