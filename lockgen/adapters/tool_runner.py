"""The one way lockgen runs another program to completion (skopeo, uv, nvidia-smi, an environment's
interpreter): bounded by a timeout, output captured, and a failure turned into `ToolMissingError` or
`ToolFailedError` carrying the tool, its exit code and its last stderr line (credentials scrubbed) as
text. The verification kernel, which streams its progress, has its own launcher (`kernel`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence

from lockgen.core.credentials import scrub_text
from lockgen.errors import ToolFailedError, ToolMissingError


def find_tool(name: str, hint: str) -> str:
    """The path of program `name` on PATH, or `ToolMissingError` with `hint`."""
    found = shutil.which(name)
    if found is None:
        raise ToolMissingError(name, hint)
    return found


def last_line(text: str) -> str:
    """The last non-empty line of a tool's output, scrubbed and cut to 300 characters."""
    lines = [line.strip() for line in (text or "").strip().splitlines() if line.strip()]
    return scrub_text(lines[-1])[:300] if lines else "no message"


HEARTBEAT_S = 10.0


def run_tool(
    command: Sequence[str],
    what: str,
    hint: str = "",
    timeout_s: float = 600,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    missing_hint: str = "",
    heartbeat: Callable[[float], None] | None = None,
    meanwhile: Callable[[], object] | None = None,
    heartbeat_s: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """Runs `command` and returns its result; with `check`, a non-zero exit raises `ToolFailedError`
    (`what` names the activity, e.g. "pushing to docker://…"). A program that is not there raises
    `ToolMissingError`; one that outlives `timeout_s` is killed and reported as failed. `heartbeat`
    hears the seconds elapsed every `heartbeat_s` (default `HEARTBEAT_S`) while the program runs (progress on long
    work).
    `meanwhile` is called once the program has started, before waiting for it (work that does not depend on
    it); if it raises, the program is killed and the error goes on."""
    tool = os.path.basename(command[0])
    started = time.monotonic()
    try:
        child = subprocess.Popen(
            list(command),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(env) if env is not None else None,
        )
    except FileNotFoundError:
        raise ToolMissingError(command[0], missing_hint or f"install {tool}, or put it on PATH") from None
    except OSError as exc:  # a folder, a file without the x bit, a binary for another machine
        raise ToolFailedError(
            what,
            tool,
            126,
            f"cannot run `{command[0]}`: {exc.strerror or exc}",
            missing_hint or "pass a program that can run here",
        ) from None
    with child:  # an interrupt or an error here kills the child, as subprocess.run does
        if meanwhile is not None:
            try:
                meanwhile()
            except BaseException:
                _kill(child)
                raise
        every = HEARTBEAT_S if heartbeat_s is None else heartbeat_s  # the module's, read at the call
        stdout, stderr = _wait(child, what, tool, hint, started, timeout_s, heartbeat, every)
    done = subprocess.CompletedProcess(list(command), child.returncode, stdout, stderr)
    if check and done.returncode != 0:
        raise ToolFailedError(what, tool, done.returncode, last_line(done.stderr or done.stdout), hint)
    return done


def _kill(child: subprocess.Popen[str]) -> None:
    child.kill()
    child.communicate()


def _wait(
    child: subprocess.Popen[str],
    what: str,
    tool: str,
    hint: str,
    started: float,
    timeout_s: float,
    heartbeat: Callable[[float], None] | None,
    heartbeat_s: float,
) -> tuple[str, str]:
    try:
        while True:  # bounded: each wait is at most heartbeat_s, and the whole run at most timeout_s
            left = timeout_s - (time.monotonic() - started)
            try:
                return child.communicate(timeout=max(0.01, min(heartbeat_s, left)))
            except subprocess.TimeoutExpired:
                if time.monotonic() - started >= timeout_s:
                    raise ToolFailedError(what, tool, -9, f"did not finish within {timeout_s:.0f} s", hint) from None
                if heartbeat is not None:
                    heartbeat(time.monotonic() - started)
    except BaseException:
        _kill(child)
        raise
