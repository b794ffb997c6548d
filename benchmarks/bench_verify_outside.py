"""`lockgen verify --quick` timed from outside, as a health check is (issue 48 item 4: quick <= 10 s on the lent
H100 and H200, lockgen's start included), against another tree's lockgen and kernel (`--before`) in the same run.

Each run is `PY -m lockgen verify --arch ARCH --quick --python PY --out FILE` in a fresh interpreter, the two trees
alternating; printed per tree: the median wall and CPU seconds (the process and its children: the steadier figure
on a shared machine), the kernel's own total (its `phases.total`, from its process's start) and what was left
outside it (wall minus that: lockgen's part the kernel did not overlap), and the kernel's wait for lockgen's
expectations (`phases.plan_wait`); then the ratio of the medians.

    python benchmarks/bench_verify_outside.py --arch sm90 --python /opt/torch/.venv/bin/python3 \\
        --before DIR [--repeats 4]                                          (on the device)
    python benchmarks/bench_verify_outside.py --arch cpu --before DIR         (a CPU run)
    python benchmarks/bench_verify_outside.py --smoke                         (one CPU run, this tree: CI)

`--before DIR` names a folder holding another tree's `lockgen/` and `verify/` (e.g. `git archive` of an older
commit); without it only this tree is timed.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness import add_smoke, cpu_timed  # noqa: E402

BUDGET_QUICK_S = 10.0


def run_verify(root: Path, python: str, arch: str, out: Path) -> dict[str, float]:
    """One `lockgen verify --quick` of the tree at `root`: wall and CPU seconds, and the kernel's phases."""
    env = {**os.environ, "PYTHONPATH": str(root), "NO_COLOR": "1"}
    command = [sys.executable, "-m", "lockgen", "verify", "--arch", arch, "--quick", "--python", python]
    wall, cpu = cpu_timed([*command, "--out", str(out)], env)
    phases = json.loads(out.read_text())["certificate"]["figures"]["phases"]
    total = phases["total"]["value"]
    plan_wait = (phases.get("plan_wait") or {}).get("value") or 0.0
    return {"wall": wall, "cpu": cpu, "kernel": total, "outside": wall - total, "plan_wait": plan_wait}


def summary(name: str, runs: list[dict[str, float]]) -> float:
    """Prints the medians of one tree's runs; returns the median wall."""
    medians = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    walls = ", ".join(f"{run['wall']:.2f}" for run in runs)
    print(
        f"{name}: wall {medians['wall']:.2f} s median of {len(runs)} ({walls}), CPU {medians['cpu']:.2f} s; "
        f"kernel total {medians['kernel']:.2f} s, outside it {medians['outside']:.2f} s, "
        f"plan_wait {medians['plan_wait']:.2f} s; budget {BUDGET_QUICK_S:.0f} s"
    )
    return medians["wall"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="cpu")
    parser.add_argument("--python", default=sys.executable, help="the environment's interpreter (torch in it)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--before", type=Path, help="a folder holding another tree's lockgen/ and verify/")
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.arch, args.repeats, args.before = "cpu", 1, None
    trees = {"this tree": ROOT, **({f"before ({args.before})": args.before} if args.before else {})}
    for root in trees.values():  # byte code written once for both trees alike (the harness does lockgen/ of this one)
        for package in ("lockgen", "verify"):
            compileall.compile_dir(str(root / package), quiet=1)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="verify-outside-") as folder:
        for repeat in range(args.repeats):
            for index, (name, root) in enumerate(trees.items()):
                out = Path(folder) / f"{index}-{repeat}.cert.json"
                runs[name].append(run_verify(root, args.python, args.arch, out))
    walls = [summary(name, tree_runs) for name, tree_runs in runs.items()]
    if len(walls) == 2:
        print(f"ratio this tree / before: {walls[0] / walls[1]:.2f} (wall medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
