"""`python -m verify --arch sm90 [--expect FILE] [--quick] [--out FILE] [--compile]`: one JSON document on stdout.

Progress lines go to stderr. The exit code is 0 whenever the document was written, whatever the
checks say: judging is lockgen's job (and the document's `passed` field says it for humans).

The numerics fingerprint (every run) and the full run's determinism check need a second interpreter; it is
started here, before this one imports torch (some 4 s on an H200 VM), so that the two starts overlap.
"""

from __future__ import annotations

import argparse
import sys
import time

from verify.determinism import DeterminismRun


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verify", description=__doc__.splitlines()[0])
    parser.add_argument("--arch", required=True, help="the arch to certify: sm80, sm90, sm100 ... or cpu")
    parser.add_argument("--expect", help="a JSON file of expectations (arch, driver_min, torch, cuda, cudnn, nccl, gpu_count)")
    parser.add_argument("--quick", action="store_true", help="fp32 and bf16 training only, fewer steps and repeats, no determinism check (the fingerprint stays)")
    parser.add_argument("--compile", action="store_true", help="also train with torch.compile (slower start)")
    parser.add_argument("--allow-ptx", action="store_true", help="accept a build that reaches the arch only through PTX JIT")
    parser.add_argument("--out", help="write the document here as well as to stdout")
    args = parser.parse_args(argv)
    on_gpu = args.arch.lower() != "cpu"
    child = DeterminismRun("cuda" if on_gpu else "cpu", losses=not args.quick)  # the determinism check: the one --quick leaves out
    try:
        import_started = time.perf_counter()
        from verify.run import run  # imports torch

        return run(args, child, time.perf_counter() - import_started)
    finally:
        child.close()


if __name__ == "__main__":
    sys.exit(main())
