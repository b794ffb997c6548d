"""Benchmark a team image on its base (issue 18): exporting a team lock with `--base` of the base's own
image (its layers reused as they are, only the team's packages built) against exporting the whole team
environment from scratch, alternating, each in a fresh home (no layer cache), medians and the ratio.

    python benchmarks/bench_team_export.py [--runs 3] [--packages 10] [--mb 16] [--team-mb 8] [--smoke]

The base is `--packages` packages of `--mb` MB; the team adds one package of `--team-mb` MB (5% of the
bytes by default). Target: ratio <= 0.2 when the team adds <= 10% of the bytes. `--smoke`: two packages of
1 MB, one run, not judged.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench_export import payload  # noqa: E402
from benchmarks.harness import add_smoke, isolated_env, median, report, report_crashes, timed  # noqa: E402


def stacks(root: Path, packages: int, megabytes: int, team_mb: int, env: dict[str, str]) -> tuple[Path, Path]:
    """(the base lock, the team lock) over a channel of big packages; the base is resolved first."""
    from tests.channel_factory import Pkg, build_channel

    built = [
        Pkg(f"big{i:02d}", "1.0", files={f"lib/big{i:02d}.so.txt": payload(i, megabytes)}) for i in range(packages)
    ]
    built.append(Pkg("teamlib", "1.0", files={"lib/teamlib.so.txt": payload(99, team_mb)}))
    channel = build_channel(root / "channel", built)
    deps = "\n".join(f'big{i:02d} = "*"' for i in range(packages))
    base = root / "platform" / "stack.toml"
    base.parent.mkdir()
    base.write_text(
        '[stack]\nname = "platform"\nchannels = '
        f'["{channel.as_uri()}"]\n[dependencies]\n{deps}\n[targets.cpu]\narch = "cpu"\n'
    )
    team = root / "team" / "stack.toml"
    team.parent.mkdir()
    team.write_text('[stack]\nname = "team"\nextends = "../platform/stack.toml"\n[dependencies]\nteamlib = "*"\n')
    for stack in (base, team):
        timed([sys.executable, "-m", "lockgen", "resolve", str(stack)], env, required=True)
    return base.parent / "locks" / "cpu.conda-lock.yml", team.parent / "locks" / "cpu.conda-lock.yml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--packages", type=int, default=10)
    parser.add_argument("--mb", type=int, default=16)
    parser.add_argument("--team-mb", type=int, default=8)
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.packages, args.mb, args.team_mb = 1, 2, 1, 1
    root = Path(tempfile.mkdtemp(prefix="bench-team-"))
    try:
        env = isolated_env(root)
        base_lock, team_lock = stacks(root, args.packages, args.mb, args.team_mb, env)
        lockgen = [sys.executable, "-m", "lockgen", "export"]
        timed(lockgen + [str(base_lock), "--out", str(root / "base-img")], env, required=True)
        on_base, scratch = [], []
        for run in range(args.runs):  # alternating, each in a fresh home: no layer of the team's is cached
            for kind, extra, times in (
                ("on-base", ["--base", str(root / "base-img")], on_base),
                ("scratch", [], scratch),
            ):
                out, home = root / f"{kind}-{run}", root / f"home-{kind}-{run}"
                times.append(
                    timed(
                        lockgen + [str(team_lock), "--out", str(out), *extra],
                        {**env, "LOCKGEN_HOME": str(home)},
                        required=True,
                    )
                )
                shutil.rmtree(out)
                shutil.rmtree(home, ignore_errors=True)
        share = args.team_mb / (args.team_mb + args.packages * args.mb)
        print(
            f"base: {args.packages} packages x {args.mb} MB; the team adds {args.team_mb} MB ({share:.0%} of the bytes)"
        )
        print(f"team image on the base image: {[round(t, 2) for t in on_base]}")
        print(f"team image from scratch:      {[round(t, 2) for t in scratch]}")
        report("team image on its base vs from scratch", median(on_base), median(scratch), 0.2, args.smoke)
        report_crashes()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
