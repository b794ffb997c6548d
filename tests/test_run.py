"""`lockgen run`, `shell` and `activate` in real environments: a conda one of packages the tests build (one of
them ships an `etc/conda/activate.d` script, as cuda-nvcc does) and a pure-PyPI venv from a loopback wheel
index. The environment is materialized on first use and reused after; the command's exit status is lockgen's;
a signal sent to lockgen reaches the command (lockgen becomes it); what `activate` prints, evaluated by real
bash, zsh and fish, gives the variables `run` gives; `shell` opens each shell in a pseudo-terminal, prompt
marked, after the user's own rc file (which moves PATH)."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from lockgen.api import resolve as api
from tests.channel_factory import Pkg, build_channel
from tests.conftest import run_cli, signals_as_from_a_terminal
from tests.test_pypi_offline import index_url, served, stack  # noqa: F401 (fixtures)

ACTIVATE_SCRIPT = """echo "cudatool: activating"
export CUDA_HOME="$CONDA_PREFIX"
export NVCC_PREPEND_FLAGS="-ccbin '$CONDA_PREFIX/bin/x86_64-conda-linux-gnu-c++'"
unset LOCKGEN_TEST_GONE
"""
SHOW = 'printf "%s\\n" "$PATH" "${CONDA_PREFIX-unset}" "${CUDA_HOME-unset}" "${VIRTUAL_ENV-unset}"'


@pytest.fixture(scope="module")
def conda_stack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-target (cpu) conda stack, resolved: `cudatool` (a program, an activate.d script) and a noarch lib."""
    root = tmp_path_factory.mktemp("run-conda")
    channel = build_channel(
        root / "channel",
        [
            Pkg(
                "cudatool",
                "1.0",
                depends=("plain-lib",),
                files={
                    "bin/hello": '#!/bin/sh\necho "hello from $CUDA_HOME"\n',
                    "etc/conda/activate.d/cudatool_activate.sh": ACTIVATE_SCRIPT,
                },
            ),
            Pkg("plain-lib", "1.0", subdir="noarch", archive=".tar.bz2"),
        ],
    )
    path = root / "stack" / "stack.toml"
    path.parent.mkdir()
    path.write_text(
        f'[stack]\nname = "run"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\ncudatool = '
        '"*"\n[targets.cpu]\narch = "cpu"\n'
    )
    api.resolve(path)
    return path


def _lock(stack_path: Path) -> str:
    return str(stack_path.parent / "locks" / "cpu.conda-lock.yml")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A fresh lockgen home, and a HOME, XDG config, runtime and temporary folder of the test's own (no user rc
    file is read; fish keeps its runtime files in XDG_RUNTIME_DIR, else in a /tmp/fish.USER it leaves)."""
    for folder in ("user", "run", "tmp"):
        (tmp_path / folder).mkdir(mode=0o700, exist_ok=True)
    return {
        "LOCKGEN_HOME": str(tmp_path / "home"),
        "HOME": str(tmp_path / "user"),
        "XDG_CONFIG_HOME": str(tmp_path / "user" / ".config"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "TMPDIR": str(tmp_path / "tmp"),
        **extra,
    }


def _store_prefix(tmp_path: Path) -> Path:
    (found,) = [p for p in (tmp_path / "home" / "envs").iterdir() if not p.name.startswith(".")]
    return found


def test_run_materializes_once_then_runs_in_the_conda_environment(conda_stack: Path, tmp_path: Path) -> None:
    other = "/elsewhere/venv"
    env = _env(tmp_path, LOCKGEN_TEST_GONE="1", VIRTUAL_ENV=other, PATH=f"{other}/bin:{os.environ['PATH']}")
    command = [
        "run",
        _lock(conda_stack),
        "--",
        "sh",
        "-c",
        f'{SHOW}; echo "$NVCC_PREPEND_FLAGS|${{LOCKGEN_TEST_GONE-gone}}"; hello; exit 7',
    ]
    first = run_cli(*command, env=env)
    assert first.returncode == 7, first.stderr
    prefix = _store_prefix(tmp_path)
    path, conda_prefix, cuda_home, venv, flags, hello = first.stdout.splitlines()
    assert path.split(":")[0] == f"{prefix}/bin" and f"{other}/bin" not in path.split(":")  # the venv's bin left
    assert path.split(":")[1:] == os.environ["PATH"].split(":")
    assert (conda_prefix, cuda_home, venv) == (str(prefix), str(prefix), "unset")
    assert flags == f"-ccbin '{prefix}/bin/x86_64-conda-linux-gnu-c++'|gone"
    assert hello == f"hello from {prefix}"
    assert "cudatool: activating" in first.stderr and "linked 2 conda packages" in first.stderr
    second = run_cli(*command, env=env)
    assert (second.returncode, second.stdout) == (7, first.stdout)
    assert "already materialized" in second.stderr and "linked" not in second.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_activate_evaluated_by_a_real_shell_gives_what_run_gives(conda_stack: Path, tmp_path: Path, shell: str) -> None:
    env = _env(tmp_path, LOCKGEN_TEST_GONE="1")
    ran = run_cli("run", _lock(conda_stack), "--", "sh", "-c", SHOW + '; echo "${LOCKGEN_TEST_GONE-gone}"', env=env)
    printed = run_cli("activate", _lock(conda_stack), "--shell", shell, env=env)
    assert printed.returncode == 0 and ran.returncode == 0, printed.stderr
    assert "cudatool: activating" not in printed.stdout  # the script's own output goes to stderr
    assert all(line.split(" ", 1)[0] in {"export", "unset", "set"} for line in printed.stdout.splitlines())
    exports = tmp_path / "exports"
    exports.write_text(printed.stdout)
    if shell == "fish":
        script = [
            'source $argv[1]; printf "%s\\n" "$PATH" "$CONDA_PREFIX" "$CUDA_HOME" unset; set -q '
            "LOCKGEN_TEST_GONE; and echo $LOCKGEN_TEST_GONE; or echo gone",
            str(exports),
        ]
    else:
        script = [f'eval "$(cat "$1")"; {SHOW}; echo "${{LOCKGEN_TEST_GONE-gone}}"', "activate", str(exports)]
    evaluated = subprocess.run([shell, "-c", *script], capture_output=True, text=True, env={**os.environ, **env})
    assert evaluated.returncode == 0, evaluated.stderr
    assert evaluated.stdout == ran.stdout


def interactive(argv: list[str], env: dict[str, str], lines: list[str], timeout_s: float = 60) -> tuple[int, str]:
    """Runs `argv` on a pseudo-terminal (its controlling terminal, as a login gives a shell); once the prompt
    marker shows, types `lines`; returns the exit status and everything the terminal showed."""
    master, slave = pty.openpty()
    child = subprocess.Popen(
        argv,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
        preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
    )
    os.close(slave)
    shown, typed, deadline = b"", False, time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            try:
                chunk = os.read(master, 65536) if ready else b""
            except OSError:  # the terminal closed: the shell ended
                break
            shown += chunk
            if not typed and b"(lockgen:" in shown:
                os.write(master, "".join(f"{line}\n" for line in lines).encode())
                typed = True
            if ready and not chunk:
                break
        return child.wait(timeout=10), shown.decode(errors="replace")
    finally:
        child.kill()
        os.close(master)


RC_FILES = {"bash": ".bashrc", "zsh": ".zshrc", "fish": ".config/fish/config.fish"}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shell_opens_in_the_environment_with_a_marked_prompt(conda_stack: Path, tmp_path: Path, shell: str) -> None:
    env = _env(
        tmp_path,
        SHELL=subprocess.run(["sh", "-c", f"command -v {shell}"], capture_output=True, text=True).stdout.strip(),
        NO_COLOR="1",
    )
    rc = tmp_path / "user" / RC_FILES[shell]  # a user rc file that moves PATH, as conda init's does
    rc.parent.mkdir(parents=True, exist_ok=True)
    rc.write_text("set -gx PATH /elsewhere/bin $PATH\n" if shell == "fish" else "export PATH=/elsewhere/bin:$PATH\n")
    status, shown = interactive(
        [sys.executable, "-m", "lockgen", "shell", _lock(conda_stack)],
        {**os.environ, **env},
        ['echo "IN:$CUDA_HOME:$PATH"', "exit 9"],
    )
    prefix = _store_prefix(tmp_path)
    assert status == 9, shown
    assert "(lockgen:cpu) " in shown
    assert f"IN:{prefix}:{prefix}/bin:" in shown  # the activation applied again after the user's rc file
    if shell == "fish":  # its runtime files went to the test's folder, not to a /tmp/fish.USER left behind
        assert [path.name for path in (tmp_path / "run").iterdir()] == ["fish_universal_variables.notifier"]


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_sent_to_lockgen_reaches_the_command(conda_stack: Path, tmp_path: Path, name: str) -> None:
    waiting = 'trap "echo caught; exit 42" TERM INT HUP; echo "ready $$"; while :; do sleep 0.1; done'
    child = subprocess.Popen(
        [sys.executable, "-m", "lockgen", "run", _lock(conda_stack), "--", "sh", "-c", waiting],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **_env(tmp_path)},
        preexec_fn=signals_as_from_a_terminal,
    )
    try:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], 120)
        assert ready, "the command did not start"
        assert child.stdout.readline() == f"ready {child.pid}\n"  # lockgen became the command: one process
        child.send_signal(getattr(signal, name))
        assert child.wait(timeout=30) == 42
        assert child.stdout.read() == "caught\n"
    finally:
        child.kill()
        child.wait()


def test_a_command_that_cannot_start_is_127_or_126(conda_stack: Path, tmp_path: Path) -> None:
    missing = run_cli("run", _lock(conda_stack), "--", "no-such-program-here", env=_env(tmp_path))
    assert missing.returncode == 127 and "error: `no-such-program-here` is not a program" in missing.stderr
    folder = run_cli("run", _lock(conda_stack), "--", str(tmp_path), env=_env(tmp_path))
    assert folder.returncode == 126 and "cannot be run" in folder.stderr and "Traceback" not in folder.stderr
    empty = run_cli("run", _lock(conda_stack), "--", "", env=_env(tmp_path))
    assert empty.returncode == 127 and "cannot name a program" in empty.stderr and "Traceback" not in empty.stderr
    bare = run_cli("run", _lock(conda_stack), env=_env(tmp_path))
    assert bare.returncode == 2 and "after --" in bare.stderr


def test_prefix_chosen_and_existing(conda_stack: Path, tmp_path: Path) -> None:
    env, chosen = _env(tmp_path), tmp_path / "mine"
    made = run_cli("run", _lock(conda_stack), "--prefix", str(chosen), "--", "sh", "-c", "echo $CONDA_PREFIX", env=env)
    assert made.returncode == 0 and made.stdout == f"{chosen}\n", made.stderr
    assert not (tmp_path / "home" / "envs").exists()  # the store's default prefix was not used
    as_is = run_cli("run", "--prefix", str(chosen), "--", "sh", "-c", "echo $CONDA_PREFIX $CUDA_HOME", env=env)
    assert as_is.returncode == 0 and as_is.stdout == f"{chosen} {chosen}\n", as_is.stderr
    nothing = run_cli("activate", "--prefix", str(tmp_path), env=env)
    assert nothing.returncode == 1 and "is not an environment" in nothing.stderr and nothing.stdout == ""


def test_a_stack_runs_the_lock_of_the_target_this_node_matches(conda_stack: Path, tmp_path: Path) -> None:
    node = tmp_path / "node.json"
    node.write_text(
        '{"platform": "linux-64", "glibc": "2.36", "driver": "580.95.05", "gpus": [{"name": "NVIDIA H100 80GB '
        'HBM3", "compute_capability": "9.0"}]}'
    )
    env = _env(tmp_path, LOCKGEN_NODE_FACTS=str(node))
    ran = run_cli("run", str(conda_stack.parent), "--", "sh", "-c", "echo $CONDA_PREFIX", env=env)
    assert ran.returncode == 0 and ran.stdout == f"{_store_prefix(tmp_path)}\n", ran.stderr
    assert "is target cpu" in ran.stderr and "the stack has no GPU target; unused: 1 GPU" in ran.stderr
    here = run_cli("activate", env=env, cwd=conda_stack.parent)  # ./stack.toml by default
    assert here.returncode == 0 and f"export CONDA_PREFIX={_store_prefix(tmp_path)}\n" in here.stdout
    unknown = run_cli("run", str(conda_stack), "--target", "h100", "--", "true", env=env)
    assert unknown.returncode == 1 and "no target `h100`" in unknown.stderr
    unresolved = tmp_path / "new" / "stack.toml"
    unresolved.parent.mkdir()
    unresolved.write_text(conda_stack.read_text())
    missing = run_cli("shell", str(unresolved), env=env)
    assert missing.returncode == 1 and f"hint: lockgen resolve {unresolved}" in missing.stderr


def test_run_and_activate_in_a_pure_pypi_venv(tmp_path: Path, index_url: str, monkeypatch) -> None:  # noqa: F811
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    path = stack(tmp_path, index_url, 'gamma = "*"')
    path.write_text(path.read_text().replace('platforms = ["linux-64", "linux-aarch64"]', 'platforms = ["linux-64"]'))
    api.resolve(path)
    lock = str(tmp_path / "locks" / "cpu.conda-lock.yml")
    env = _env(tmp_path, CONDA_PREFIX="/elsewhere/conda", PATH=f"/elsewhere/conda/bin:{os.environ['PATH']}")
    probe = "import gamma, os, sys; print(sys.prefix, os.environ['VIRTUAL_ENV'], os.environ.get('CONDA_PREFIX'))"
    ran = run_cli("run", lock, "--", "python", "-c", probe, env=env)
    prefix = _store_prefix(tmp_path)
    assert ran.returncode == 0 and ran.stdout == f"{prefix} {prefix} None\n", ran.stderr
    shown = run_cli("run", lock, "--", "sh", "-c", SHOW, env=env)
    printed = run_cli("activate", lock, "--shell", "bash", env=env)
    evaluated = subprocess.run(
        ["bash", "-c", f'eval "$1"; {SHOW}', "activate", printed.stdout],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )
    assert evaluated.stdout == shown.stdout and shown.stdout.splitlines()[0].startswith(f"{prefix}/bin:")
    assert "unset CONDA_PREFIX\n" in printed.stdout and "/elsewhere/conda/bin" not in shown.stdout
