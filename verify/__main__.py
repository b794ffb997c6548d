"""`python -m verify --arch sm90 [--expect FILE|-] [--quick] [--out FILE] [--compile]`: one JSON document on stdout.

Progress lines go to stderr, with a `@phase NAME` line before each phase (the host names the phase a kernel
died in from the last one). The exit code is 0 whenever the document was written, whatever the checks say:
judging is lockgen's job (and the document's `passed` field says it for humans). `--expect -` reads the
expectations from stdin once torch is imported, so the host can start the kernel before it has them; the wait is
the `plan_wait` phase, and a stdin that ends empty (the host went away first) ends the kernel with exit 4 and no
document: nothing was measured. Once the document is written the process ends at once (`os._exit`), without the
interpreter's teardown, which takes seconds with torch loaded.

The numerics fingerprint and the full run's determinism check run in this process (`verify.determinism`):
cuBLAS's deterministic workspace is set here, before torch is imported.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from verify.determinism import pin_workspace
from verify.preflight import EarlyReading
from verify.results import mark_phase


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verify", description=__doc__.splitlines()[0])
    parser.add_argument("--arch", required=True, help="the arch to certify: sm80, sm90, sm100 ... or cpu")
    parser.add_argument(
        "--expect",
        help="a JSON file of expectations (arch, driver_min, torch, cuda, cudnn, nccl, gpu_count), or - for stdin",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fp32 and bf16 training and bf16 convolutions only, fewer steps and repeats, no determinism check "
        "(the fingerprint stays)",
    )
    parser.add_argument("--compile", action="store_true", help="also train with torch.compile (slower start)")
    parser.add_argument(
        "--allow-ptx", action="store_true", help="accept a build that reaches the arch only through PTX JIT"
    )
    parser.add_argument("--out", help="write the document here as well as to stdout")
    args = parser.parse_args(argv)
    given_workspace = pin_workspace()
    early = EarlyReading() if args.arch.lower() != "cpu" else None  # NVML's node readings while torch is imported
    mark_phase("startup")
    import_started = time.perf_counter()
    from verify.run import run  # imports torch

    return run(args, time.perf_counter() - import_started, given_workspace, early)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # the document is written and flushed: the interpreter's teardown with torch loaded (1.6-1.9 s of a bare
    # `import torch` process on a CPU host, about 2 s on a lent H100) is skipped, as the host waits for this
    # process to end; the driver releases the GPU at exit either way, and torch.compile's workers watch for it
    os._exit(code)
