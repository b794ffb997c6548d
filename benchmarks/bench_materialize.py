"""Benchmark materialize and check on a test channel of real archives (a few thousand files by default;
`--packages 40 --files 1500` gives 60,000).

- cold materialize (empty prefix, warm package store and cache) vs `rattler.install` of the same archives
  (target <= 1.2); lockgen also checks the extracted cache against paths.json and proves every file
- materialize of an existing store entry vs `cp -al` of the prefix (target <= 1)
- `lockgen check --lock` (conformance: every file against its package's paths.json) vs
  `find | xargs -P<cores> sha256sum` on all cores (target <= 1.2)
- `lockgen check --full` vs `find | xargs sha256sum`; `lockgen check` (size+mtime) in seconds (target <= 0.3 s)

    python benchmarks/bench_materialize.py [--runs 5] [--packages 20] [--files 150] [--kib 1]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

RAW = """
import asyncio, sys, rattler
async def main():
    records = [await rattler.RepoDataRecord.from_package_archive(p) for p in sys.argv[3:]]
    await rattler.install(records, target_prefix=sys.argv[1], cache_dir=sys.argv[2], installed_packages=[],
                          platform=rattler.Subdir("linux-64"), execute_link_scripts=False, show_progress=False)
asyncio.run(main())
"""


def timed(command: list[str], env: dict[str, str], shell: bool = False) -> float:
    started = time.perf_counter()
    subprocess.run(command if not shell else command[0], check=True, shell=shell, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def median_pair(runs: int, ours, theirs) -> tuple[float, float]:
    mine, base = [], []
    for _ in range(runs):
        mine.append(ours())
        base.append(theirs())
    return statistics.median(mine), statistics.median(base)


def report(name: str, ours: float, theirs: float, target: float) -> None:
    ratio = ours / theirs
    print(f"{name}: lockgen {ours * 1000:.0f} ms, baseline {theirs * 1000:.0f} ms, ratio {ratio:.2f} "
          f"(target <= {target}: {'within' if ratio <= target else 'OVER'})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--packages", type=int, default=20)
    parser.add_argument("--files", type=int, default=150)
    parser.add_argument("--kib", type=int, default=1, help="size of each file in KiB")
    args = parser.parse_args()
    from tests.channel_factory import Pkg, build_channel

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        def content(i: int, j: int) -> str:
            line = f"{i}-{j}\n"
            return line * max(1, args.kib * 1024 // len(line))

        packages = [Pkg(f"bulk{i:02d}", "1.0", files={f"share/bulk{i:02d}/f{j:04d}.txt": content(i, j)
                                                        for j in range(args.files)}) for i in range(args.packages)]
        channel = build_channel(root / "channel", packages)
        stack = root / "stack" / "stack.toml"
        stack.parent.mkdir()
        deps = "\n".join(f'bulk{i:02d} = "*"' for i in range(args.packages))
        stack.write_text(f'[stack]\nname = "bulk"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\n{deps}\n'
                         '[targets.cpu]\narch = "cpu"\n')
        env = {**os.environ, "LOCKGEN_HOME": str(root / "home"), "LOCKGEN_CACHE_DIR": str(root / "cache")}
        lockgen = [sys.executable, "-m", "lockgen"]
        subprocess.run(lockgen + ["resolve", str(stack)], check=True, env=env, capture_output=True)
        lock = stack.parent / "locks" / "cpu.conda-lock.yml"
        prefix = root / "env"
        subprocess.run(lockgen + ["materialize", str(lock), "--prefix", str(prefix)], check=True, env=env, capture_output=True)
        archives = sorted(str(p) for p in (root / "home" / "pkgs").iterdir() if p.name.endswith((".conda", ".tar.bz2")))
        files = sum(1 for _ in prefix.rglob("*") if _.is_file())
        print(f"{args.packages} packages, {files} files in the prefix")
        raw = root / "raw_install.py"
        raw.write_text(RAW)

        def cold() -> float:
            shutil.rmtree(prefix, ignore_errors=True)
            return timed(lockgen + ["materialize", str(lock), "--prefix", str(prefix)], env)

        def rattler_install() -> float:
            target = root / "raw-env"
            shutil.rmtree(target, ignore_errors=True)
            return timed([sys.executable, str(raw), str(target), str(root / "home" / "rattler-cache"), *archives], env)

        report("cold materialize vs rattler.install", *median_pair(args.runs, cold, rattler_install), 1.2)
        cold()

        def again() -> float:
            return timed(lockgen + ["materialize", str(lock), "--prefix", str(prefix)], env)

        def copy() -> float:
            shutil.rmtree(root / "copy", ignore_errors=True)
            return timed(["cp", "-al", str(prefix), str(root / "copy")], env)

        report("re-materialize vs cp -al", *median_pair(args.runs, again, copy), 1.0)
        hashing = [f"find {prefix} -type f -print0 | xargs -0 sha256sum > /dev/null"]
        cores = os.cpu_count() or 1
        all_cores = [f"find {prefix} -type f -print0 | xargs -0 -P{cores} -n 500 sha256sum > /dev/null"]
        report(f"check --lock vs find | sha256sum on {cores} cores",
               *median_pair(args.runs, lambda: timed(lockgen + ["check", "--lock", str(lock), "--prefix", str(prefix)], env),
                            lambda: timed(all_cores, env, shell=True)), 1.2)
        report("check --full vs find | sha256sum",
               *median_pair(args.runs, lambda: timed(lockgen + ["check", "--prefix", str(prefix), "--full"], env),
                            lambda: timed(hashing, env, shell=True)), 1.0)
        fast = statistics.median(timed(lockgen + ["check", "--prefix", str(prefix)], env) for _ in range(args.runs))
        print(f"check (size+mtime) of {files} files: {fast:.2f} s (target <= 0.3 s: {'within' if fast <= 0.3 else 'OVER'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
