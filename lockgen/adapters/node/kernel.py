"""Runs the verification kernel inside the environment under test: `PY -m verify`, and for several GPUs
`PY -m torch.distributed.run -m verify.dist` (PyTorch's own launcher; several nodes meet through its
c10d rendezvous).

The kernel's stderr is streamed as progress; its JSON comes back through a file. The single kernel can be
started with lockgen itself (`start_early`), before lockgen has imported its models, probed the GPUs or read its
inputs: the kernel imports torch meanwhile and waits for its expectations on stdin; `run_single` takes it when
it is exactly the command and environment it would start (else it is killed and a fresh one started), and
`abandon_early` kills one no run took (lockgen refused the command), its whole group, and removes its folder. A
kernel whose host went away before giving it expectations reads the end of its stdin and exits, having
measured nothing. Each run has a timeout: on expiry, or when a rank dies, the whole process group is killed, so
no rank is left behind. A kernel that dies is named with the phase it was in (its last `@phase` line) and the
settings of its environment known to break that phase (`core.certificate.kernel_deaths`).
NVLink multicast stays off in every launched process (NCCL_NVLS_ENABLE=0 and its two siblings).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from typing import TYPE_CHECKING

from lockgen.core.certificate.kernel_deaths import (
    CHECK_MARKS,
    PHASE_MARK,
    describe_death,
    describe_timeout,
    limit_text,
)
from lockgen.errors import KernelError

if TYPE_CHECKING:  # the models import pydantic: 75 ms that `start_early` runs before
    from lockgen.model.json_values import JsonObject

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def kernel_root() -> Path:
    """The folder holding the `verify` package, found without importing it (it imports torch)."""
    spec = importlib.util.find_spec("verify")
    if spec is None or spec.origin is None:
        raise KernelError("the `verify` kernel package is not installed with lockgen", "reinstall lockgen")
    return Path(spec.origin).resolve().parent.parent


def by_hand(python: str, *args: str) -> str:
    """The command that runs `python ARGS` (the kernel) from any folder: the kernel is found where lockgen
    installed it, which the environment under test knows nothing of."""
    return f"PYTHONPATH={shlex.quote(str(kernel_root()))} {shlex.join([python, *args])}"


def _environment(extra: dict[str, str]) -> dict[str, str]:
    env = {**os.environ, **NO_MULTICAST, **extra, "PYTHONUNBUFFERED": "1"}
    root = str(kernel_root())
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


@dataclass
class _Started:
    """A kernel process, its stderr read on a thread from its start: the last lines (for errors), its last
    `@phase` line, and its check lines, held until a run gives them a `progress` to go to."""

    command: list[str]
    environment: dict[str, str]
    process: subprocess.Popen[str]
    folder: tempfile.TemporaryDirectory[str] | None = None  # the single kernel's: its document is written there
    tail: list[str] = field(default_factory=list)
    phase: list[str] = field(default_factory=list)  # kept apart from the tail, which an abort's frames fill
    held: list[str] = field(default_factory=list)
    progress: Callable[[str], None] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    reader: threading.Thread | None = None

    def pump(self) -> None:  # forwards the kernel's check lines as they come, keeps the last lines for errors
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            line = raw.rstrip("\n")
            self.tail.append(line)
            del self.tail[:-200]  # an abort prints dozens of stack frames after the line that says what went wrong
            if line.startswith(PHASE_MARK):
                self.phase[:] = [line]
            elif line.startswith(CHECK_MARKS):
                with self.lock:
                    if self.progress is None:
                        self.held.append(line)
                    else:
                        self.progress(f"  {line}")

    def forward(self, progress: Callable[[str], None]) -> None:
        """From now on the check lines go to `progress`, those read before first."""
        with self.lock:
            for line in self.held:
                progress(f"  {line}")
            self.held.clear()
            self.progress = progress


def _start(command: Sequence[str], what: str, extra_env: dict[str, str], stdin: bool) -> _Started:
    """Starts the kernel `command` in its own session (its group is killed as one), its stderr read at once;
    `stdin`: a pipe it reads its expectations from."""
    environment = _environment(extra_env)
    try:
        process = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=environment,
            start_new_session=True,
        )
    except FileNotFoundError:
        raise KernelError(
            f"{what}: interpreter `{command[0]}` not found", "pass --python PATH of the environment's python"
        ) from None
    started = _Started(list(command), environment, process)
    started.reader = threading.Thread(target=started.pump, daemon=True)
    started.reader.start()
    return started


def _run(
    command: Sequence[str],
    timeout_s: float,
    progress: Callable[[str], None],
    what: str,
    extra_env: dict[str, str],
    shown: Sequence[str],
    given: str | None = None,
    *,
    ranks: bool = False,
    cpu: bool = False,
) -> None:
    """Runs the kernel `command`; `shown`: its arguments as a failure's hint gives them, to run it by hand;
    `given`: text for its stdin (the expectations, which it reads once torch is imported); `ranks`: it runs
    ranks (torchrun), `cpu`: on CPUs, as a timeout names them."""
    started = _start(command, what, extra_env, given is not None)
    _finish(started, timeout_s, progress, what, shown, given, ranks=ranks, cpu=cpu)


def _finish(
    started: _Started,
    timeout_s: float,
    progress: Callable[[str], None],
    what: str,
    shown: Sequence[str],
    given: str | None,
    *,
    ranks: bool,
    cpu: bool,
) -> None:
    """Gives the started kernel its stdin text, waits for it (at most `timeout_s` from now) and names its death,
    or the phase it hung in (`ranks`, `cpu`: what it ran, for the hint)."""
    process = started.process
    started.forward(progress)
    if given is not None:
        assert process.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # a kernel that ended at once is reported below
            process.stdin.write(given)
            process.stdin.close()
    if not _ended_within(process, timeout_s):
        _kill_group(process)
        late = KernelError(*describe_timeout(what, timeout_s, started.phase, ranks, cpu))
        late.timed_out = True
        raise late from None
    if started.reader is not None:
        started.reader.join(timeout=5)
    _kill_group(process)  # ranks a failed launcher left behind
    if process.returncode != 0:
        tail = started.tail
        text = "\n".join(tail)
        exits = re.findall(r"rank\s*:\s*(\d+).*?\n\s*exitcode\s*:\s*(-?\d+)", text)
        hint = f"re-run with -v, or run the kernel by hand: {by_hand(started.command[0], *shown)}"
        if exits:
            last = "; ".join(f"rank {rank} exited with code {code}" for rank, code in exits)
            message = f"{what} failed (exit {process.returncode}): {last[:300]}"
        else:
            message, breakers = describe_death(what, process.returncode, [*started.phase, *tail], started.environment)
            if breakers:
                hint = f"unset {' and '.join(breakers)} and verify again"
        error = KernelError(message, hint)
        error.rendezvous_timed_out = any("RendezvousTimeoutError" in line for line in tail)
        raise error


def _ended_within(process: subprocess.Popen[str], timeout_s: float) -> bool:
    """Whether `process` ended within `timeout_s`, known as it ends: `Popen.wait(timeout=...)` looks every 50 ms
    (sleeping between looks), which each verify paid after its kernel's end; here a thread blocks in `waitpid`."""
    waiter = threading.Thread(target=process.wait, name="kernel-wait", daemon=True)
    waiter.start()
    waiter.join(timeout_s)
    return not waiter.is_alive()


def _kill_group(process: subprocess.Popen[str]) -> None:
    """SIGTERM the whole process group, give the launcher 5 s, then SIGKILL whatever of the group is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            return  # nothing of the group is left
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)


def _single_command(python: str, arch: str, out: Path, quick: bool, compiled: bool, allow_ptx: bool) -> list[str]:
    """The single kernel's command line: its expectations on stdin, its document written to `out`."""
    command = [python, "-m", "verify", "--arch", arch, "--expect", "-", "--out", str(out)]
    return command + ["--quick"] * quick + ["--compile"] * compiled + ["--allow-ptx"] * allow_ptx


def _start_single(python: str, arch: str, quick: bool, compiled: bool, allow_ptx: bool) -> _Started:
    """Starts the single kernel with a folder of its own for its document (removed when it cannot start)."""
    folder = tempfile.TemporaryDirectory(prefix="lockgen-verify-")
    command = _single_command(python, arch, Path(folder.name) / "single.json", quick, compiled, allow_ptx)
    try:
        started = _start(command, "the verification kernel", {}, stdin=True)
    except BaseException:
        folder.cleanup()
        raise
    started.folder = folder
    return started


_early: _Started | None = None  # the single kernel started with lockgen, until a run takes it or it is abandoned


def start_early(python: str, arch: str, quick: bool, compiled: bool, allow_ptx: bool) -> None:
    """Starts the single kernel now, with the command `run_single` will run for these values: it imports torch
    while lockgen reads its inputs and probes the GPUs, then waits on stdin for its expectations. An interpreter
    that cannot be started is left to the run to name."""
    global _early
    abandon_early()
    with contextlib.suppress(KernelError, OSError):
        _early = _start_single(python, arch, quick, compiled, allow_ptx)


def abandon_early() -> None:
    """Kills the kernel `start_early` started, when no run took it (lockgen refused the command before), and
    removes its folder; nothing when there is none."""
    global _early
    started, _early = _early, None
    if started is None:
        return
    if started.process.stdin is not None:  # first: a kernel waiting for its plan ends on an empty stdin (exit 4)
        with contextlib.suppress(OSError):
            started.process.stdin.close()
    _kill_group(started.process)
    with contextlib.suppress(subprocess.TimeoutExpired):  # bounded: one lockgen may not signal ends by its stdin
        started.process.wait(timeout=10)
    if started.reader is not None:  # the stderr pump ends at the pipe's end: joined before its stream is closed
        started.reader.join(timeout=5)
    if started.process.stderr is not None and (started.reader is None or not started.reader.is_alive()):
        with contextlib.suppress(OSError):
            started.process.stderr.close()
    if started.folder is not None:
        started.folder.cleanup()


def _take_early(python: str, arch: str, quick: bool, compiled: bool, allow_ptx: bool) -> _Started | None:
    """The early kernel, when it runs exactly the command and environment a fresh start would; any other is
    killed (its plan was read otherwise than the run's: it must not certify)."""
    global _early
    started = _early
    if started is None or started.folder is None:
        return None
    out = Path(started.folder.name) / "single.json"
    if started.command != _single_command(
        python, arch, out, quick, compiled, allow_ptx
    ) or started.environment != _environment({}):
        abandon_early()
        return None
    _early = None
    return started


def run_single(
    python: str,
    arch: str,
    expected: JsonObject,
    quick: bool,
    compiled: bool,
    allow_ptx: bool,
    timeout_s: float,
    progress: Callable[[str], None],
) -> tuple[JsonObject, bytes]:
    """The single-process kernel, the one started with lockgen when it is this run's; returns its document and
    the exact bytes it wrote."""
    started = _take_early(python, arch, quick, compiled, allow_ptx)
    if started is not None:
        progress("the kernel started with lockgen: handing it its expectations")
    else:
        started = _start_single(python, arch, quick, compiled, allow_ptx)
    assert started.folder is not None
    with started.folder as folder_name:
        out_path = Path(folder_name) / "single.json"
        shown = ["-m", "verify", "--arch", arch, *started.command[started.command.index("--out") + 2 :]]
        try:
            _finish(
                started,
                timeout_s,
                progress,
                "the verification kernel",
                shown,
                json.dumps(expected),
                ranks=False,
                cpu=arch == "cpu",
            )
        finally:
            _kill_group(started.process)  # an interrupt while it runs: nothing of it is left behind
        return _read(out_path, "the verification kernel")


@dataclass(frozen=True)
class Rendezvous:
    """Several nodes: torchrun's c10d rendezvous at `endpoint` (HOST[:PORT]), which every node names alike;
    the process on the host that `endpoint` names keeps the store."""

    nodes: int
    endpoint: str
    run_id: str


def run_distributed(
    python: str,
    gpus: int,
    sizes_mib: str,
    timeout_s: float,
    progress: Callable[[str], None],
    extra_env: dict[str, str] | None = None,
    rendezvous: Rendezvous | None = None,
    cpu: bool = False,
) -> tuple[JsonObject, bytes]:
    """The multi-GPU kernel under torchrun, one process per GPU (gloo processes on CPUs, `cpu`), on this host
    alone or, with `rendezvous`, as one node of several."""
    with tempfile.TemporaryDirectory(prefix="lockgen-verify-") as folder:
        out_path = Path(folder) / "dist.json"
        join_timeout_s = max(10, int(timeout_s * 0.8))  # torchrun gives up on missing nodes before lockgen kills it
        launch = (
            ["--standalone"]
            if rendezvous is None
            else [
                f"--nnodes={rendezvous.nodes}",
                "--rdzv_backend=c10d",
                f"--rdzv_endpoint={rendezvous.endpoint}",
                f"--rdzv_id={rendezvous.run_id}",
                f"--rdzv_conf=join_timeout={join_timeout_s}",
            ]
        )
        joined = Path(folder) / "joined"  # made by the node's first rank once every rank has met
        command = [
            python,
            "-m",
            "torch.distributed.run",
            *launch,
            f"--nproc_per_node={gpus}",
            f"--log_dir={Path(folder) / 'torchrun'}",  # else a `torchelastic_*` folder is left; torch 1.x: no --log-dir
            "-m",
            "verify.dist",
            "--out",
            str(out_path),
            "--joined",
            str(joined),
            "--sizes-mib",
            sizes_mib,
            "--timeout-s",
            str(max(30, int(timeout_s * 0.8))),
        ]
        what = f"the {gpus}-process distributed kernel" + (f" (one node of {rendezvous.nodes})" if rendezvous else "")
        try:
            _run(
                command,
                timeout_s,
                progress,
                what,
                # what torchrun and its ranks write to the temporary folder (the agent's watchdog file, a rank's own
                # files) goes in this run's folder, removed with it
                {**(extra_env or {}), "TMPDIR": folder},
                [
                    "-m",
                    "torch.distributed.run",
                    "--standalone",
                    f"--nproc_per_node={gpus}",
                    "-m",
                    "verify.dist",
                    "--out",
                    "dist.json",
                    "--sizes-mib",
                    sizes_mib,
                ],
                ranks=True,
                cpu=cpu,
            )
        except KernelError as exc:
            # torchrun gave up on the other nodes, or (a slow start on a busy host) lockgen's limit came first
            never_met = exc.rendezvous_timed_out or (exc.timed_out and not joined.exists())
            if rendezvous is None or not never_met:
                raise
            waited = join_timeout_s if exc.rendezvous_timed_out else timeout_s
            raise KernelError(
                f"the other nodes did not join at {rendezvous.endpoint} (run id {rendezvous.run_id!r}) within "
                f"{limit_text(waited)}",
                "start the same command on every node (same --nodes, --rendezvous, --rendezvous-id) and check "
                "that the endpoint's port is reachable from each",
            ) from None
        return _read(out_path, "the distributed kernel")


def _read(path: Path, what: str) -> tuple[JsonObject, bytes]:
    try:
        raw = path.read_bytes()
        return json.loads(raw), raw
    except (OSError, ValueError) as exc:
        raise KernelError(f"{what} wrote no readable result: {exc}", "re-run with -v") from None
