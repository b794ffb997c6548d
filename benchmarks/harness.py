"""What every benchmark shares: timing a whole process with bounded retries (a baseline that crashes,
as rattler's install script sometimes does with SIGSEGV, is run again at most `ATTEMPTS` times, counted
and reported; one that never succeeds leaves its figure out and the benchmark goes on), medians of
alternating runs and their ratio, the `--smoke` flag (a size that runs in seconds: CI runs every
benchmark so, and no ratio is judged then), and a synthetic conda environment of many small files."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

ATTEMPTS = 3
CRASHES: dict[str, int] = {}
GAVE_UP: list[str] = []


def _compiled() -> None:
    """lockgen's byte code written once, as an install writes it: with PYTHONDONTWRITEBYTECODE set (as on the
    project's machines) every timed `python -m lockgen` would otherwise compile its modules again (0.1-0.3 s)."""
    import compileall

    compileall.compile_dir(str(Path(__file__).resolve().parent.parent / "lockgen"), quiet=1)


_compiled()


def add_smoke(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a size that runs in seconds, one run each, no target judged (CI runs every benchmark so)",
    )


def _name(command: Sequence[str] | str) -> str:
    if isinstance(command, str):
        return command.split()[0]
    useful = [part for part in command[1:3] if part != "-m"] if command[0] == sys.executable else [command[0]]
    return Path(useful[0]).name if useful else command[0]


def timed(
    command: Sequence[str] | str, env: Mapping[str, str] | None = None, shell: bool = False, required: bool = False
) -> float | None:
    """Wall seconds of one successful run; a failed run is counted and run again, at most `ATTEMPTS`
    times. None when every attempt failed (reported at the end), unless `required`: lockgen's own
    command failing is a broken benchmark, and stops it."""
    error = ""
    for _ in range(ATTEMPTS):
        started = time.perf_counter()
        done = subprocess.run(
            command,
            shell=shell,
            env=dict(env) if env is not None else None,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if done.returncode == 0:
            return time.perf_counter() - started
        key = f"{_name(command)} exit {done.returncode}"
        CRASHES[key] = CRASHES.get(key, 0) + 1
        error = done.stderr[-1500:]
        if required:
            break
    if required:
        raise SystemExit(f"benchmark command failed: {command}\n{error}")
    GAVE_UP.append(f"{_name(command)}: {error.strip().splitlines()[-1] if error.strip() else 'no message'}")
    return None


def cpu_timed(command: Sequence[str], env: Mapping[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its children) of one run of lockgen's own command: on a
    machine shared with other work the CPU time is the steadier figure (wall time waits for the cores)."""
    measured = wall_and_cpu(command, env, required=True)
    assert measured is not None
    return measured


def wall_and_cpu(
    command: Sequence[str], env: Mapping[str, str] | None = None, required: bool = False
) -> tuple[float, float] | None:
    """(wall seconds, CPU seconds of the process and its children, every attempt's) of one successful run, as
    `timed` runs it (a baseline's failed runs retried); None when every attempt failed."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = timed(command, env, required=required)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return None if wall is None else (wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))


def median(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def median_pair(
    runs: int, ours: Callable[[], float | None], theirs: Callable[[], float | None]
) -> tuple[float | None, float | None]:
    """Medians of `runs` alternating runs of each."""
    mine, base = [], []
    for _ in range(runs):
        mine.append(ours())
        base.append(theirs())
    return median(mine), median(base)


def report(name: str, ours: float | None, theirs: float | None, target: float, smoke: bool) -> None:
    """One line: both medians and their ratio, judged against `target` unless `smoke`."""
    if ours is None or theirs is None:
        print(f"{name}: lockgen {_ms(ours)}, baseline {_ms(theirs)}: no ratio (a side never succeeded)")
        return
    verdict = (
        "smoke size, not judged" if smoke else f"target <= {target}: {'within' if ours / theirs <= target else 'OVER'}"
    )
    print(f"{name}: lockgen {_ms(ours)}, baseline {_ms(theirs)}, ratio {ours / theirs:.2f} ({verdict})")


def _ms(value: float | None) -> str:
    return "failed" if value is None else f"{value * 1000:.0f} ms"


def report_crashes() -> None:
    """The failed runs that were run again, and the figures left out; said at the end of every benchmark."""
    if CRASHES:
        print(f"failed runs (run again, at most {ATTEMPTS} attempts each): {CRASHES}")
    for line in GAVE_UP:
        print(f"left out, every attempt failed: {line}")


def bulk_stack(root: Path, packages: int, files: int, kib: int, big_files: int = 0, big_mib: int = 0) -> Path:
    """A stack over a local channel of `packages` real conda archives of `files` files of `kib` KiB each
    (the tests' channel factory), and with `big_files`, one more of that many files of `big_mib` MiB of random
    bytes (a torch environment's libraries), resolved; returns its lock."""

    def content(i: int, j: int) -> str:
        line = f"{i}-{j}\n"
        return line * max(1, kib * 1024 // len(line))

    packages_files: dict[str, dict[str, str | bytes]] = {
        f"bulk{i:02d}": {f"share/bulk{i:02d}/f{j:04d}.txt": content(i, j) for j in range(files)}
        for i in range(packages)
    }
    if big_files:
        packages_files["bulkbig"] = {f"lib/libbig{j:02d}.so": os.urandom(big_mib << 20) for j in range(big_files)}
    return channel_stack(root, "bulk", packages_files)


def channel_stack(root: Path, name: str, packages: dict[str, dict[str, str | bytes]]) -> Path:
    """A stack of one cpu target over a local channel holding `packages` (name -> its files), built as real
    conda archives by the tests' channel factory, resolved; returns its lock."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.channel_factory import Pkg, build_channel

    channel = build_channel(root / "channel", [Pkg(package, "1.0", files=files) for package, files in packages.items()])
    stack = root / "stack" / "stack.toml"
    stack.parent.mkdir()
    deps = "\n".join(f'{package} = "*"' for package in packages)
    stack.write_text(
        f'[stack]\nname = "{name}"\nchannels = '
        f'["{channel.as_uri()}"]\n[dependencies]\n{deps}\n[targets.cpu]\narch = "cpu"\n'
    )
    timed([sys.executable, "-m", "lockgen", "resolve", str(stack)], isolated_env(root), required=True)
    return stack.parent / "locks" / "cpu.conda-lock.yml"


def isolated_env(root: Path) -> dict[str, str]:
    """This process's environment with a lockgen home and cache under `root` (uv's own cache is the user's), and
    `root` among the folders lockgen reads local packages from (the benchmark's own channels and wheels)."""
    roots = os.pathsep.join(p for p in (str(root), os.environ.get("LOCKGEN_FILE_ROOTS", "")) if p)
    return {
        **os.environ,
        "LOCKGEN_HOME": str(root / "home"),
        "LOCKGEN_CACHE_DIR": str(root / "cache"),
        "NO_COLOR": "1",
        "LOCKGEN_FILE_ROOTS": roots,
    }
