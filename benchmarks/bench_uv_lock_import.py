"""Benchmark `lockgen import` of a large uv.lock: its time and peak memory as the package count grows (`--smoke`: 500
packages, nothing judged).

The uv.lock is synthetic, of the shape `uv lock` writes: one project at `.` with two conflicting extras, and registry
packages in a tree (package i depends on 2i+1 and 2i+2, asking each for its extra `fast`, which lists the same two),
each with an x86_64 and an aarch64 manylinux wheel and a sha256. Every package is reached, every package's extra is
activated (the set of active extras as large as the lock) and every edge is judged under a marker, half of them one
naming an extra, as uv writes conflict markers. The import is run as a command (`python -m lockgen import`), so the
figures are what a user waits for; each size in a child of its own, whose peak resident set and CPU time are its own.
The CPU time is the figure judged (steadier than wall time on a shared machine): it grows with the package count, not
its square (CPU time per package at the largest size over that at the smallest <= 3; it was 3.9 from 2k to 5k before
the import was made linear). Beside each import, the anchor: Python's own TOML reader (`tomllib.loads`) of the same
file in a child of its own, which alone was half the import's time before uv.lock's layout was read as JSON; the
ratio import / tomllib is printed, and whether the largest size met the targets of 15 s CPU and 400 MiB peak
memory at 300k packages (scaled to the largest size run, from 100k).

    python benchmarks/bench_uv_lock_import.py [--sizes 10000,30000,300000] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import add_smoke, isolated_env

_ON_LINUX = " sys_platform == 'linux'"
_NOT_CPU = " extra != 'extra-3-app-cpu'"
_WHEEL = '    {{ url = "https://files.example/{name}-1.0-{tag}.whl", hash = "sha256:{digest}", size = 1000 }},\n'


def uv_lock_text(packages: int) -> str:
    """A uv.lock of one project at `.` (with the conflicting extras `cpu` and `gpu`) and `packages` registry
    packages in a tree, each with two wheels and an extra `fast` that its parent asks for."""
    parts = [
        'version = 1\nrevision = 2\nrequires-python = ">=3.10"\nconflicts = [[\n    { package = "app", extra = '
        '"cpu" },\n    { package = "app", extra = "gpu" },\n]]\n\n'
        '[[package]]\nname = "app"\nversion = "0.1.0"\nsource = { virtual = "." }\ndependencies = [\n    { name '
        '= "pkg0", extra = ["fast"] },\n]\n\n'
        "[package.optional-dependencies]\ncpu = []\ngpu = []\n"
    ]
    for i in range(packages):
        children = [child for child in (2 * i + 1, 2 * i + 2) if child < packages]
        edges = "".join(
            f'    {{ name = "pkg{child}", extra = ["fast"], marker = "{_ON_LINUX if child % 2 else _NOT_CPU}" }},\n'
            for child in children
        )
        name, digest = f"pkg{i}", f"{i:064x}"
        wheels = _WHEEL.format(name=name, tag="py3-none-manylinux_2_17_x86_64", digest=digest) + _WHEEL.format(
            name=name, tag="py3-none-manylinux_2_17_aarch64", digest=digest
        )
        parts.append(
            f'\n[[package]]\nname = "{name}"\nversion = "1.0"\nsource = {{ registry = "https://pypi.org/simple" }}\n'
            + (f"dependencies = [\n{edges}]\n" if edges else "")
            + f"wheels = [\n{wheels}]\n\n[package.optional-dependencies]\nfast = [\n{edges}]\n"
        )
    return "".join(parts)


_TARGET_CPU_S = 15.0  # at 300,000 packages
_TARGET_PEAK_MIB = 400  # at 300,000 packages (600 until session 29)
_TOMLLIB = "import sys, tomllib; tomllib.loads(open(sys.argv[1], encoding='utf-8').read())"


def _import(lock: Path, out: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, peak resident set in MiB) of one `lockgen import`."""
    return _child(
        [sys.executable, "-m", "lockgen", "import", str(lock), "-t", "cpu", "--python", "3.12", "-o", str(out)], env
    )


def _child(command: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, peak resident set in MiB) of one child, the CPU and memory its own (`wait4`): on a
    machine shared with other work the CPU time is the steadier figure."""
    started = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.stderr is not None
    error = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{command[1:3]} failed:\n{error.decode(errors='replace')[-1500:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss >> 10


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default="10000,30000,300000",
        help="package counts, comma-separated, each run in its own child (its peak memory its own)",
    )
    add_smoke(parser)
    args = parser.parse_args()
    sizes = [500] if args.smoke else [int(size) for size in args.sizes.split(",")]
    per_package: list[float] = []
    peaks: list[int] = []
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            lock = root / "uv.lock"
            lock.write_text(uv_lock_text(size))
            wall, cpu, peak = _import(lock, root / "out.conda-lock.yml", isolated_env(root))
            toml_wall, toml_cpu, toml_peak = _child([sys.executable, "-c", _TOMLLIB, str(lock)], isolated_env(root))
            per_package.append(cpu / size)
            peaks.append(peak)
            print(
                f"{size} packages ({lock.stat().st_size >> 20} MiB uv.lock): import {wall:.2f} s ({cpu:.2f} s "
                f"CPU), peak {peak} MiB; "
                f"tomllib alone {toml_wall:.2f} s ({toml_cpu:.2f} s CPU), peak {toml_peak} MiB; ratio "
                f"import/tomllib {cpu / toml_cpu:.2f} (CPU)",
                flush=True,
            )
    if sizes[-1] >= 100_000:  # below, the command's start (about half a second) is most of it
        target = _TARGET_CPU_S * sizes[-1] / 300_000
        print(
            f"target at {sizes[-1]} packages: {target:.1f} s CPU ({_TARGET_CPU_S:.0f} s at 300k): "
            f"{'met' if per_package[-1] * sizes[-1] <= target else 'NOT met'}"
        )
        memory = _TARGET_PEAK_MIB * sizes[-1] / 300_000
        print(
            f"memory target at {sizes[-1]} packages: {memory:.0f} MiB peak ({_TARGET_PEAK_MIB} MiB at 300k): "
            f"{peaks[-1]} MiB, {'met' if peaks[-1] <= memory else 'NOT met'}"
        )
    if len(sizes) > 1:
        ratio = per_package[-1] / per_package[0]
        print(
            f"CPU time per package, {sizes[-1]} vs {sizes[0]}: ratio {ratio:.2f} (target <= 3: "
            f"{'within' if ratio <= 3 else 'OVER'})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
