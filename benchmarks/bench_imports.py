"""What each command imports (`python -X importtime`), beyond what the bare interpreter imports at its start on
the same machine (this machine's `site` hooks included): how many modules, their own import time summed, and the
top importers (the modules imported at the top level by lockgen, by their time with everything below them).

Commands: `run LOCK -- true` of a made environment (answered by its kept record), a repeated `materialize`, a
repeated `check --lock` (its kept verdict), `resolve` of the pytorch-cuda example on the conda-forge snapshot
(as `bench_resolve.py` runs it), and `--help`. Medians of `--runs` runs of the total; the top importers of the
run whose total is the median. `-X importtime` itself slows each import, so the figures are for comparison, not
the commands' cost (`bench_run.py` and `bench_resolve.py` time those).

    python benchmarks/bench_imports.py [--runs 5] [--top 8] [--smoke]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.harness import add_smoke, bulk_stack, isolated_env  # noqa: E402
from lockgen.adapters.proof.stat_walk import RACY_NS  # noqa: E402

STACK = REPO / "envs" / "examples" / "pytorch-cuda" / "stack.toml"
SNAPSHOT = REPO / "envs" / "examples" / "conda-forge-snapshot"


def imports_of(command: list[str], env: dict[str, str]) -> list[tuple[str, int, int, int]]:
    """(module, own µs, cumulative µs, depth) of each import of one run of `command` under `-X importtime`."""
    done = subprocess.run([sys.executable, "-X", "importtime", *command], env=env, capture_output=True, text=True)
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, cumulative, name = line.removeprefix("import time:").split("|")
        rows.append((name.strip(), int(own), int(cumulative), (len(name) - len(name.lstrip())) // 2))
    return rows


def summary(command: list[str], env: dict[str, str], bare: set[str], runs: int, top: int) -> str:
    """The command's line: modules beyond the bare start, their own time summed (median), the top importers."""
    measured = []
    for _ in range(runs):
        rows = [row for row in imports_of(command, env) if row[0] not in bare]
        measured.append((sum(own for _, own, _, _ in rows), rows))
    measured.sort(key=lambda pair: pair[0])
    total, rows = measured[len(measured) // 2]
    shallowest = min((depth for *_, depth in rows), default=0)
    leaders = sorted((row for row in rows if row[3] == shallowest), key=lambda row: -row[2])[:top]
    said = ", ".join(f"{name} {cumulative / 1000:.1f}" for name, _, cumulative, _ in leaders)
    return (
        f"{len(rows)} modules, {total / 1000:.0f} ms own time (median of {runs}); top importers (ms, with what they "
        f"import): {said}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--top", type=int, default=8)
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.runs = 1
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = isolated_env(root)
        lock = bulk_stack(root, 3 if args.smoke else 20, 10 if args.smoke else 150, 1)
        prefix = root / "env"
        lockgen = ["-m", "lockgen"]
        run = [*lockgen, "run", str(lock), "--", "true"]
        materialize = [*lockgen, "materialize", str(lock), "--prefix", str(prefix)]
        check = [*lockgen, "check", "--lock", str(lock), "--prefix", str(prefix)]
        for command in (run, materialize):
            subprocess.run([sys.executable, *command], env=env, capture_output=True, check=True)
        time.sleep(RACY_NS / 1e9 + 0.1)  # a tree changed within RACY_NS of its check keeps no verdict
        for command in (run, materialize, check, run, materialize, check):  # verdicts and the run's record kept
            subprocess.run([sys.executable, *command], env=env, capture_output=True, check=True)
        stack = root / "pytorch-cuda" / "stack.toml"
        shutil.copytree(STACK.parent, stack.parent, ignore=shutil.ignore_patterns("locks"))
        resolve = [*lockgen, "resolve", str(stack), "--channel-alias", f"conda-forge={SNAPSHOT}"]
        subprocess.run([sys.executable, *resolve], env=env, capture_output=True, check=True)
        bare = {row[0] for row in imports_of(["-c", "pass"], env)}
        print(
            f"-X importtime, beyond the {len(bare)} modules the bare interpreter imports at its start here "
            f"({sys.version.split()[0]}):"
        )
        for name, command in (
            ("run LOCK -- true", run),
            ("materialize (repeated)", materialize),
            ("check --lock (repeated)", check),
            ("resolve pytorch-cuda", resolve),
            ("--help", [*lockgen, "--help"]),
        ):
            print(f"- {name}: {summary(command, env, bare, args.runs, args.top)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
