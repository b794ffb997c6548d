"""`lockgen verify`'s kernel started with lockgen (issue 48 item 4): the fast path reads the command line and starts
the kernel before lockgen's own imports; the run takes it only when it is exactly the kernel it would start; a
command lockgen refuses leaves no process and no folder behind; a kernel whose host went away before giving it
its expectations measures nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lockgen.adapters.node import kernel
from lockgen.cli import fast_path
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parent.parent

# a stand-in interpreter for `PY -m verify ...`: notes its pid and arguments, starts a grandchild in its group,
# then writes a document of what stdin gave it to --out (a kernel that was given its expectations)
STAND_IN = """#!{python}
import json, os, subprocess, sys, time
notes = os.environ["STAND_IN_NOTES"]
with open(os.path.join(notes, f"started-{{os.getpid()}}"), "w") as stream:
    json.dump({{"argv": sys.argv[1:], "grandchild": subprocess.Popen(["sleep", "300"]).pid}}, stream)
given = sys.stdin.read()
out = sys.argv[sys.argv.index("--out") + 1]
with open(out, "w") as stream:
    json.dump({{"given": given, "pid": os.getpid()}}, stream)
"""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(interpreter, notes folder): the stand-in kernel's interpreter, and where each start notes itself."""
    notes = tmp_path / "notes"
    notes.mkdir()
    interpreter = tmp_path / "python"
    interpreter.write_text(STAND_IN.format(python=sys.executable))
    interpreter.chmod(0o755)
    monkeypatch.setenv("STAND_IN_NOTES", str(notes))
    return interpreter, notes


def _starts(notes: Path) -> dict[int, dict]:
    """The stand-in kernels started, by pid, once each has noted itself (a start notes itself in milliseconds)."""
    found: dict[int, dict] = {}
    for _ in range(200):
        found = {}
        for path in notes.glob("started-*"):
            text = path.read_text()
            if text.endswith("}"):
                found[int(path.name.removeprefix("started-"))] = json.loads(text)
        if found:
            return found
        time.sleep(0.05)
    return found


def _gone(pid: int) -> bool:
    """Whether no process `pid` is left but a zombie, within 10 s: a SIGKILL sent to a group is delivered
    asynchronously, so on a loaded machine a killed process can still be listed as running for a moment."""
    status = Path(f"/proc/{pid}/status")
    for _ in range(200):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            if "State:\tZ" in status.read_text():
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_the_run_takes_the_kernel_started_for_it(stand_in: tuple[Path, Path]) -> None:
    interpreter, notes = stand_in
    kernel.start_early(str(interpreter), "cpu", True, False, False)
    said: list[str] = []
    document, raw = kernel.run_single(str(interpreter), "cpu", {"gpu_count": 0}, True, False, False, 60, said.append)
    (pid, start), *others = _starts(notes).items()
    assert not others and document["pid"] == pid and json.loads(str(document["given"])) == {"gpu_count": 0}
    assert json.loads(raw) == document  # the bytes the certificate hashes are the document read
    assert "the kernel started with lockgen: handing it its expectations" in said
    assert _gone(start["grandchild"])  # the kernel's group went with it
    out = Path(start["argv"][start["argv"].index("--out") + 1])
    assert not out.parent.exists()  # its folder removed once its document was read


def test_a_kernel_started_for_another_plan_is_killed_and_a_fresh_one_run(stand_in: tuple[Path, Path]) -> None:
    interpreter, notes = stand_in
    kernel.start_early(str(interpreter), "cpu", True, False, False)
    early = _starts(notes)
    said: list[str] = []
    document, _ = kernel.run_single(str(interpreter), "cpu", {}, False, False, False, 60, said.append)  # not --quick
    (early_pid, early_start), *_ = early.items()
    assert document["pid"] != early_pid and _gone(early_pid) and _gone(early_start["grandchild"])
    assert "--quick" not in _starts(notes)[int(str(document["pid"]))]["argv"]
    assert not any("started with lockgen" in line for line in said)


def test_an_abandoned_kernel_leaves_nothing_behind(stand_in: tuple[Path, Path]) -> None:
    interpreter, notes = stand_in
    kernel.start_early(str(interpreter), "sm90", False, False, False)
    (pid, start), *_ = _starts(notes).items()
    kernel.abandon_early()
    out = Path(start["argv"][start["argv"].index("--out") + 1])
    assert _gone(pid) and _gone(start["grandchild"]) and not out.parent.exists()
    kernel.abandon_early()  # none left: nothing to do


def test_a_refused_verify_kills_the_kernel_it_started(stand_in: tuple[Path, Path], tmp_path: Path) -> None:
    """The fast path starts the kernel; lockgen then refuses the expectations: the same error and exit code as
    ever, and the kernel, its group and its folder are gone when lockgen exits."""
    interpreter, notes = stand_in
    bad = tmp_path / "expect.json"
    bad.write_text("[1, 2]")
    result = run_cli(
        "verify", "--arch", "cpu", "--quick", "--python", str(interpreter), "--expect", str(bad), "--out", "c.json"
    )
    assert result.returncode == 1 and "are not a JSON object" in result.stderr and "Traceback" not in result.stderr
    started = _starts(notes)
    assert len(started) == 1  # the fast path started it
    ((pid, start),) = started.items()
    assert start["argv"][:5] == ["-m", "verify", "--arch", "cpu", "--expect"] and "--quick" in start["argv"]
    out = Path(start["argv"][start["argv"].index("--out") + 1])
    assert _gone(pid) and _gone(start["grandchild"]) and not out.parent.exists()


@pytest.mark.parametrize(
    "words",
    [
        ["--arch", "cpu", "--lock", "x.lock"],  # the environment is proven first: nothing may run in it meanwhile
        ["--arch", "cpu", "--image", "oci:x"],
        ["--quick"],  # no arch: the typer command says so
        ["--arch", "cpu", "--python", "a", "--prefix", "b"],
        ["--arch", "cpu", "--bogus"],
        ["--arch=cpu"],
        ["--arch", "cpu", "--quick", "--quick"],
        ["--arch", "cpu", "extra"],
        ["--arch", "cpu", "--help"],
        # refused whatever the inputs say (review of verifyfast: each started the environment's interpreter)
        ["--arch", "cpu", "--timeout", "abc"],
        ["--arch", "cpu", "--gpus", "two"],
        ["--arch", "cpu", "--nodes", "1.5"],
        ["--arch", "cpu", "--emit", "nfd=features.txt"],  # node features need --lock
        ["--arch", "cpu", "--emit", "prom=p.prom, nfd=f.txt"],
        # no time limit: the typer command refuses it (exit 2); a negative one is a value this path never reads
        ["--arch", "cpu", "--timeout", "0"],
        ["--arch", "cpu", "--timeout", "0.0"],
        ["--arch", "cpu", "--timeout", "nan"],
        ["--arch", "cpu", "--timeout", "inf"],
        ["--arch", "cpu", "--timeout", "1e300"],
    ],
)
def test_only_the_plain_forms_start_a_kernel(words: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[tuple] = []
    monkeypatch.setattr(kernel, "start_early", lambda *args: started.append(args))
    assert fast_path.answered(["verify", *words]) is None and not started


@pytest.mark.parametrize("timeout", ["0", "-5", "nan", "inf"])
def test_a_timeout_that_is_no_time_limit_is_a_usage_error(
    stand_in: tuple[Path, Path], tmp_path: Path, timeout: str
) -> None:
    """`--timeout 0` and `-5` started the kernel, which was then said not to finish "within -5 s"; `inf` was an
    OverflowError (exit 3). Now a usage error, the kernel never started (the fast path agrees with the command)."""
    interpreter, notes = stand_in
    out = tmp_path / "c.json"
    result = run_cli("verify", "--arch", "cpu", "--python", str(interpreter), "--timeout", timeout, "--out", str(out))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith(f"error: --timeout {timeout} is not a time limit\nhint: pass --timeout SECONDS")
    assert list(notes.iterdir()) == [] and not out.exists()


def _one_error(stderr: str) -> str:
    """The one `error:` line of a refusal with its hint and no traceback, naming no temporary file."""
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "\nhint: " in stderr and "Traceback" not in stderr, stderr
    assert ".tmp" not in stderr and "verifying" not in stderr, stderr
    return errors[0]


@pytest.mark.parametrize("where", ["fifo", "under a file", "folder", "emit"])
def test_a_destination_verify_cannot_write_stops_the_kernel_it_started(
    stand_in: tuple[Path, Path], tmp_path: Path, where: str
) -> None:
    """`--out` a FIFO (replaced by a regular file, exit 0), a path under a file or an existing folder, or an `--emit`
    file under a file: refused before the run (before, after it), naming the path given; the kernel the fast path
    started, its group and its folder are gone; nothing is written and the FIFO is left a FIFO."""
    interpreter, notes = stand_in
    fifo, file, out = tmp_path / "fifo", tmp_path / "file", tmp_path / "c.json"
    os.mkfifo(fifo)
    file.write_text("")
    given, emit = {
        "fifo": (fifo, []),
        "under a file": (file / "c.json", []),
        "folder": (notes, []),
        "emit": (out, ["--emit", f"prom={tmp_path / 'p.prom'},junit={file / 'r.xml'}"]),
    }[where]
    result = run_cli("verify", "--arch", "cpu", "--quick", "--python", str(interpreter), "--out", str(given), *emit)
    assert result.returncode == 1, result.stderr
    expected = {
        "fifo": f"error: `{fifo}` is a FIFO, not a file: --out {fifo} cannot replace it",
        "under a file": f"error: `{file}` is not a folder: --out {given} cannot be written under it",
        "folder": f"error: `{notes}` is a folder: --out {notes} cannot replace it",
        "emit": f"error: `{file}` is not a folder: --emit junit={file / 'r.xml'} cannot be written under it",
    }
    assert _one_error(result.stderr) == expected[where]
    ((pid, start),) = _starts(notes).items()  # the fast path started it
    kept = Path(start["argv"][start["argv"].index("--out") + 1])
    assert _gone(pid) and _gone(start["grandchild"]) and not kept.parent.exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["fifo", "file", "notes", "python"]
    assert fifo.is_fifo() and file.read_text() == ""


def test_a_kernel_abandoned_while_it_writes_ends_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel abandoned while it prints (warnings at the moment lockgen refuses): its stderr pump is let finish
    before the stream is closed, so no thread dies with `I/O operation on closed file` on lockgen's stderr (review
    of verifyfast: 3 of 40 refused runs printed that traceback)."""
    import threading

    noisy = tmp_path / "python"
    noisy.write_text(
        f"#!{sys.executable}\nimport sys\nwhile True:\n    sys.stderr.write('ok   noise ' + 'x' * 200 + '\\n')\n"
    )
    noisy.chmod(0o755)
    died: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda hook: died.append(hook.exc_value))
    for _ in range(8):
        kernel.start_early(str(noisy), "cpu", True, False, False)
        time.sleep(0.05)
        started = kernel._early
        assert started is not None
        kernel.abandon_early()
        assert started.reader is None or not started.reader.is_alive()
        assert _gone(started.process.pid)
    assert died == []


def test_the_plain_forms_start_the_kernel_the_run_would(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    started: list[tuple] = []
    monkeypatch.setattr(kernel, "start_early", lambda *args: started.append(args))
    monkeypatch.chdir(tmp_path)
    line = ["--arch", "SM_90", "--prefix", "env", "--key", "k", "--out", "c.json", "--compile", "--json", "--emit"]
    assert fast_path.answered(["verify", *line, "prom=p.prom"]) is None
    assert started == [(str(tmp_path / "env" / "bin" / "python"), "sm90", False, True, False)]
    assert fast_path.answered(["-v", "verify", "--arch", "cpu", "--quick", "--allow-ptx", "-v"]) is None
    assert started[1] == (sys.executable, "cpu", True, False, True)


@pytest.mark.slow
def test_a_kernel_whose_host_went_away_measures_nothing(tmp_path: Path) -> None:
    """The real kernel, its stdin closed empty (its host died before giving the expectations): exit 4, no document,
    where it used to run every check with no expectations at all."""
    out = tmp_path / "single.json"
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "verify", "--arch", "cpu", "--quick", "--expect", "-", "--out", str(out)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )
    assert result.returncode == 4 and not out.exists() and not result.stdout
    assert "the host closed stdin without giving the expectations" in result.stderr


@pytest.mark.slow
def test_the_kernel_ends_without_the_interpreters_teardown(tmp_path: Path) -> None:
    """Once its document is written and flushed, the kernel ends at once (`os._exit`): the teardown of an
    interpreter with torch loaded took 1.6-1.9 s on a CPU host and about 2 s on a lent H100, all of it waited for
    by lockgen. An exit hook (a `sitecustomize` on its path) never runs; stdout and the file hold the whole
    document."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    torn_down = tmp_path / "torn-down"
    (hooks / "sitecustomize.py").write_text(
        f"import atexit\natexit.register(lambda: open({str(torn_down)!r}, 'w').close())\n"
    )
    out = tmp_path / "single.json"
    environment = {**os.environ, "PYTHONPATH": f"{hooks}{os.pathsep}{REPO}"}
    result = subprocess.run(
        [sys.executable, "-m", "verify", "--arch", "cpu", "--quick", "--expect", "-", "--out", str(out)],
        input="{}",
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout) == json.loads(out.read_text()) and json.loads(result.stdout)["passed"]
    assert not torn_down.exists()
    probe = subprocess.run([sys.executable, "-c", "pass"], env=environment, timeout=60)  # the hook works elsewhere
    assert probe.returncode == 0 and torn_down.exists()


def test_the_fast_path_types_verify_s_numbers_as_the_typer_command_does() -> None:
    """`fast_path.VERIFY_NUMBERS` restates the types typer reads from `verify`'s annotations (the fast path imports
    no typer): every number option of the command is there, typed alike, so a value the one refuses the other does."""
    import inspect
    import typing

    from lockgen.cli import verify_cmds

    command = inspect.unwrap(verify_cmds.verify)
    hints = typing.get_type_hints(command)
    numbers = {
        name: kind
        for parameter in inspect.signature(command).parameters.values()
        for kind in [t for t in (hints[parameter.name], *typing.get_args(hints[parameter.name])) if t in (int, float)]
        for name in parameter.default.param_decls
    }
    assert numbers == fast_path.VERIFY_NUMBERS
