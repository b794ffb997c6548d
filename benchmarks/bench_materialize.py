"""Benchmark materialize and check on a test channel of real archives (a few thousand files by default;
`--packages 40 --files 1500` gives 60,000; `--smoke` a few dozen, one run, nothing judged).

- cold materialize (empty prefix, warm package store and cache) vs `rattler.install` of the same archives
  (target <= 1.2); lockgen also checks the extracted cache against paths.json and proves every file
- materialize of an existing store entry vs `cp -al` of the prefix (target <= 1)
- `lockgen check --lock` (conformance: every file against its package's paths.json) vs
  `find | xargs -P<cores> sha256sum` on all cores (target <= 1.2)
- `lockgen check --full` vs `find | xargs sha256sum`; `lockgen check` (fingerprints) in seconds (target <= 0.3 s)

The rattler baseline sometimes dies with SIGSEGV: such a run is run again (`harness.timed`) and reported.

    python benchmarks/bench_materialize.py [--runs 5] [--packages 20] [--files 150] [--kib 1] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import add_smoke, bulk_stack, isolated_env, median, median_pair, report, report_crashes, timed

RAW = """
import asyncio, sys, rattler
async def main():
    records = [await rattler.RepoDataRecord.from_package_archive(p) for p in sys.argv[3:]]
    await rattler.install(records, target_prefix=sys.argv[1], cache_dir=sys.argv[2], installed_packages=[],
                          platform=rattler.Subdir("linux-64"), execute_link_scripts=False, show_progress=False)
asyncio.run(main())
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--packages", type=int, default=20)
    parser.add_argument("--files", type=int, default=150)
    parser.add_argument("--kib", type=int, default=1, help="size of each file in KiB")
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.packages, args.files = 1, 3, 10
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = isolated_env(root)
        lock = bulk_stack(root, args.packages, args.files, args.kib)
        lockgen = [sys.executable, "-m", "lockgen"]
        prefix = root / "env"
        materialize = lockgen + ["materialize", str(lock), "--prefix", str(prefix)]
        timed(materialize, env, required=True)
        archives = sorted(str(p) for p in (root / "home" / "pkgs").iterdir() if p.name.endswith((".conda", ".tar.bz2")))
        files = sum(1 for _ in prefix.rglob("*") if _.is_file())
        print(f"{args.packages} packages, {files} files in the prefix")
        raw = root / "raw_install.py"
        raw.write_text(RAW)

        def cold() -> float | None:
            shutil.rmtree(prefix, ignore_errors=True)
            return timed(materialize, env, required=True)

        def rattler_install() -> float | None:
            target = root / "raw-env"
            shutil.rmtree(target, ignore_errors=True)
            return timed([sys.executable, str(raw), str(target), str(root / "home" / "rattler-cache"), *archives], env)

        report("cold materialize vs rattler.install", *median_pair(args.runs, cold, rattler_install), 1.2, args.smoke)
        cold()

        def copy() -> float | None:
            shutil.rmtree(root / "copy", ignore_errors=True)
            return timed(["cp", "-al", str(prefix), str(root / "copy")], env)

        report(
            "re-materialize vs cp -al",
            *median_pair(args.runs, lambda: timed(materialize, env, required=True), copy),
            1.0,
            args.smoke,
        )
        cores = os.cpu_count() or 1
        all_cores = f"find {prefix} -type f -print0 | xargs -0 -P{cores} -n 500 sha256sum > /dev/null"
        report(
            f"check --lock vs find | sha256sum on {cores} cores",
            *median_pair(
                args.runs,
                lambda: timed(lockgen + ["check", "--lock", str(lock), "--prefix", str(prefix)], env, required=True),
                lambda: timed(all_cores, env, shell=True),
            ),
            1.2,
            args.smoke,
        )
        report(
            "check --full vs find | sha256sum",
            *median_pair(
                args.runs,
                lambda: timed(lockgen + ["check", "--prefix", str(prefix), "--full"], env, required=True),
                lambda: timed(f"find {prefix} -type f -print0 | xargs -0 sha256sum > /dev/null", env, shell=True),
            ),
            1.0,
            args.smoke,
        )
        fast = median(
            [timed(lockgen + ["check", "--prefix", str(prefix)], env, required=True) for _ in range(args.runs)]
        )
        verdict = "smoke size, not judged" if args.smoke else f"target <= 0.3 s: {'within' if fast <= 0.3 else 'OVER'}"
        print(f"check (fingerprints) of {files} files: {fast:.2f} s ({verdict})")
    report_crashes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
