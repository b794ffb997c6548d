"""Benchmark materialize of a pure-PyPI lock against uv alone: `lockgen materialize` into a fresh prefix
(a venv, every locked wheel installed by uv from lockgen's store and proven against its RECORD, links to
files proven before trusted by their fingerprints) against `uv venv` + `uv pip install --no-deps
--require-hashes` of the same wheels from the same warm cache, alternating, medians and the ratio (target
<= 1.2); the same in a create -> remove -> create loop (each side's environment removed after each run, as
environments come and go: the store's proofs must survive it, issue 43; target <= 1.2; wall and CPU ratios); a
re-materialize of the existing store entry (target <= 0.3 s); the first materialize, which proves every file, once;
and `check --lock` of an environment after another one sharing its files was removed (what it read again).

    python benchmarks/bench_wheels.py --lock L [--runs 5]              (a real lock; its wheels are fetched once)
    python benchmarks/bench_wheels.py --wheels W --require NAME ...    (wheel files or folders, served on loopback)
    python benchmarks/bench_wheels.py --smoke                          (the tests' tiny wheels: CI)

E.g. `--wheels /opt/wheels/torch-2.13.0+cpu-….whl --wheels <each dependency's wheel> --require torch`.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import http.server
import resource
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import add_smoke, cpu_timed, isolated_env, median, median_pair, report, report_crashes, timed


def serve_wheels(root: Path, sources: list[Path]) -> str:
    """A PEP 503 index of these wheel files (a folder: its wheels), linked with their sha256, served on loopback."""
    import re

    simple = root / "index" / "simple"
    for source in sources:
        for wheel in sorted(source.glob("*.whl")) if source.is_dir() else [source]:
            name = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
            (simple / name).mkdir(parents=True, exist_ok=True)
            if not (simple / name / wheel.name).exists():
                (simple / name / wheel.name).symlink_to(wheel.resolve())
    for project in simple.iterdir():
        links = "".join(
            f'<a href="{w.name}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">{w.name}</a>\n'
            for w in sorted(project.glob("*.whl"))
        )
        (project / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")
    from tests.conftest import _QuietHandler

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root / "index"))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/simple"


def lock_of(root: Path, index: str, names: list[str], env: dict[str, str]) -> Path:
    stack = root / "stack" / "stack.toml"
    stack.parent.mkdir()
    deps = "\n".join(f'{name} = "*"' for name in names)
    stack.write_text(
        f'[stack]\nname = "wheels"\npython = "3.11"\nplatforms = ["linux-64"]\n[pypi-dependencies]\n{deps}\n'
        f'[pypi-options]\nindex-url = "{index}"\ntorch-indexes = {{ cpu = "{index}" }}\n[targets.cpu]\narch = "cpu"\n'
    )
    timed([sys.executable, "-m", "lockgen", "resolve", str(stack)], env, required=True)
    return stack.parent / "locks" / "cpu.conda-lock.yml"


def uv_line(root: Path, lock: Path) -> str:
    """`uv venv` + `uv pip install --no-deps --require-hashes` of the lock's wheels, from a copy of lockgen's uv
    cache (as warm, its own inodes: uv's cache is its own, as lockgen's store is lockgen's)."""
    from lockgen.adapters.lock.lockfile_yaml import load_lock
    from lockgen.adapters.pypi.uv_resolver import uv_binary

    lines = [f"{p.name} @ {p.url} --hash=sha256:{p.hash.sha256}" for p in load_lock(lock).packages_for("linux-64")]
    (root / "requirements.txt").write_text("\n".join(lines) + "\n")
    cache = root / "uv-cache-baseline"
    shutil.copytree(root / "home" / "uv-cache", cache, symlinks=True)
    uv, venv = uv_binary(), root / "uv-env-$RUN"
    return (
        f"UV_CACHE_DIR={cache} UV_LINK_MODE=hardlink {uv} venv -q --python 3.11 "
        f"{venv} && UV_CACHE_DIR={cache} UV_LINK_MODE=hardlink {uv} pip install -q --python "
        f"{venv}/bin/python --no-deps --require-hashes --only-binary :all: --no-config -r {root / 'requirements.txt'}"
    )


def sibling_removed(lockgen: list[str], lock: Path, root: Path, env: dict[str, str]) -> None:
    """`check --lock` of an environment after another one sharing its store files was made and removed (which moves
    the ctime and link count of every file they share): the files it read again, and its time."""
    check = [sys.executable, "-m", "lockgen", "check", "--lock", str(lock), "--prefix", str(root / "after-rm")]
    timed(lockgen + [str(root / "sibling")], env, required=True)
    time.sleep(1.1)  # settled (prefix_observer.RACY_NS): the check reads every byte once and keeps its verdict
    timed(check, env, required=True)
    time.sleep(1.1)
    timed(check, env, required=True)  # the verdict of the tree as it is now
    shutil.rmtree(root / "sibling")
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    said = subprocess.run(check, env=env, capture_output=True, text=True, check=True).stderr
    wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - used.ru_utime + after.ru_stime - used.ru_stime
    told = next(
        (line.strip() for line in said.splitlines() if "proven by their fingerprints" in line or "hashing the" in line),
        "(no such line)",
    )
    print(
        f"check --lock after an environment sharing its files was removed: {wall:.2f} s, {cpu:.2f} s CPU; it "
        f"said: {told}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lock", type=Path)
    parser.add_argument("--wheels", type=Path, action="append", default=[])
    parser.add_argument("--require", action="append", default=[])
    parser.add_argument("--runs", type=int, default=5)
    add_smoke(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = isolated_env(root)
        if args.lock:
            lock = args.lock.resolve()
        elif args.smoke or not args.wheels:
            from tests.wheel_index import Wheel, build_index

            args.runs = 1
            folder = (
                build_index(root / "tiny", [Wheel("alpha", "1.0"), Wheel("gamma", "1.0", requires=("alpha",))])
                / "files"
            )
            lock = lock_of(root, serve_wheels(root, [folder]), ["gamma"], env)
        else:
            lock = lock_of(root, serve_wheels(root, args.wheels), args.require, env)
        lockgen = [sys.executable, "-m", "lockgen", "materialize", str(lock), "--prefix"]
        first = timed(lockgen + [str(root / "first")], env, required=True)
        size = sum(p.stat().st_size for p in (root / "first").rglob("*") if p.is_file() and not p.is_symlink())
        files = sum(1 for p in (root / "first").rglob("*") if p.is_file())
        print(f"{lock.name}: {files} files, {size / 1e9:.2f} GB; first materialize (every file hashed) {first:.2f} s")
        baseline = uv_line(root, lock)
        runs = iter(range(2 * args.runs + 1))
        timed(baseline, {**env, "RUN": "warm"}, shell=True)

        cpus: dict[str, list[float]] = {"lockgen": [], "uv": []}

        def fresh() -> float | None:  # a new prefix each run, none removed meanwhile (see below)
            wall, cpu = cpu_timed(lockgen + [str(root / f"env-{next(runs)}")], env)
            cpus["lockgen"].append(cpu)
            return wall

        def uv() -> float | None:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall = timed(baseline, {**env, "RUN": str(next(runs))}, shell=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus["uv"].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            return wall

        report(
            "materialize into a new prefix (from lockgen's store) vs uv venv + uv pip install (warm cache)",
            *median_pair(args.runs, fresh, uv),
            1.2,
            args.smoke,
        )
        print(
            f"  CPU (process and children): lockgen {median(cpus['lockgen']) or 0:.2f} s, uv "
            f"{median(cpus['uv']) or 0:.2f} s; load average {os.getloadavg()[0]:.1f}"
        )
        hashed: list[str] = []
        loop_cpus: dict[str, list[float]] = {"lockgen": [], "uv": []}

        def children_cpu() -> float:
            used = resource.getrusage(resource.RUSAGE_CHILDREN)
            return used.ru_utime + used.ru_stime

        def made_and_removed() -> float | None:  # create -> remove -> create: the removal is not timed
            prefix = root / f"loop-{next(runs, 'last')}"
            started, cpu = time.perf_counter(), children_cpu()
            said = subprocess.run(lockgen + [str(prefix)], env=env, capture_output=True, text=True, check=True).stderr
            wall = time.perf_counter() - started
            loop_cpus["lockgen"].append(children_cpu() - cpu)
            hashed.extend(  # what the proof line says in its parentheses: files hashed now, or a placement's kept check
                line.split(" (", 1)[1].rstrip(")")
                for line in said.splitlines()
                if "every file against its RECORD" in line and " (" in line
            )
            shutil.rmtree(prefix)
            return wall

        def uv_made_and_removed() -> float | None:
            run, cpu = f"loop-{next(runs, 'last')}", children_cpu()
            wall = timed(baseline, {**env, "RUN": run}, shell=True)
            loop_cpus["uv"].append(children_cpu() - cpu)
            shutil.rmtree(root / f"uv-env-{run}", ignore_errors=True)
            return wall

        runs = iter(range(1000, 1000 + 2 * args.runs + 2))
        shutil.rmtree(root / "first")
        report(
            "create -> remove -> create loop: materialize vs uv venv + uv pip install",
            *median_pair(args.runs, made_and_removed, uv_made_and_removed),
            1.2,
            args.smoke,
        )
        mine, theirs = median(loop_cpus["lockgen"]) or 0, median(loop_cpus["uv"]) or 0
        print(
            f"  CPU (children): lockgen {mine:.2f} s, uv {theirs:.2f} s, ratio "
            f"{mine / theirs if theirs else 0:.2f}; load average {os.getloadavg()[0]:.1f}"
        )
        print(f"  each loop's proof: {'; '.join(hashed)}")
        after = timed(lockgen + [str(root / "after-rm")], env, required=True)
        print(f"materialize after the loop's environments were removed (their proofs kept): {after:.2f} s")
        time.sleep(1.1)  # a tree changed within a second of a look keeps no verdict (prefix_observer.RACY_NS)
        timed(lockgen + [str(root / "after-rm")], env, required=True)  # the first look keeps the verdict
        pairs = [cpu_timed(lockgen + [str(root / "after-rm")], env) for _ in range(args.runs)]
        again, cpu = median([w for w, _ in pairs]), median([c for _, c in pairs])
        assert again is not None and cpu is not None
        verdict = "smoke size, not judged" if args.smoke else f"target <= 0.3 s: {'within' if again <= 0.3 else 'OVER'}"
        print(
            f"re-materialize of the existing environment: {again:.2f} s, {cpu:.2f} s CPU ({verdict}; load "
            f"average {os.getloadavg()[0]:.1f})"
        )
        sibling_removed(lockgen, lock, root, env)
    report_crashes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
