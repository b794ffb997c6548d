"""Benchmark: the torch-pypi example's PyPI layer through `lockgen resolve` (the CLI, whole process)
against plain `uv pip compile` with the same inputs (requirements, constraints, Python version and
platform per target, run up to eight at a time as lockgen does), alternating, medians and the ratio.

    python benchmarks/bench_pypi.py [--runs 7]

Needs PyPI; uv's cache is warm for both after the first round. Target: ratio <= 1.2.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STACK = REPO / "envs" / "examples" / "torch-pypi" / "stack.toml"

RAW = '''
import json, subprocess, sys, tempfile, os
from concurrent.futures import ThreadPoolExecutor
jobs = json.loads(sys.argv[2])
def run(job):
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, "r.in"), "w").write("\\n".join(job["requirements"]) + "\\n")
        open(os.path.join(d, "c.txt"), "w").write("\\n".join(job["constraints"]) + "\\n")
        subprocess.run([sys.argv[1], "pip", "compile", os.path.join(d, "r.in"), "-c", os.path.join(d, "c.txt"),
                        "--python-version", job["python"], "--python-platform", job["platform"], "--format", "pylock.toml",
                        "-o", os.path.join(d, "pylock.toml"), "--only-binary", ":all:", "--exclude-newer", job["exclude_newer"],
                        "--index-url", "https://pypi.org/simple", "--no-header", "--quiet"], check=True)
with ThreadPoolExecutor(min(8, len(jobs))) as pool:
    list(pool.map(run, jobs))
'''


def jobs_of_example() -> list[dict]:
    """The exact uv inputs lockgen uses for each target, from its own planner."""
    from lockgen.api import resolve as api
    from lockgen.adapters.uv_resolver import PypiRequest
    from lockgen.core.pypi_plan import plan_pypi

    context = api._context(STACK, [])
    jobs = []
    for target in context.spec.targets:
        window, requests = context.plan(target)
        for request in requests:
            plan = plan_pypi(context.facts, context.spec, target, request.platform, window, [])
            platform = PypiRequest(label="", platform=request.platform, glibc=target.glibc, python=plan.python,
                                   requirements=(), constraints=(), index_url="", extra_index_urls=(),
                                   exclude_newer=None, no_build=True).python_platform()
            jobs.append({"requirements": list(plan.requirements), "constraints": list(plan.constraints),
                         "python": plan.python, "platform": platform,
                         "exclude_newer": context.spec.pypi_options.exclude_newer.isoformat()})
    return jobs


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    from uv import find_uv_bin

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "torch-pypi"
        shutil.copytree(STACK.parent, folder, ignore=shutil.ignore_patterns("locks"))
        raw = Path(tmp) / "raw_uv.py"
        raw.write_text(RAW)
        jobs = jobs_of_example()
        ours = [sys.executable, "-m", "lockgen", "resolve", str(folder / "stack.toml")]
        baseline = [sys.executable, str(raw), find_uv_bin(), json.dumps(jobs)]
        timed(ours), timed(baseline)
        mine, base = [], []
        for _ in range(args.runs):
            mine.append(timed(ours))
            base.append(timed(baseline))
    ratio = statistics.median(mine) / statistics.median(base)
    print(f"{len(jobs)} uv resolutions (targets x platforms) of {STACK.relative_to(REPO)}")
    print(f"lockgen resolve median {statistics.median(mine) * 1000:.0f} ms, uv pip compile median "
          f"{statistics.median(base) * 1000:.0f} ms, ratio {ratio:.2f} ({args.runs} runs each, alternating)")
    print(f"target (ratio <= 1.2): {'within' if ratio <= 1.2 else 'OVER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
