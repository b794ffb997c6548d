"""Benchmark: `lockgen resolve` (the CLI, end to end) against a minimal raw rattler script doing the same
solves (same channels, specs, constraints and virtual packages), as whole processes, alternating.

Also times `lockgen --help` against `python -c "import typer"` (start-up cost of the CLI).

    python benchmarks/bench_resolve.py [--runs 9] [--snapshot envs/examples/conda-forge-snapshot] [--against TREE]
        [--smoke]

Prints medians of wall and CPU time (the process and its children: the steadier figure on a shared machine) and ratios;
the targets (issue 31) are ratio <= 1.5 for resolve and <= 1.3 for `--help`. A raw solve that crashes (rattler has been
seen to SIGSEGV) is run again and reported (`harness.timed`). `--smoke`: one run of each, not judged.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.harness import (  # noqa: E402
    add_smoke,
    isolated_env,
    median,
    report,
    report_crashes,
    timed,
    wall_and_cpu,
)

STACK = REPO / "envs" / "examples" / "pytorch-cuda" / "stack.toml"

RAW_SCRIPT = """
import asyncio, json, sys
import rattler
from rattler import BuildString, Channel, GenericVirtualPackage, MatchSpec, PackageName, SparseRepoData, Version
snapshot, plan = sys.argv[1], json.loads(sys.argv[2])
channel = Channel("file://" + snapshot)
async def main():
    sources = {}
    for job in plan:
        repos = [sources.setdefault(s, SparseRepoData(channel, s, f"{snapshot}/{s}/repodata.json"))
                 for s in (job["platform"], "noarch")]
        vps = [GenericVirtualPackage(PackageName(n), Version(v), BuildString(b)) for n, v, b in job["virtual"]]
        records = await rattler.solve_with_sparse_repodata(
            [MatchSpec(s) for s in job["specs"]], repos, virtual_packages=vps,
            constraints=[MatchSpec(c) for c in job["constraints"]])
        print(job["target"], len(records))
asyncio.run(main())
"""


def plan_jobs(snapshot: Path) -> list[dict]:
    """The exact solves lockgen makes for the example stack, taken from its planner."""
    from lockgen.api.steps import resolve_steps

    context = resolve_steps.context(STACK, [f"conda-forge={snapshot}"])
    jobs = []
    for target in context.spec.targets:
        for request in context.plan(target)[1]:
            jobs.append(
                {
                    "target": target.name,
                    "platform": request.platform,
                    "specs": list(request.specs),
                    "constraints": list(request.constraints),
                    "virtual": [[v.name, v.version, v.build] for v in request.virtual_packages],
                }
            )
    return jobs


def compare(
    name: str,
    ours: list[str],
    baseline: list[str],
    runs: int,
    env: dict[str, str],
    smoke: bool,
    target: float,
    against: tuple[str, dict[str, str]] | None = None,
) -> None:
    """Wall and CPU medians (the process and its children) of alternating runs, each ratio judged; with `against`
    (a name, and the environment that runs another lockgen tree), that tree's same command in the same alternation,
    its own ratio to the baseline beside this tree's."""
    timed(ours, env, required=True), timed(baseline, env)  # warm the page cache and the import caches
    if against is not None:
        timed(ours, against[1], required=True)
    mine: list[tuple[float, float] | None] = []
    base: list[tuple[float, float] | None] = []
    other: list[tuple[float, float] | None] = []
    for _ in range(runs):
        mine.append(wall_and_cpu(ours, env, required=True))
        base.append(wall_and_cpu(baseline, env))
        if against is not None:
            other.append(wall_and_cpu(ours, against[1], required=True))
    for index, kind in ((0, "wall"), (1, "CPU")):
        ours_median = median([m[index] for m in mine if m is not None])
        base_median = median([b[index] for b in base if b is not None])
        report(f"{name}, {kind} ({runs} runs each, alternating)", ours_median, base_median, target, smoke)
        if against is not None:
            other_median = median([o[index] for o in other if o is not None])
            report(f"  {against[0]}, {kind}", other_median, base_median, target, smoke)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--snapshot", type=Path, default=REPO / "envs" / "examples" / "conda-forge-snapshot")
    parser.add_argument(
        "--against",
        type=Path,
        help="another lockgen tree (a `git archive` of an older commit, say): its resolve and "
        "--help timed in the same alternation, for a before/after figure on the same load",
    )
    add_smoke(parser)
    args = parser.parse_args()
    args.runs = 1 if args.smoke else args.runs
    snapshot = args.snapshot.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        env = isolated_env(Path(tmp))  # a home and cache of its own: the first (warming) run fills its index cache
        stack_dir = Path(tmp) / "stack"
        shutil.copytree(STACK.parent, stack_dir, ignore=shutil.ignore_patterns("locks"))
        raw = Path(tmp) / "raw_solve.py"
        raw.write_text(RAW_SCRIPT)
        jobs = plan_jobs(snapshot)
        lockgen = [
            sys.executable,
            "-m",
            "lockgen",
            "resolve",
            str(stack_dir / "stack.toml"),
            "--channel-alias",
            f"conda-forge={snapshot}",
        ]
        baseline = [sys.executable, str(raw), str(snapshot), json.dumps(jobs)]
        print(f"{len(jobs)} solves (targets x platforms) of {STACK.relative_to(REPO)} on {snapshot}")
        against = None
        if args.against is not None:  # run from its own folder's parent: `-m lockgen` takes the current folder first
            tree = str(args.against.resolve())
            # a home and cache of its own: a value one tree keeps is stamped with its files (`kept_runs.rules_stamp`),
            # so on one home the two trees would each find the other's, and parse and keep again on every run
            homes = {
                "LOCKGEN_HOME": str(Path(tmp) / "against-home"),
                "LOCKGEN_CACHE_DIR": str(Path(tmp) / "against-cache"),
            }
            against = (f"against {tree}", {**env, **homes, "PYTHONPATH": tree})
        env = {**env, "PYTHONPATH": str(REPO)}
        compare("resolve", lockgen, baseline, args.runs, env, args.smoke, 1.5, against)
        compare(
            "--help",
            [sys.executable, "-m", "lockgen", "--help"],
            [sys.executable, "-c", "import typer"],
            args.runs,
            env,
            args.smoke,
            1.3,
            against,
        )
    report_crashes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
