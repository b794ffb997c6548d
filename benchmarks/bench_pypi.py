"""Benchmark: the torch-pypi example's PyPI layer through `lockgen resolve` (the CLI, whole process)
against plain `uv pip compile` with the same inputs (requirements, constraints, Python version and
platform per target, run up to eight at a time as lockgen does), alternating, medians and the ratio.

    python benchmarks/bench_pypi.py [--runs 7] [--smoke]

Needs PyPI; uv's cache is warm for both after the first round. Target: ratio <= 1.2. `--smoke`: a stack of
two targets over a local index of the tests' wheels served on loopback (no network), one run, not judged.
The uv inputs come from lockgen's planner and `python_platform`, never from its request type's fields, so a
field added there does not break this benchmark.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import shutil
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
STACK = REPO / "envs" / "examples" / "torch-pypi" / "stack.toml"

from benchmarks.harness import add_smoke, isolated_env, median_pair, report, report_crashes, timed  # noqa: E402

RAW = """
import json, subprocess, sys, tempfile, os
from concurrent.futures import ThreadPoolExecutor
jobs = json.loads(sys.argv[2])
def run(job):
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, "r.in"), "w").write("\\n".join(job["requirements"]) + "\\n")
        open(os.path.join(d, "c.txt"), "w").write("\\n".join(job["constraints"]) + "\\n")
        subprocess.run([sys.argv[1], "pip", "compile", os.path.join(d, "r.in"), "-c", os.path.join(d, "c.txt"),
                        "--python-version", job["python"], "--python-platform", job["platform"],
                        "--format", "pylock.toml",
                        "-o", os.path.join(d, "pylock.toml"), "--only-binary", ":all:", *job["exclude_newer"],
                        "--index-url", job["index_url"], "--no-header", "--quiet"], check=True)
with ThreadPoolExecutor(min(8, len(jobs))) as pool:
    list(pool.map(run, jobs))
"""


def jobs_of(stack: Path) -> list[dict]:
    """The exact uv inputs lockgen uses for each target and platform of `stack`, from its own planner."""
    from lockgen.adapters.pypi.uv_resolver import python_platform
    from lockgen.api.steps import resolve_steps
    from lockgen.core.pypi.pypi_plan import plan_pypi

    context = resolve_steps.context(stack, [])
    options = context.spec.pypi_options
    jobs = []
    for target in context.spec.targets:
        window, requests = context.plan(target)
        for request in requests:
            plan = plan_pypi(context.facts, context.spec, target, request.platform, window, [])
            jobs.append(
                {
                    "requirements": list(plan.requirements),
                    "constraints": list(plan.constraints),
                    "python": plan.python,
                    "platform": python_platform(request.platform, target.glibc),
                    "index_url": options.index_url,
                    "exclude_newer": ["--exclude-newer", options.exclude_newer.isoformat()]
                    if options.exclude_newer
                    else [],
                }
            )
    return jobs


def smoke_stack(root: Path) -> Path:
    """A two-target stack over a local index of the tests' wheels, served on loopback for this process."""
    from tests.conftest import _QuietHandler
    from tests.wheel_index import Wheel, build_index

    index = build_index(root / "index", [Wheel("alpha", "1.0"), Wheel("gamma", "1.0", requires=("alpha",))])
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(index)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stack = root / "smoke" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(
        '[stack]\nname = "smoke"\npython = "3.11"\nplatforms = ["linux-64", "linux-aarch64"]\n'
        '[pypi-dependencies]\ngamma = "*"\n[pypi-options]\n'
        f'index-url = "http://127.0.0.1:{server.server_address[1]}/simple"\n[targets.cpu]\narch = "cpu"\n'
    )
    return stack


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    add_smoke(parser)
    args = parser.parse_args()
    from uv import find_uv_bin

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = isolated_env(root)
        if args.smoke:
            args.runs, stack = 1, smoke_stack(root)
        else:
            stack = root / "torch-pypi" / "stack.toml"
            shutil.copytree(STACK.parent, stack.parent, ignore=shutil.ignore_patterns("locks"))
        raw = root / "raw_uv.py"
        raw.write_text(RAW)
        jobs = jobs_of(stack)
        ours = [sys.executable, "-m", "lockgen", "resolve", str(stack)]
        baseline = [sys.executable, str(raw), find_uv_bin(), json.dumps(jobs)]
        timed(ours, env, required=True), timed(baseline, env)
        print(
            f"{len(jobs)} uv resolutions (targets x platforms) of "
            f"{'a local index' if args.smoke else STACK.relative_to(REPO)}"
        )
        report(
            f"lockgen resolve vs uv pip compile ({args.runs} runs each, alternating)",
            *median_pair(args.runs, lambda: timed(ours, env, required=True), lambda: timed(baseline, env)),
            1.2,
            args.smoke,
        )
    report_crashes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
