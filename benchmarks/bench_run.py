"""Benchmark the daily commands on an environment already made: what `lockgen run LOCK -- python -c pass` costs over
the bare interpreter, and a repeated `lockgen materialize LOCK --prefix DIR`, in CPU time (user + system of the
process and its children, from outside: the steady figure on a shared machine), medians of alternating runs.

- `run LOCK -- python -c pass` over `python -c pass`: target <= 50 ms of CPU more (issue 43)
- `materialize LOCK --prefix DIR` of a prefix it made: target <= 100 ms of CPU
- the same two with `LOCKGEN_REPARSE=1` (every byte parsed again, through the typer app), for comparison
- the anchor (issue 43): `uv run --offline python -c pass` in a project `uv init --bare` + `uv sync --offline`
  make here, over that project's own `python -c pass` (left out when uv is missing or cannot make one offline)
- `run` over the bare interpreter again with both started by `python -S` (no site-packages start-up files: this
  machine's `.pth` hooks import pathlib, re and more before any program, which a bare `python -c pass` pays
  and lockgen then finds loaded), the figure a machine without such hooks would see
- `run STACK -- python -c pass` without `--target` (this node's target detected: the probe runs each time, the
  target it chose kept by the stack's bytes and the probe's answers), with and without `-S`, and with
  `LOCKGEN_REPARSE=1` (the typer app: the stack parsed, the node matched, the lock's freshness checked)
- with `--installed`: lockgen installed as a user installs it, `pip install` of this tree (not editable) into a
  fresh venv, and `VENV/bin/lockgen run LOCK -- VENV/bin/python -c pass` over `VENV/bin/python -c pass`: no
  editable-install finder and none of this machine's `.pth` hooks (pip needs an index that has the dependencies)

The environment is a conda one of small packages (the tests' channel factory); its `python` is this interpreter,
named by its path, so both sides run the same program.

    python benchmarks/bench_run.py [--runs 31] [--packages 20] [--files 150] [--installed] [--smoke]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import add_smoke, bulk_stack, cpu_timed, isolated_env, median, report_crashes
from lockgen.adapters.proof.stat_walk import RACY_NS

RUN_TARGET_MS = 50
MATERIALIZE_TARGET_MS = 100


def uv_project(root: Path) -> tuple[list[str], list[str], dict[str, str]] | None:
    """(`uv run ... python -c pass`, the project's own `python -c pass`, their environment) for a synced project
    of no dependencies made offline under `root` with this interpreter; None where uv cannot make one."""
    uv = shutil.which("uv")
    if uv is None:
        return None
    project, temporary = root / "uv-project", root / "uv-tmp"
    project.mkdir()
    temporary.mkdir()
    # uv's lock of an interpreter that is no virtualenv (`uv-HASH.lock`) goes to the temporary folder, and stays
    env = {**isolated_env(root), "UV_CACHE_DIR": str(root / "uv-cache"), "TMPDIR": str(temporary)}
    for step in (
        ["init", "--bare", "--offline", "--python", sys.executable, "-q", str(project)],
        ["sync", "--offline", "--python", sys.executable, "-q", "--project", str(project)],
    ):
        if subprocess.run([uv, *step], env=env, capture_output=True).returncode != 0:
            return None
    run = [uv, "run", "--offline", "--project", str(project), "python", "-c", "pass"]
    if subprocess.run(run, env=env, capture_output=True).returncode != 0:  # also its first run, untimed
        return None
    return run, [str(project / ".venv" / "bin" / "python"), "-c", "pass"], env


def installed_lockgen(root: Path) -> Path:
    """A fresh venv under `root` with this tree installed by pip (not editable), as a user installs lockgen."""
    venv = root / "installed"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    repo = Path(__file__).resolve().parent.parent
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(repo)], check=True)
    return venv


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=31)
    parser.add_argument("--packages", type=int, default=20)
    parser.add_argument("--files", type=int, default=150)
    parser.add_argument(
        "--installed", action="store_true", help="also measure lockgen pip-installed into a fresh venv (its script)"
    )
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.packages, args.files = 1, 3, 10
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = isolated_env(root)
        reparse = {**env, "LOCKGEN_REPARSE": "1"}
        lock = bulk_stack(root, args.packages, args.files, 1)
        lockgen = [sys.executable, "-m", "lockgen"]
        bare = [sys.executable, "-c", "pass"]
        run = lockgen + ["run", str(lock), "--", *bare]
        materialize = lockgen + ["materialize", str(lock), "--prefix", str(root / "env")]
        bare_without_site = [sys.executable, "-S", "-c", "pass"]
        run_without_site = [sys.executable, "-S", "-m", "lockgen", "run", str(lock), "--", *bare_without_site]
        stack = str(lock.parent.parent / "stack.toml")
        run_stack = lockgen + ["run", stack, "--", *bare]
        run_stack_without_site = [sys.executable, "-S", "-m", "lockgen", "run", stack, "--", *bare_without_site]
        env_without_site = {
            **env,
            "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
        }  # lockgen without site-packages
        cpu_timed(run, env)  # makes the store's environment, and keeps the lock's checked value
        cpu_timed(run_stack, env)  # detects this node's target and keeps it, with the stack's fresh verdict
        cpu_timed(materialize, env)
        time.sleep(RACY_NS / 1e9 + 0.1)  # a tree changed within RACY_NS of its check keeps no verdict
        for _ in range(2):  # each environment's verdict kept again after the other's build linked the same files
            cpu_timed(run, env)
            cpu_timed(materialize, env)
        samples: dict[str, list[float]] = {
            "bare": [],
            "run": [],
            "materialize": [],
            "run, reparsed": [],
            "materialize, reparsed": [],
            "bare -S": [],
            "run -S": [],
            "run STACK": [],
            "run STACK -S": [],
            "run STACK, reparsed": [],
        }
        anchor = uv_project(root)
        if anchor is not None:
            samples.update({"uv run": [], "uv's python": []})
        installed: tuple[list[str], list[str]] | None = None
        if args.installed:
            venv = installed_lockgen(root)
            bare_installed = [str(venv / "bin" / "python"), "-c", "pass"]
            installed = ([str(venv / "bin" / "lockgen"), "run", str(lock), "--", *bare_installed], bare_installed)
            cpu_timed(installed[0], env)  # the store's environment made for this interpreter
            time.sleep(RACY_NS / 1e9 + 0.1)
            cpu_timed(installed[0], env)
            samples.update({"installed run": [], "installed bare": []})
        for _ in range(args.runs):  # alternating, so a burst of other work touches every figure alike
            if anchor is not None:
                samples["uv run"].append(cpu_timed(anchor[0], anchor[2])[1])
                samples["uv's python"].append(cpu_timed(anchor[1], anchor[2])[1])
            if installed is not None:
                samples["installed run"].append(cpu_timed(installed[0], env)[1])
                samples["installed bare"].append(cpu_timed(installed[1])[1])
            samples["bare"].append(cpu_timed(bare)[1])
            samples["run"].append(cpu_timed(run, env)[1])
            samples["materialize"].append(cpu_timed(materialize, env)[1])
            samples["run, reparsed"].append(cpu_timed(run, reparse)[1])
            samples["materialize, reparsed"].append(cpu_timed(materialize, reparse)[1])
            samples["bare -S"].append(cpu_timed(bare_without_site)[1])
            samples["run -S"].append(cpu_timed(run_without_site, env_without_site)[1])
            samples["run STACK"].append(cpu_timed(run_stack, env)[1])
            samples["run STACK -S"].append(cpu_timed(run_stack_without_site, env_without_site)[1])
            samples["run STACK, reparsed"].append(cpu_timed(run_stack, reparse)[1])
        cpu = {name: 1000 * (median(values) or 0.0) for name, values in samples.items()}
        print(
            f"{args.runs} runs each, median CPU (user + sys): "
            + ", ".join(f"{name} {ms:.0f} ms" for name, ms in cpu.items())
        )
        for name, bare_name, limit in (
            ("run", "bare", RUN_TARGET_MS),
            ("run, reparsed", "bare", RUN_TARGET_MS),
            ("run -S", "bare -S", RUN_TARGET_MS),
            ("run STACK", "bare", RUN_TARGET_MS),
            ("run STACK -S", "bare -S", RUN_TARGET_MS),
            ("run STACK, reparsed", "bare", RUN_TARGET_MS),
            *([("installed run", "installed bare", RUN_TARGET_MS)] if installed is not None else []),
        ):
            over = cpu[name] - cpu[bare_name]
            verdict = (
                "smoke size, not judged"
                if args.smoke
                else f"target <= {limit} ms over: {'within' if over <= limit else 'OVER'}"
            )
            print(
                f"{name} -- python -c pass: {over:.0f} ms of CPU over the bare interpreter, ratio "
                f"{cpu[name] / cpu[bare_name]:.2f} ({verdict})"
            )
        if anchor is not None:
            uv_over = cpu["uv run"] - cpu["uv's python"]
            print(
                f"the anchor, uv run -- python -c pass: {uv_over:.0f} ms of CPU over its project's python "
                f"(lockgen run: {cpu['run'] - cpu['bare']:.0f} ms, started by python -S "
                f"{cpu['run -S'] - cpu['bare -S']:.0f} ms)"
            )
        for name in ("materialize", "materialize, reparsed"):
            verdict = (
                "smoke size, not judged"
                if args.smoke
                else f"target <= {MATERIALIZE_TARGET_MS} ms: "
                f"{'within' if cpu[name] <= MATERIALIZE_TARGET_MS else 'OVER'}"
            )
            print(
                f"repeated {name}: {cpu[name]:.0f} ms of CPU, {cpu[name] - cpu['bare']:.0f} ms over the bare "
                f"interpreter ({verdict})"
            )
    report_crashes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
