"""A real single-host Slurm cluster for the fleet tests: Debian's munged, slurmctld and two slurmd instances
standing in for nodes n1 and n2, everything (key, sockets, state, logs, config) in one temporary folder,
every port free and on 127.0.0.1. Started and stopped by the tests; each wait is bounded."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

NODES = ("n1", "n2")
DAEMONS = ("munged", "slurmctld", "slurmd")


def missing_tools() -> list[str]:
    return [tool for tool in (*DAEMONS, "sbatch", "srun", "sinfo", "scontrol") if shutil.which(tool) is None]


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for probe in sockets:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in sockets]
    finally:
        for probe in sockets:
            probe.close()


def _plugin_dir() -> str:
    for candidate in (
        "/usr/lib/x86_64-linux-gnu/slurm-wlm",
        "/usr/lib/aarch64-linux-gnu/slurm-wlm",
        "/usr/lib/slurm-wlm",
    ):
        if Path(candidate).is_dir():
            return candidate
    raise RuntimeError("no Slurm plugin folder found (apt-get install slurm-wlm)")


class SlurmCluster:
    """`start()` brings up munged, slurmctld and one slurmd per node; `env` is what clients need."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def _config(self) -> str:
        ctld, slurmd, *node_ports = _free_ports(2 + len(NODES))
        r = self.root
        lines = [
            "ClusterName=lockgentest",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={ctld}",
            f"SlurmdPort={slurmd}",
            "AuthType=auth/munge",
            f"AuthInfo=socket={r}/munge.socket",
            "CredType=cred/munge",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={r}/state",
            f"SlurmdSpoolDir={r}/spool/%n",
            f"SlurmctldPidFile={r}/slurmctld.pid",
            f"SlurmdPidFile={r}/slurmd-%n.pid",
            f"SlurmctldLogFile={r}/log/slurmctld.log",
            f"SlurmdLogFile={r}/log/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MpiDefault=none",
            "ReturnToService=2",
            "SchedulerType=sched/builtin",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            f"PluginDir={_plugin_dir()}",
            "SlurmdTimeout=30",
            "InactiveLimit=0",
            "KillWait=5",
            # 0 keeps finished jobs' records (never purged): `sbatch --wait` then polls every 2 s, where the default
            # (300) makes it back off to 2, 8, 32 s, and a 19 s job was seen done only at 42 s
            "MinJobAge=0",
        ]
        lines += [
            f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} CPUs=1 RealMemory=1000 "
            "State=UNKNOWN"
            for name, port in zip(NODES, node_ports)
        ]
        lines.append(f"PartitionName=test Nodes={','.join(NODES)} Default=YES MaxTime=20 State=UP")
        return "\n".join(lines) + "\n"

    def start(self) -> "SlurmCluster":
        for folder in ("state", "log", *(f"spool/{n}" for n in NODES)):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        key = self.root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.conf.write_text(self._config())
        r = self.root
        subprocess.run(
            [
                "munged",
                f"--key-file={key}",
                f"--socket={r}/munge.socket",
                f"--pid-file={r}/munged.pid",
                f"--log-file={r}/log/munged.log",
                f"--seed-file={r}/munged.seed",
                "--force",
            ],
            check=True,
            timeout=30,
        )
        subprocess.run(["slurmctld", "-f", str(self.conf), "-i"], check=True, timeout=30, env=self.env)
        for node in NODES:
            subprocess.run(["slurmd", "-f", str(self.conf), "-N", node], check=True, timeout=30, env=self.env)
        self.wait_idle(NODES, 60)
        return self

    def run(
        self, *command: str, timeout: float = 60, check: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """A client command against this cluster; `env` adds to the clients' environment."""
        return subprocess.run(
            list(command), capture_output=True, text=True, timeout=timeout, env={**self.env, **(env or {})}, check=check
        )

    def states(self) -> dict[str, tuple[str, str]]:
        """{node: (state, reason)} as sinfo reports them."""
        listing = self.run("sinfo", "-N", "-h", "-o", "%N|%T|%E").stdout
        return {n: (s, e) for n, s, e in (line.split("|", 2) for line in listing.splitlines() if line.count("|") == 2)}

    def wait_idle(self, nodes: tuple[str, ...], limit_s: float) -> None:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            try:
                if all(self.states().get(n, ("", ""))[0] == "idle" for n in nodes):
                    return
            except subprocess.SubprocessError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the Slurm nodes did not come up within {limit_s:.0f} s: {self.root / 'log'}")

    def stop(self) -> None:
        pids = [self.root / "slurmctld.pid", *(self.root / f"slurmd-{n}.pid" for n in NODES), self.root / "munged.pid"]
        for path in pids:
            try:
                os.kill(int(path.read_text().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                continue
        deadline = time.monotonic() + 15
        for path in pids:
            try:
                pid = int(path.read_text().strip())
            except (OSError, ValueError):
                continue
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except OSError:
                    break
                time.sleep(0.2)
            else:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
