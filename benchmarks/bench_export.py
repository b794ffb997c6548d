"""Benchmark export: `lockgen export` of a lock whose environment holds a few hundred MB, against the
physical floor, `tar -c` of the same tree piped through the same compressor (gzip -1) and `sha256sum`;
and re-export with one package changed against a full export.

    python benchmarks/bench_export.py [--runs 3] [--packages 12] [--mb 16]
    python benchmarks/bench_export.py --lock OLD --changed-lock NEW [--base LAYOUT] [--runs 3]

The first builds a channel of `--packages` packages of `--mb` MB each and changes one of them; the
second measures real locks (e.g. the torch-pypi example's h100 lock, and the same stack with one
wheel moved), which needs their packages reachable.

Targets: full export <= 1.3x the floor; re-export after a one-package change <= 0.2x a full export.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def payload(seed: int, megabytes: int) -> str:
    """Text that compresses about as well as shared libraries do (roughly 3:1)."""
    rng = random.Random(seed)
    words = [f"sym_{rng.getrandbits(32):08x}" for _ in range(4096)]
    return " ".join(rng.choice(words) for _ in range(megabytes * 2**20 // 13))


def timed(command: list[str], env: dict[str, str], shell: bool = False) -> float:
    started = time.perf_counter()
    subprocess.run(command[0] if shell else command, shell=shell, check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def synthetic_locks(root: Path, packages: int, megabytes: int, env: dict[str, str]) -> tuple[Path, Path]:
    """Two locks over a channel of big packages that differ in one package's version."""
    from tests.channel_factory import Pkg, build_channel

    built = [Pkg(f"big{i:02d}", v, files={f"lib/big{i:02d}.so.txt": payload(i * 10 + int(v[-1]), megabytes)})
             for i in range(packages) for v in (["1.0", "1.1"] if i == 0 else ["1.0"])]
    channel = build_channel(root / "channel", built)
    locks = []
    for version in ("1.0", "1.1"):
        stack = root / f"stack-{version}" / "stack.toml"
        stack.parent.mkdir()
        deps = "\n".join(f'big{i:02d} = "{version if i == 0 else "1.0"}"' for i in range(packages))
        stack.write_text(f'[stack]\nname = "big"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\n{deps}\n'
                         '[targets.cpu]\narch = "cpu"\n')
        subprocess.run([sys.executable, "-m", "lockgen", "resolve", str(stack)], check=True, env=env, capture_output=True)
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
    args = parser.parse_args()
    if (args.lock is None) != (args.changed_lock is None):
        parser.error("--lock and --changed-lock go together")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {**os.environ, "LOCKGEN_HOME": str(root / "home"), "LOCKGEN_CACHE_DIR": str(root / "cache")}
        old, new = ((args.lock.resolve(), args.changed_lock.resolve()) if args.lock
                    else synthetic_locks(root, args.packages, args.mb, env))
        base = ["--base", str(args.base.resolve())] if args.base else []
        tree = root / "tree"
        subprocess.run([sys.executable, "-m", "lockgen", "materialize", str(old), "--prefix", str(tree)],
                       check=True, env=env, capture_output=True)
        size = sum(p.stat().st_size for p in tree.rglob("*") if p.is_file() and not p.is_symlink())
        print(f"{old.name}: {size / 2**20:.0f} MiB environment")

        def export(lock: Path, out: str) -> float:
            shutil.rmtree(root / out, ignore_errors=True)
            return timed([sys.executable, "-m", "lockgen", "export", str(lock), "--out", str(root / out), *base], env)

        def full() -> float:
            shutil.rmtree(root / "home" / "layers", ignore_errors=True)
            return export(old, "out")

        floor = [f"tar -C {tree} -cf - . | gzip -1 | sha256sum > /dev/null"]
        mine, floors = [], []
        for _ in range(args.runs):
            mine.append(full())
            floors.append(timed(floor, env, shell=True))
        ratio = statistics.median(mine) / statistics.median(floors)
        print(f"full export: lockgen {statistics.median(mine):.2f} s, tar | gzip -1 | sha256sum {statistics.median(floors):.2f} s, "
              f"ratio {ratio:.2f} (target <= 1.3: {'within' if ratio <= 1.3 else 'OVER'})")
        changed = []
        for _ in range(args.runs):
            full()  # the layer cache holds the old lock's layers
            changed.append(export(new, "out2"))
        ratio = statistics.median(changed) / statistics.median(mine)
        print(f"re-export with one package changed: {statistics.median(changed):.2f} s, {ratio:.2f} of a full export "
              f"(target <= 0.2: {'within' if ratio <= 0.2 else 'OVER'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
