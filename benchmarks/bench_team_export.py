"""Benchmark a team image on its base (issue 18): exporting a team lock with `--base` of the base's own
image (its layers reused as they are, only the team's packages built) against exporting the whole team
environment from scratch, alternating, each in a fresh home (no layer cache), medians and the ratio.

    python benchmarks/bench_team_export.py [--runs 3] [--packages 10] [--mb 16] [--team-mb 8]

The base is `--packages` packages of `--mb` MB; the team adds one package of `--team-mb` MB (5% of the
bytes by default). Target: ratio <= 0.2 when the team adds <= 10% of the bytes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench_export import payload, timed  # noqa: E402


def stacks(root: Path, packages: int, megabytes: int, team_mb: int, env: dict[str, str]) -> tuple[Path, Path]:
    """(the base lock, the team lock) over a channel of big packages; the base is resolved first."""
    from tests.channel_factory import Pkg, build_channel

    built = [Pkg(f"big{i:02d}", "1.0", files={f"lib/big{i:02d}.so.txt": payload(i, megabytes)}) for i in range(packages)]
    built.append(Pkg("teamlib", "1.0", files={"lib/teamlib.so.txt": payload(99, team_mb)}))
    channel = build_channel(root / "channel", built)
    deps = "\n".join(f'big{i:02d} = "*"' for i in range(packages))
    base = root / "platform" / "stack.toml"
    base.parent.mkdir()
    base.write_text(f'[stack]\nname = "platform"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\n{deps}\n'
                    '[targets.cpu]\narch = "cpu"\n')
    team = root / "team" / "stack.toml"
    team.parent.mkdir()
    team.write_text('[stack]\nname = "team"\nextends = "../platform/stack.toml"\n[dependencies]\nteamlib = "*"\n')
    for stack in (base, team):
        subprocess.run([sys.executable, "-m", "lockgen", "resolve", str(stack)], check=True, env=env, capture_output=True)
    return base.parent / "locks" / "cpu.conda-lock.yml", team.parent / "locks" / "cpu.conda-lock.yml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--packages", type=int, default=10)
    parser.add_argument("--mb", type=int, default=16)
    parser.add_argument("--team-mb", type=int, default=8)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-team-"))
    try:
        env = {**os.environ, "LOCKGEN_HOME": str(root / "home"), "LOCKGEN_CACHE_DIR": str(root / "cache")}
        base_lock, team_lock = stacks(root, args.packages, args.mb, args.team_mb, env)
        lockgen = [sys.executable, "-m", "lockgen", "export"]
        subprocess.run(lockgen + [str(base_lock), "--out", str(root / "base-img")], check=True, env=env, capture_output=True)
        on_base, scratch = [], []
        for run in range(args.runs):  # alternating, each in a fresh home: no layer of the team's is cached
            for kind, extra, times in (("on-base", ["--base", str(root / "base-img")], on_base), ("scratch", [], scratch)):
                out, home = root / f"{kind}-{run}", root / f"home-{kind}-{run}"
                times.append(timed(lockgen + [str(team_lock), "--out", str(out), *extra], {**env, "LOCKGEN_HOME": str(home)}))
                shutil.rmtree(out)
                shutil.rmtree(home, ignore_errors=True)
        share = args.team_mb / (args.team_mb + args.packages * args.mb)
        print(f"base: {args.packages} packages x {args.mb} MB; the team adds {args.team_mb} MB ({share:.0%} of the bytes)")
        print(f"team image on the base image: median {statistics.median(on_base):.2f} s  {[round(t, 2) for t in on_base]}")
        print(f"team image from scratch:      median {statistics.median(scratch):.2f} s  {[round(t, 2) for t in scratch]}")
        print(f"ratio {statistics.median(on_base) / statistics.median(scratch):.2f} (target <= 0.2)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
