"""Benchmark export: `lockgen export` of a lock whose environment holds a few hundred MB, against the
physical floor, `tar -c` of the same tree piped through the same compressor (gzip -1) and `sha256sum`;
and re-export with one package changed against a full export.

    python benchmarks/bench_export.py [--runs 3] [--packages 12] [--mb 16] [--smoke]
    python benchmarks/bench_export.py --lock OLD --changed-lock NEW [--base LAYOUT] [--runs 3]

The first builds a channel of `--packages` packages of `--mb` MB each and changes one of them; the
second measures real locks (e.g. the torch-pypi example's h100 lock, and the same stack with one
wheel moved), which needs their packages reachable.

Targets: full export <= 1.3x the floor; re-export after a one-package change <= 0.2x a full export.
`--smoke`: two packages of 1 MB, one run, not judged.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.harness import add_smoke, isolated_env, median_pair, report, report_crashes, timed  # noqa: E402


def payload(seed: int, megabytes: int) -> str:
    """Text that compresses about as well as shared libraries do (roughly 3:1)."""
    rng = random.Random(seed)
    words = [f"sym_{rng.getrandbits(32):08x}" for _ in range(4096)]
    return " ".join(rng.choice(words) for _ in range(megabytes * 2**20 // 13))


def synthetic_locks(root: Path, packages: int, megabytes: int, env: dict[str, str]) -> tuple[Path, Path]:
    """Two locks over a channel of big packages that differ in one package's version."""
    from tests.channel_factory import Pkg, build_channel

    built = [
        Pkg(f"big{i:02d}", v, files={f"lib/big{i:02d}.so.txt": payload(i * 10 + int(v[-1]), megabytes)})
        for i in range(packages)
        for v in (["1.0", "1.1"] if i == 0 else ["1.0"])
    ]
    channel = build_channel(root / "channel", built)
    locks = []
    for version in ("1.0", "1.1"):
        stack = root / f"stack-{version}" / "stack.toml"
        stack.parent.mkdir()
        deps = "\n".join(f'big{i:02d} = "{version if i == 0 else "1.0"}"' for i in range(packages))
        stack.write_text(
            '[stack]\nname = "big"\nchannels = '
            f'["{channel.as_uri()}"]\n[dependencies]\n{deps}\n[targets.cpu]\narch = "cpu"\n'
        )
        timed([sys.executable, "-m", "lockgen", "resolve", str(stack)], env, required=True)
        locks.append(stack.parent / "locks" / "cpu.conda-lock.yml")
    return locks[0], locks[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--packages", type=int, default=12)
    parser.add_argument("--mb", type=int, default=16, help="MB of data per package")
    parser.add_argument("--lock", type=Path, help="a real lock to export (with --changed-lock)")
    parser.add_argument("--changed-lock", type=Path, help="the same stack with one package changed")
    parser.add_argument("--base", type=Path, help="a base image layout for both exports")
    add_smoke(parser)
    args = parser.parse_args()
    if (args.lock is None) != (args.changed_lock is None):
        parser.error("--lock and --changed-lock go together")
    if args.smoke:
        args.runs, args.packages, args.mb = 1, 2, 1
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = isolated_env(root)
        old, new = (
            (args.lock.resolve(), args.changed_lock.resolve())
            if args.lock
            else synthetic_locks(root, args.packages, args.mb, env)
        )
        base = ["--base", str(args.base.resolve())] if args.base else []
        tree = root / "tree"
        timed([sys.executable, "-m", "lockgen", "materialize", str(old), "--prefix", str(tree)], env, required=True)
        size = sum(p.stat().st_size for p in tree.rglob("*") if p.is_file() and not p.is_symlink())
        print(f"{old.name}: {size / 2**20:.0f} MiB environment")

        def export(lock: Path, out: str) -> float | None:
            shutil.rmtree(root / out, ignore_errors=True)
            return timed(
                [sys.executable, "-m", "lockgen", "export", str(lock), "--out", str(root / out), *base],
                env,
                required=True,
            )

        def full() -> float | None:
            shutil.rmtree(root / "home" / "layers", ignore_errors=True)
            return export(old, "out")

        floor = f"tar -C {tree} -cf - . | gzip -1 | sha256sum > /dev/null"
        mine, floors = median_pair(args.runs, full, lambda: timed(floor, env, shell=True))
        report("full export vs tar | gzip -1 | sha256sum", mine, floors, 1.3, args.smoke)

        def changed() -> float | None:
            full()  # the layer cache holds the old lock's layers
            return export(new, "out2")

        again, _ = median_pair(args.runs, changed, lambda: None)
        report("re-export with one package changed vs a full export", again, mine, 0.2, args.smoke)
    report_crashes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
