"""Where the verify kernel's time goes, per phase, against the health-check budget (issue 20: `--quick`
<= 10 s, full <= 25 s wall on one H200, interpreter start included), and against another kernel (`--before`).

Each run is `PY -m verify --arch ARCH [--quick]` in a fresh interpreter, timed from outside (wall) and
from inside (the kernel's `phases` figures: startup with torch's import, the stack probe, each check
group). Medians of the repeats are printed per phase, with the wall time and its ratio to the budget.

    python benchmarks/bench_verify_phases.py --arch sm90 --python /opt/torch/.venv/bin/python3 \\
        [--repeats 3] [--modes quick,full] [--before DIR] [--out DIR]          (on the device)
    python benchmarks/bench_verify_phases.py --arch cpu --repeats 1             (a CPU run)
    python benchmarks/bench_verify_phases.py --smoke                            (the same, --quick only: CI)

`--before DIR` names a folder holding another `verify/` package (an older kernel): its wall times are
measured in the same run, and the ratio printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness import add_smoke  # noqa: E402

BUDGET_S = {"quick": 10.0, "full": 25.0}


def run_kernel(python: str, root: Path, arch: str, mode: str, out: Path) -> tuple[float, dict]:
    """Wall seconds of one kernel run and its document."""
    command = [python, "-m", "verify", "--arch", arch, "--out", str(out)] + (["--quick"] if mode == "quick" else [])
    env = {**os.environ, "PYTHONPATH": str(root)}
    started = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"error: the kernel exited {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    return wall, json.loads(out.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm90")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", default="quick,full")
    parser.add_argument("--before", type=Path, help="a folder holding another verify/ package, timed alongside")
    parser.add_argument("--out", type=Path, help="keep each run's JSON document here")
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.arch, args.repeats, args.modes = "cpu", 1, "quick"
    keep = args.out or Path(tempfile.mkdtemp(prefix="verify-phases-"))
    keep.mkdir(parents=True, exist_ok=True)
    for mode in args.modes.split(","):
        walls, phases, failed = [], {}, set()
        for repeat in range(args.repeats):
            wall, document = run_kernel(args.python, ROOT, args.arch, mode, keep / f"{mode}-{repeat}.json")
            walls.append(wall)
            for name, entry in document["figures"].get("phases", {}).items():
                phases.setdefault(name, []).append(entry["value"])
            failed |= {f"{c['category']}/{c['name']}" for c in document["checks"] if not c["passed"]}
        wall = statistics.median(walls)
        print(
            f"== {mode}: wall {wall:.2f} s median of {len(walls)} ({', '.join(f'{w:.2f}' for w in walls)}); "
            f"budget {BUDGET_S[mode]:.0f} s, ratio {wall / BUDGET_S[mode]:.2f}"
        )
        for name, values in sorted(phases.items(), key=lambda item: -statistics.median(item[1])):
            print(f"   {name:<18} {statistics.median(values):7.2f} s")
        if failed:
            print(f"   failed checks: {', '.join(sorted(failed))}")
        if args.before:
            before = [
                run_kernel(args.python, args.before, args.arch, mode, keep / f"{mode}-before-{r}.json")[0]
                for r in range(args.repeats)
            ]
            print(
                f"   before ({args.before}): wall {statistics.median(before):.2f} s median "
                f"({', '.join(f'{w:.2f}' for w in before)}); now/before {wall / statistics.median(before):.2f}"
            )
    print(f"documents in {keep}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
