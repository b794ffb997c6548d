"""What to say of a verification kernel that died instead of writing its document: the signal (or exit code),
the phase it was in (the kernel's last `@phase NAME` line on stderr), the error line worth reading (not the
C++ stack frames an abort prints last, nor the kernel's own check lines), and the settings of its environment
known to break that phase; and of one killed at `--timeout`: the phase it was in, and where to look.

Pure: the launcher (`adapters/node/kernel.py`) gives the exit code, the kernel's last stderr lines and the
environment the kernel ran with.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Mapping, Sequence

PHASE_MARK = "@phase "  # verify.results.PHASE_MARK: the kernel's line before each phase
CHECK_MARKS = ("ok  ", "FAIL")  # how the kernel's check lines begin (verify.results.Results.check)

# (variable, value that breaks; None: any non-empty value) -> (the phase it breaks: the first part of the
# kernel's phase names, and why). Each entry was seen on a lent GPU.
BREAKING_SETTINGS: dict[tuple[str, str | None], tuple[str, str]] = {
    ("PYTORCH_NO_CUDA_MEMORY_CACHING", "1"): (
        "cuda_graphs",
        "CUDA graph capture needs PyTorch's caching allocator, which this turns off (on the lent H100 a capture "
        "with it set failed: 'operation not permitted when stream is capturing', and the kernel died by SIGABRT)",
    ),
}

_FRAME = re.compile(r"^\s*(frame #\d+:|Exception raised from |\[?\s*\d+\]|#\d+\s)")
_NOISE = (
    "Traceback",
    "Search for `",
    "CUDA kernel errors might be",
    "For debugging consider",
    "Compile with `TORCH_USE_CUDA_DSA`",
)


def last_phase(lines: Sequence[str]) -> str | None:
    """The phase the kernel announced last, from its stderr lines."""
    for line in reversed(lines):
        if line.startswith(PHASE_MARK):
            return line[len(PHASE_MARK) :].strip() or None
    return None


def how_it_ended(returncode: int) -> str:
    """`died by SIGABRT` for a signal (Popen's negative code), `exit N` otherwise."""
    if returncode < 0:
        try:
            return f"died by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"died by signal {-returncode}"
    return f"exit {returncode}"


def error_line(lines: Sequence[str]) -> str:
    """The line that says what went wrong: an abort's `what():` message, else the last line that is not a
    stack frame, a phase mark, a check line (the last check passed or failed before the death: not its cause),
    a separator or PyTorch's boilerplate; empty when there is none."""
    for index, line in enumerate(lines):
        if "what():" in line:
            message = line.split("what():", 1)[1].strip()
            following = lines[index + 1].strip() if index + 1 < len(lines) else ""
            return message or following
    for line in reversed(lines):
        text = line.strip()
        if (
            not text
            or set(text) <= set("=-*")
            or text.startswith(PHASE_MARK)
            or line.startswith(CHECK_MARKS)
            or _FRAME.match(line)
            or text.startswith(_NOISE)
        ):
            continue
        return text
    return ""


def breaking_settings(phase: str | None, environ: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """(settings set that are known to break `phase`, settings set that are known to break another phase), each
    `NAME=VALUE: why (breaks PHASE)`."""
    here: list[str] = []
    elsewhere: list[str] = []
    for (name, value), (broken, why) in BREAKING_SETTINGS.items():
        given = environ.get(name, "").strip()
        if not given or (value is not None and given != value):
            continue
        said = f"{name}={given}: {why} (breaks {broken})"
        (here if phase is not None and phase.split("/")[0] == broken else elsewhere).append(said)
    return here, elsewhere


def describe_death(
    what: str, returncode: int, lines: Sequence[str], environ: Mapping[str, str]
) -> tuple[str, list[str]]:
    """The one-line error for a kernel that ended with `returncode` and the settings to unset (for the hint): those
    known to break the phase it died in. One known to break another phase is said in the error, as set, but not
    blamed: unsetting it would not have saved this run."""
    phase = last_phase(lines)
    where = f" in phase {phase}" if phase else " before its first phase"
    message = f"{what} {how_it_ended(returncode)}{where}"
    line = error_line(lines)
    if line:
        message += f": {line[:300]}"
    here, elsewhere = breaking_settings(phase, environ)
    if here:
        message += f"; set in its environment: {'; '.join(here)}"
    elif elsewhere:
        message += f"; also set in its environment: {'; '.join(elsewhere)}"
    return message, [said.split("=", 1)[0] for said in here]


def limit_text(seconds: float) -> str:
    """A time limit as a person reads it: under 10 s with its decimals (`--timeout 0.4` is `0.4 s`, never `0 s`),
    whole seconds above (`600 s`)."""
    return f"{seconds:.3g} s" if seconds < 10 else f"{seconds:.0f} s"


def describe_timeout(what: str, timeout_s: float, lines: Sequence[str], ranks: bool, cpu: bool) -> tuple[str, str]:
    """The error and hint for a kernel killed at `timeout_s`: the phase it was in when its lines tell it, a hung
    rank or collective where it ran `ranks`, and where to look: the GPUs and NCCL, or on a CPU the machine's
    speed (a CPU run is as fast as the cores it is given)."""
    phase = last_phase(lines)
    message = (
        f"{what} did not finish within {limit_text(timeout_s)}"
        + (f" in phase {phase}" if phase else "")
        + (" (a hung rank or collective?)" if ranks else "")
        + "; every process it started was killed"
    )
    if cpu:
        return message, (
            "raise --timeout if this machine is slow or busy (other work on its cores, OMP_NUM_THREADS set low)"
        )
    return message, "check `nvidia-smi`, CUDA_VISIBLE_DEVICES and NCCL settings; raise --timeout if the machine is slow"
