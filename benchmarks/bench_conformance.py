"""Benchmark `lockgen check --lock` on a real environment against the floor: hashing the same prefix's
files with `sha256sum` on every core (`find -type f | xargs -P<cores> sha256sum`), alternating, medians
and their ratio (target <= 1.2). Also times `freeze --inventory` (probe + re-hash of every RECORD row).

    python benchmarks/bench_conformance.py --lock L --python PY [--manifests F] [--runs 3] [--allow-foreign P ...]

On the H200 machine: `--lock envs/examples/h200-system/locks/h200.conda-lock.yml --python
/opt/torch/.venv/bin/python3 --manifests envs/examples/h200-system/locks/h200.manifests.json.gz`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(command: list[str] | str, shell: bool = False) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, shell=shell, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"benchmark command failed: {command}\n{done.stderr[-2000:]}")
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lock", required=True)
    parser.add_argument("--python", required=True)
    parser.add_argument("--manifests")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--allow-foreign", action="append", default=[])
    args = parser.parse_args()
    prefix = subprocess.run([args.python, "-I", "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True,
                            check=True).stdout.strip()
    cores = os.cpu_count() or 1
    lockgen = [sys.executable, "-m", "lockgen"]
    check = lockgen + ["check", "--lock", args.lock, "--prefix", prefix]
    check += ["--manifests", args.manifests] if args.manifests else []
    for path in args.allow_foreign:
        check += ["--allow-foreign", path]
    floor = f"find {prefix} -type f -print0 | xargs -0 -P{cores} -n 200 sha256sum > /dev/null"
    files = sum(len(names) for _, _, names in os.walk(prefix))
    size = sum(os.path.getsize(os.path.join(root, n)) for root, _, names in os.walk(prefix) for n in names
               if os.path.isfile(os.path.join(root, n)) and not os.path.islink(os.path.join(root, n)))
    print(f"{prefix}: {files} files, {size / 1e9:.2f} GB, {cores} cores")
    ours, base = [], []
    for _ in range(args.runs):
        ours.append(timed(check))
        base.append(timed(floor, shell=True))
    mine, theirs = statistics.median(ours), statistics.median(base)
    print(f"check --lock: lockgen {mine:.2f} s (runs {', '.join(f'{t:.2f}' for t in ours)}), sha256sum on {cores} cores "
          f"{theirs:.2f} s (runs {', '.join(f'{t:.2f}' for t in base)}), ratio {mine / theirs:.2f} "
          f"(target <= 1.2: {'within' if mine / theirs <= 1.2 else 'OVER'})")
    with tempfile.TemporaryDirectory() as folder:
        inventory = timed(lockgen + ["freeze", "--python", args.python, "--inventory", str(Path(folder) / "inv.json")])
    print(f"freeze --inventory (probe and re-hash of every RECORD row): {inventory:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
