"""The service launcher of an image whose `[image]` states `services`: export puts this file, unchanged, at
`/opt/env/.lockgen/service_launcher.py` beside `services.json` (name -> command) and makes it the image's
entrypoint, run by the environment's own Python. Standard library only: it runs inside the image, not in
lockgen (like `verify/`).

It does what a container's PID 1 must: starts every service (in name order, each with the image's
environment, stdout and stderr), forwards SIGTERM, SIGINT and SIGHUP to them (PID 1 has no default
signal handlers, so without this `podman stop` waits and kills), reaps orphaned processes, and ends
the container when a service ends: the others get SIGTERM, then SIGKILL after GRACE seconds, and the
launcher exits with that service's exit status (128 + signal for a signal), so the runtime's restart
policy sees the failure. After a stop signal it exits 0 once every service has ended.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

GRACE = 10.0  # seconds a service has to end after SIGTERM before SIGKILL


def _say(text: str) -> None:
    print(f"[services] {text}", file=sys.stderr, flush=True)


def _status(wait_status: int) -> int:
    """A wait status as a shell reports it: the exit code, or 128 + the signal that ended the process."""
    return 128 + os.WTERMSIG(wait_status) if os.WIFSIGNALED(wait_status) else os.WEXITSTATUS(wait_status)


def _stop(running: dict[int, tuple[str, subprocess.Popen]], grace: float) -> None:
    """SIGTERM to every running service, then SIGKILL to those still running after `grace` seconds."""
    for _, process in running.values():
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for _, process in running.values():
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main(services_file: Path) -> int:
    services = json.loads(services_file.read_text())
    stopping: list[int] = []
    running: dict[int, tuple[str, subprocess.Popen]] = {}

    def forward(signum: int, _frame: object) -> None:
        stopping.append(signum)
        for _, process in running.values():
            if process.poll() is None:
                process.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    for name, command in sorted(services.items()):
        try:
            process = subprocess.Popen(command)
        except OSError as exc:
            _say(f"cannot start {name} ({command[0]}: {exc.strerror or exc}); stopping")
            _stop(running, GRACE)
            return 127
        running[process.pid] = (name, process)
        _say(f"started {name} (pid {process.pid}): {' '.join(command)}")
    while True:
        try:
            pid, wait_status = os.wait()  # any child: a service, or an orphan reparented to PID 1
        except ChildProcessError:
            return 0
        except InterruptedError:
            continue
        if pid not in running:
            continue
        name, process = running.pop(pid)
        process.returncode = _status(wait_status)
        if stopping:
            if not running:
                _say(f"stopped on signal {stopping[0]}")
                return 0
            continue
        _say(f"{name} exited with status {process.returncode}; stopping the others")
        _stop(running, GRACE)
        return process.returncode


if __name__ == "__main__":
    sys.exit(main(Path(__file__).with_name("services.json")))
