"""Benchmark the first scan of a conda archive (`archive_safety.check_archive`, its marker removed before each run)
against its anchor, one plain reading of the same tar by `tarfile`'s stream mode (what the scan cost before the
header rule, issue 47: 0.45 s CPU for the `.tar.bz2` below; the rule's first version, a second decompression, made it
1.0 s). The scan reads each tar once, every header judged as tarfile reads it; the ratio scan / anchor is judged
(target <= 1.25 for the `.tar.bz2`, where decompression is the cost). CPU time of this process is the figure (the
machine is shared); the median of `--runs` alternating runs.

The archives are synthetic and reproducible: a `.tar.bz2` of 600 files, 37 MiB of payload, and a `.conda` of 3,000
files, 187 MiB (zstd), each file's bytes drawn from 16 letters (about as compressible as a package's binaries).
`--smoke`: 20 files of each, one run, nothing judged.

    python benchmarks/bench_conda_scan.py [--runs 5] [--smoke]
"""

from __future__ import annotations

import argparse
import bz2
import io
import json
import random
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import add_smoke, median
from lockgen.adapters import archive_safety

_LETTERS = bytes.maketrans(bytes(range(256)), bytes(b"abcdefghijklmnop"[i % 16] for i in range(256)))


def _tar(files: int, payload: int, seed: int) -> bytes:
    """An uncompressed tar of `files` files of `payload` bytes in all, with an info/paths.json naming them."""
    rng = random.Random(seed)
    size = payload // files
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        names = [f"lib/python3.11/site-packages/pkg/module_{i:05d}.so" for i in range(files)]
        paths = json.dumps(
            {
                "paths_version": 1,
                "paths": [{"_path": name, "path_type": "hardlink", "size_in_bytes": size} for name in names],
            }
        ).encode()
        for name, data in [
            ("info/paths.json", paths),
            *((name, rng.randbytes(size).translate(_LETTERS)) for name in names),
        ]:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _conda(path: Path, files: int, payload: int) -> None:
    compress = zstandard.ZstdCompressor(level=3).compress
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("metadata.json", b'{"conda_pkg_format_version": 2}')
        archive.writestr("info-bench-1.0-h0_0.tar.zst", compress(_tar(1, 1024, 1)))
        archive.writestr("pkg-bench-1.0-h0_0.tar.zst", compress(_tar(files, payload, 2)))


def _cpu(step: Callable[[], None]) -> float:
    started = time.process_time()
    step()
    return time.process_time() - started


def _scan(archive: Path) -> Callable[[], None]:
    def run() -> None:
        for marker in archive.parent.glob(f"{archive.name}.scanned*"):
            marker.unlink()
        archive_safety.check_archive(archive, archive.name)

    return run


def _anchor(archive: Path) -> Callable[[], None]:
    """One plain reading: every tar of the archive decompressed once, its members listed by tarfile, no rule."""

    def run() -> None:
        if archive.name.endswith(".tar.bz2"):
            streams = [bz2.open(archive)]
        else:
            with zipfile.ZipFile(archive) as whole:
                streams = [
                    zstandard.ZstdDecompressor().stream_reader(whole.read(name))
                    for name in whole.namelist()
                    if name.endswith(".tar.zst")
                ]
        for stream in streams:
            with stream, tarfile.open(fileobj=stream, mode="r|") as tar:
                for _ in tar:
                    pass

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    add_smoke(parser)
    args = parser.parse_args()
    runs = 1 if args.smoke else args.runs
    with tempfile.TemporaryDirectory() as tmp:
        bzipped, conda = Path(tmp, "bench-1.0-h0_0.tar.bz2"), Path(tmp, "bench-1.0-h0_0.conda")
        bzipped.write_bytes(bz2.compress(_tar(20 if args.smoke else 600, (1 << 20) if args.smoke else 37 << 20, 3), 9))
        _conda(conda, 20 if args.smoke else 3000, (1 << 20) if args.smoke else 187 << 20)
        for archive, judged in ((bzipped, True), (conda, False)):
            scans: list[float | None] = []
            anchors: list[float | None] = []
            for _ in range(runs):
                scans.append(_cpu(_scan(archive)))
                anchors.append(_cpu(_anchor(archive)))
            scan, anchor = median(scans), median(anchors)
            assert scan is not None and anchor is not None
            ratio = scan / anchor
            verdict = "" if args.smoke or not judged else f" (target <= 1.25: {'within' if ratio <= 1.25 else 'OVER'})"
            print(
                f"{archive.name} ({archive.stat().st_size >> 20} MiB): scan {scan:.3f} s CPU, one plain tarfile "
                f"reading {anchor:.3f} s CPU, ratio {ratio:.2f}{verdict}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
