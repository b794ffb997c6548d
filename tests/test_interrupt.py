"""Ctrl-C, as a terminal sends it (SIGINT to the whole foreground process group: lockgen and the uv it runs),
in the middle of real work: one `interrupted` line on stderr, exit 130, no traceback, and nothing left behind
(the environment's temporary folder, lockgen's temporary files, uv's `.tmp*` folders in lockgen's uv cache).
A loopback index that serves the wheel slowly, once asked to, holds the run at a known point."""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, _QuietHandler, signals_as_from_a_terminal
from tests.wheel_index import Wheel, build_index

# a wheel of some megabytes (random bytes do not compress), so uv streams it for a while before it is whole
BIG = Wheel("bulky", "1.0", files={"bulky/blob.bin": os.urandom(3 << 20).hex()})


class _Slow:
    """What the index does slowly: a path ending in `suffix`, asked for whole, is served a trickle until the
    client leaves (a range request, as lockgen reads a wheel's RECORD with, is served at once); `asked` is set
    when such a request arrives."""

    def __init__(self) -> None:
        self.suffix: str | None = None
        self.asked = threading.Event()


class _Handler(_QuietHandler):
    slow: _Slow

    def do_GET(self) -> None:
        if self.slow.suffix is None or not self.path.endswith(self.slow.suffix) or self.headers.get("Range"):
            return super().do_GET()
        self.slow.asked.set()
        body = Path(self.translate_path(self.path)).read_bytes() if not self.path.endswith("/") else b" " * (1 << 20)
        self.send_response(200)
        self.send_header("Content-Type", "text/html" if self.path.endswith("/") else "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            for start in range(0, min(len(body), 1200 << 10), 1 << 10):  # a kilobyte every tenth of a second
                self.wfile.write(body[start : start + (1 << 10)])
                self.wfile.flush()
                time.sleep(0.1)
        except OSError:  # the client went away: what the test waits for
            pass


@pytest.fixture
def index(tmp_path: Path) -> Iterator[tuple[str, _Slow]]:
    root = build_index(tmp_path / "index", [Wheel("light", "1.0"), BIG])
    slow = _Slow()
    handler = type("SlowHandler", (_Handler,), {"slow": slow})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple", slow
    server.shutdown()


def _stack(folder: Path, url: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "stack.toml"
    path.write_text(
        '[stack]\nname = "slow"\npython = "3.11"\nplatforms = ["linux-64"]\n[pypi-dependencies]\nlight = '
        f'"*"\nbulky = "*"\n[pypi-options]\nindex-url = "{url}"\n[targets.cpu]\narch = "cpu"\n'
    )
    return path


def _interrupted(
    command: list[str], slow: _Slow, env: dict[str, str], cwd: Path, group: bool = True, sent: int = signal.SIGINT
) -> subprocess.CompletedProcess[str]:
    """Runs `lockgen COMMAND` in its own process group and sends `sent` (SIGINT) once the slow request came: to
    the group, as a terminal's Ctrl-C does, or (`group=False`, `kill -INT PID`) to lockgen alone."""
    process = subprocess.Popen(
        [sys.executable, "-m", "lockgen", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
        start_new_session=True,
        preexec_fn=signals_as_from_a_terminal,
    )
    try:
        assert slow.asked.wait(timeout=180), "the run never asked for the slow file"
        time.sleep(1)  # well inside the download
        (os.killpg if group else os.kill)(process.pid, sent)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def _environment(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "tmp").mkdir()
    return {**os.environ, "NO_COLOR": "1", "LOCKGEN_HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path / "tmp")}


@pytest.mark.parametrize(
    ("group", "sent", "said", "code"),
    [
        (True, signal.SIGINT, "interrupted", 130),
        (False, signal.SIGINT, "interrupted", 130),
        (False, signal.SIGTERM, "terminated", 143),  # a scheduler's cancel, `kill`: the same clean-up
        (False, signal.SIGHUP, "hung up", 129),
    ],
    ids=["ctrl-c", "kill-int", "kill-term", "kill-hup"],
)
def test_ctrl_c_during_materialize_leaves_nothing(
    tmp_path: Path, index: tuple[str, _Slow], group: bool, sent: int, said: str, code: int
) -> None:
    url, slow = index
    env = _environment(tmp_path)
    stack = _stack(tmp_path / "stack", url)
    resolved = subprocess.run(
        [sys.executable, "-m", "lockgen", "resolve", str(stack)], capture_output=True, text=True, env=env, cwd=REPO
    )
    assert resolved.returncode == 0, resolved.stderr
    slow.suffix = BIG.filename  # from here on, the big wheel comes slowly
    envs = tmp_path / "envs"
    done = _interrupted(
        ["materialize", str(stack.parent / "locks" / "cpu.conda-lock.yml"), "--prefix", str(envs / "env")],
        slow,
        env,
        REPO,
        group,
        sent,
    )
    assert done.returncode == code, done.stderr
    assert done.stderr.splitlines()[-1] == said and done.stderr.count(said) == 1, done.stderr
    assert "Traceback" not in done.stderr and "Aborted" not in done.stderr and done.stdout == ""
    assert sorted(p.name for p in envs.iterdir()) == []  # no environment, no `.env.tmp-PID`, no `.env.lock`
    assert list((tmp_path / "tmp").iterdir()) == []  # lockgen's requirements file for uv
    cache = tmp_path / "home" / "uv-cache"
    assert [str(p.relative_to(cache)) for p in cache.rglob(".tmp*")] == []


def test_ctrl_c_during_resolve_leaves_nothing(tmp_path: Path, index: tuple[str, _Slow]) -> None:
    """Any command: here uv waits for the index's page of a project."""
    url, slow = index
    slow.suffix = "/simple/bulky/"
    stack = _stack(tmp_path / "stack", url)
    done = _interrupted(["resolve", str(stack)], slow, _environment(tmp_path), REPO)
    assert done.returncode == 130, done.stderr
    assert done.stderr.splitlines()[-1] == "interrupted" and done.stderr.count("interrupted") == 1, done.stderr
    assert "Traceback" not in done.stderr and not (stack.parent / "locks").exists()
    assert list((tmp_path / "tmp").iterdir()) == []  # lockgen's uv work folder


# `cli.main` with the fast path's answer replaced by a program that sets `code`, run as `python -m` runs lockgen
# (CPython's handling of an interrupt or an exit differs between a module run so and a `-c` string)
ENDED_BY = """
import sys
from lockgen import cli
from lockgen.cli import fast_path
program = sys.argv[1]
def answered(argv):
    scope = {}
    exec(program, scope)
    return scope["code"]
fast_path.answered = answered
sys.argv[1:] = ["status"]
cli.main()
"""
INTERRUPT_IN_THE_FLUSH = (  # a Ctrl-C once main's final flush waits, as a terminal's comes while the output waits
    "import signal\n"
    "def interrupt(number, frame):\n"
    "    if frame is not None and frame.f_code.co_name == '_flushed':\n"
    "        signal.setitimer(signal.ITIMER_REAL, 0)\n"
    "        raise KeyboardInterrupt\n"
    "signal.signal(signal.SIGALRM, interrupt)\n"
    "signal.setitimer(signal.ITIMER_REAL, 0.2, 0.2)\n"
)


def _ended_by(program: str, folder: Path, **options: Any) -> subprocess.CompletedProcess[bytes]:
    """`cli.main` run in a child as `python -m`, its answer what `program` sets `code` to, stdout buffered as in a
    pipeline (not PYTHONUNBUFFERED)."""
    (folder / "ended_by.py").write_text(ENDED_BY)
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    environment["PYTHONPATH"] = os.pathsep.join([str(folder), str(REPO)])
    return subprocess.run(
        [sys.executable, "-m", "ended_by", program], env=environment, timeout=60, cwd=folder, **options
    )


def test_an_interrupt_that_passed_through_code_run_from_a_string_still_ends_with_130(tmp_path: Path) -> None:
    """A Ctrl-C met while a dataclass or namedtuple is being made (CPython runs those from a string) is handled
    like any other: `interrupted`, exit 130, not the SIGINT death CPython gives an interrupt it saw leave such code
    (4 of 25 Ctrl-Cs of a fleet status did, before)."""
    done = _ended_by(
        "exec('raise KeyboardInterrupt')", tmp_path, capture_output=True, preexec_fn=signals_as_from_a_terminal
    )
    assert (done.returncode, done.stderr) == (130, b"interrupted\n")


@pytest.mark.parametrize(
    "program, code",
    [("print('a row'); code = 0", 1), ("print('a failing row'); code = 1", 1), ("print(); code = 2", 2)],
)
def test_a_reader_gone_before_a_short_output_ends_it_quietly(program: str, code: int, tmp_path: Path) -> None:
    """`lockgen ... | head` whose output is short enough to wait in stdout's buffer until the command returned:
    nothing on stderr and exit 1 where the command had succeeded (as click ends the typer app on a broken pipe), its
    own code where it had failed, not Python's `Exception ignored ... BrokenPipeError` and exit 120."""
    read, write = os.pipe()
    os.close(read)  # the reader has left before anything is written
    try:
        done = _ended_by(program, tmp_path, stdout=write, stderr=subprocess.PIPE)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (code, b"")


@pytest.mark.parametrize("rattler", [False, True], ids=["python-exit", "rattler-exit"])
def test_an_output_that_cannot_be_written_fails_the_command(rattler: bool, tmp_path: Path) -> None:
    """A short output to a full disk (/dev/full) is an error, said once, exit 1: also where rattler was loaded and
    the process ends by `os._exit`, which skips the final flush that would otherwise have met it (exit 0 before)."""
    program = ("import rattler\n" if rattler else "") + "print('a row'); code = 0"
    with open("/dev/full", "wb") as full:
        done = _ended_by(program, tmp_path, stdout=full, stderr=subprocess.PIPE)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.decode().splitlines()
    assert lines[0] == "error: the output could not be written (No space left on device)" and len(lines) == 2
    assert lines[1].startswith("hint: ")


@pytest.mark.parametrize("rattler", [False, True], ids=["python-exit", "rattler-exit"])
def test_an_output_and_errors_that_cannot_be_written_fail_the_command(rattler: bool, tmp_path: Path) -> None:
    """`lockgen ... > log 2>&1` on a full disk: nothing can be said, so the exit code says it (1), whichever way the
    process ends (not 120 after Python's own exit met the unwritable streams, nor 0)."""
    program = ("import rattler\n" if rattler else "") + "print('a row'); code = 0"
    with open("/dev/full", "wb") as full:
        done = _ended_by(program, tmp_path, stdout=full, stderr=full)
    assert done.returncode == 1


def test_a_command_started_without_stdout_ends_as_it_answered(tmp_path: Path) -> None:
    """`lockgen ... >&-` (a cron line, a daemon): Python has no stdout to flush; the command's own code."""
    done = _ended_by("code = 0", tmp_path, stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1))
    assert (done.returncode, done.stderr) == (0, b"")


def test_a_ctrl_c_while_the_output_waits_on_a_full_pipe_is_an_interrupt(tmp_path: Path) -> None:
    """The reader stopped reading (a pager left open) and the last output waits on a full pipe when Ctrl-C comes:
    `interrupted`, exit 130, the output not written (no traceback from the final flush, no SIGINT death)."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    with contextlib.suppress(BlockingIOError):
        while os.write(write, b"x" * 65536):  # the pipe full: the child's flush waits
            pass
    os.set_blocking(write, True)
    try:
        done = _ended_by(
            INTERRUPT_IN_THE_FLUSH + "print('the last rows'); code = 0",
            tmp_path,
            stdout=write,
            stderr=subprocess.PIPE,
            preexec_fn=signals_as_from_a_terminal,
        )
    finally:
        os.close(write)
        os.close(read)
    assert (done.returncode, done.stderr) == (130, b"interrupted\n")
