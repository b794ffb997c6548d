"""Runs the verification kernel inside the environment under test: `PY -m verify`, and for several GPUs
`PY -m torch.distributed.run -m verify.dist` (PyTorch's own launcher; several nodes meet through its
c10d rendezvous).

The kernel's stderr is streamed as progress; its JSON comes back through a file. Each run has a
timeout: on expiry, or when a rank dies, the whole process group is killed, so no rank is left behind. A
kernel that dies is named with the phase it was in (its last `@phase` line) and the settings of its
environment known to break that phase (`core.certificate.kernel_deaths`).
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
from dataclasses import dataclass
from pathlib import Path

from lockgen.core.certificate.kernel_deaths import PHASE_MARK, describe_death
from lockgen.errors import KernelError
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


def _run(
    command: Sequence[str],
    timeout_s: float,
    progress: Callable[[str], None],
    what: str,
    extra_env: dict[str, str],
    shown: Sequence[str],
    given: str | None = None,
) -> None:
    """Runs the kernel `command`; `shown`: its arguments as a failure's hint gives them, to run it by hand;
    `given`: text for its stdin (the expectations, which it reads once torch is imported)."""
    environment = _environment(extra_env)
    try:
        process = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE if given is not None else subprocess.DEVNULL,
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
    if given is not None:
        assert process.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # a kernel that ended at once is reported below
            process.stdin.write(given)
            process.stdin.close()
    tail: list[str] = []
    phase: list[str] = []  # the kernel's last `@phase` line, kept apart from the tail, which an abort's frames fill

    def pump() -> None:  # forwards the kernel's check lines as they come, keeps the last lines for errors
        assert process.stderr is not None
        for raw in process.stderr:
            line = raw.rstrip("\n")
            tail.append(line)
            del tail[:-200]  # an abort prints dozens of stack frames after the line that says what went wrong
            if line.startswith(PHASE_MARK):
                phase[:] = [line]
            elif line.startswith(("ok  ", "FAIL")):
                progress(f"  {line}")

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        late = KernelError(
            f"{what} did not finish within {timeout_s:.0f} s (a hung rank or collective?); every process it "
            "started was killed",
            "check `nvidia-smi`, CUDA_VISIBLE_DEVICES and NCCL settings; raise --timeout if the machine is slow",
        )
        late.timed_out = True
        raise late from None
    reader.join(timeout=5)
    _kill_group(process)  # ranks a failed launcher left behind
    if process.returncode != 0:
        text = "\n".join(tail)
        ranks = re.findall(r"rank\s*:\s*(\d+).*?\n\s*exitcode\s*:\s*(-?\d+)", text)
        hint = f"re-run with -v, or run the kernel by hand: {by_hand(command[0], *shown)}"
        if ranks:
            last = "; ".join(f"rank {rank} exited with code {code}" for rank, code in ranks)
            message = f"{what} failed (exit {process.returncode}): {last[:300]}"
        else:
            message, breakers = describe_death(what, process.returncode, [*phase, *tail], environment)
            if breakers:
                hint = f"unset {' and '.join(breakers)} and verify again"
        error = KernelError(message, hint)
        error.rendezvous_timed_out = any("RendezvousTimeoutError" in line for line in tail)
        raise error


def _kill_group(process: subprocess.Popen[str]) -> None:
    """SIGTERM the whole process group, give the launcher 5 s, then SIGKILL whatever of the group is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            return  # nothing of the group is left
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)


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
    """The single-process kernel; returns its document and the exact bytes it wrote."""
    with tempfile.TemporaryDirectory(prefix="lockgen-verify-") as folder:
        out_path = Path(folder) / "single.json"
        command = [python, "-m", "verify", "--arch", arch, "--expect", "-", "--out", str(out_path)]
        command += ["--quick"] * quick + ["--compile"] * compiled + ["--allow-ptx"] * allow_ptx
        _run(
            command,
            timeout_s,
            progress,
            "the verification kernel",
            {},
            ["-m", "verify", "--arch", arch, *command[command.index("--out") + 2 :]],
            json.dumps(expected),
        )
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
) -> tuple[JsonObject, bytes]:
    """The multi-GPU kernel under torchrun, one process per GPU (gloo processes on CPUs), on this host
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
                extra_env or {},
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
            )
        except KernelError as exc:
            # torchrun gave up on the other nodes, or (a slow start on a busy host) lockgen's limit came first
            never_met = exc.rendezvous_timed_out or (exc.timed_out and not joined.exists())
            if rendezvous is None or not never_met:
                raise
            waited = join_timeout_s if exc.rendezvous_timed_out else timeout_s
            raise KernelError(
                f"the other nodes did not join at {rendezvous.endpoint} (run id {rendezvous.run_id!r}) within "
                f"{waited:.0f} s",
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
