"""Benchmark `lockgen pack` against `tar cf` of the same files (`--smoke`: two small packages, one run, nothing judged).

The channel holds `--packages` real conda archives of one incompressible file of `--mib` MiB each (the tests' channel
factory), so the archive is as large as what it carries. The package store is warm (the artifacts were fetched once),
as on a build host that materialized the lock before packing it; then:

- `lockgen pack` vs `tar cf` of the store's archives (target <= 5: tar copies through the page cache, where pack also
  hashes every byte as it copies it in, about 0.25 s per 128 MiB here, and syncs the archive to disk before the rename
  that makes it appear, some 0.2 to 0.4 s; with Python's start this is about 4x at 128 MiB, less as the size grows)
- `lockgen pack` vs `sha256sum` of the files then `tar cf` and `sync` of the archive: the floor for a hash-checked,
  durable archive, the figure that says whether pack wastes anything (target <= 1.3)

    python benchmarks/bench_pack.py [--runs 5] [--packages 8] [--mib 16] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import add_smoke, channel_stack, isolated_env, median_pair, report, report_crashes, timed


def _lock(root: Path, packages: int, mib: int) -> Path:
    return channel_stack(
        root, "blobs", {f"blob{i:02d}": {f"share/blob{i:02d}/data.bin": os.urandom(mib << 20)} for i in range(packages)}
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--packages", type=int, default=8)
    parser.add_argument("--mib", type=int, default=16, help="size of each package's one file in MiB")
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.packages, args.mib = 1, 2, 1
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {**isolated_env(root), "LOCKGEN_FILE_ROOTS": str(root)}
        lock = _lock(root, args.packages, args.mib)
        out = root / "pack.tar"
        pack = [sys.executable, "-m", "lockgen", "pack", str(lock), "--out", str(out)]
        timed(pack, env, required=True)  # the store warm: every artifact fetched and checked once
        store = sorted(str(p) for p in (root / "home" / "pkgs").iterdir() if p.name.endswith((".conda", ".tar.bz2")))
        print(
            f"{len(store)} archives, {sum(os.path.getsize(p) for p in store) >> 20} MiB; the pack archive "
            f"{out.stat().st_size >> 20} MiB"
        )
        files = " ".join(store)
        report(
            "pack vs tar cf",
            *median_pair(
                args.runs,
                lambda: timed(pack, env, required=True),
                lambda: timed(f"tar cf {root / 'plain.tar'} {files}", env, shell=True),
            ),
            5.0,
            args.smoke,
        )
        floor = f"sha256sum {files} > /dev/null && tar cf {root / 'plain.tar'} {files} && sync {root / 'plain.tar'}"
        report(
            "pack vs sha256sum + tar cf + sync",
            *median_pair(args.runs, lambda: timed(pack, env, required=True), lambda: timed(floor, env, shell=True)),
            1.3,
            args.smoke,
        )
    report_crashes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
