"""Use case `lockgen fleet slurm`: the scripts that certify nodes inside Slurm, written atomically into one
folder: `certify.sbatch` (N nodes in one job, one certificate per node) and `lockgen-health.sh` (a
`HealthCheckProgram` that drains a failing node with lockgen's reason)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lockgen.adapters.atomic_files import write_atomic
from lockgen.core.slurm_scripts import CertifyJob, health_script, sbatch_script
from lockgen.errors import UserError

SLURM_HEALTH_LIMIT_S = 60  # Slurm kills a HealthCheckProgram after 60 s


@dataclass(frozen=True)
class SlurmScripts:
    sbatch: Path
    health: Path


def write_slurm(folder: Path, *, lockgen: str, arch: str, environment: tuple[str, ...], lock: str | None,
                key: str | None, out_dir: str, nodes: int, gpus_per_node: int | None, quick: bool,
                partition: str | None, time_limit: str, constraint: str | None, timeout_s: int,
                health_limit_s: int, drain: bool, prom_dir: str | None = None, nfd_dir: str | None = None) -> SlurmScripts:
    """Writes both scripts into `folder` (made if needed); each is executable and complete, or not there."""
    job = CertifyJob(lockgen=lockgen, arch=arch, environment=environment, lock=lock, key=key, out_dir=out_dir,
                     nodes=nodes, gpus_per_node=gpus_per_node, quick=quick, partition=partition,
                     time_limit=time_limit, constraint=constraint, timeout_s=timeout_s)
    if not environment:
        raise UserError("the scripts need the environment to certify on each node",
                        "pass --python PY, --prefix DIR or --image REF (PY and DIR may use $SLURMD_NODENAME)")
    if nfd_dir and not lock:
        raise UserError("node features name the lock a node is certified for", "pass --lock LOCK with --nfd-dir")
    if job.nodes < 1:
        raise UserError(f"--nodes {job.nodes} certifies nothing", "pass --nodes 1 or more")
    if not 5 <= health_limit_s < SLURM_HEALTH_LIMIT_S:
        raise UserError(f"--health-limit {health_limit_s} s does not fit Slurm's health check",
                        f"Slurm kills a HealthCheckProgram after {SLURM_HEALTH_LIMIT_S} s: pass 5 to {SLURM_HEALTH_LIMIT_S - 1}")
    folder.mkdir(parents=True, exist_ok=True)
    Path(out_dir).mkdir(parents=True, exist_ok=True)  # sbatch opens its --output there before the script runs
    scripts = SlurmScripts(folder / "certify.sbatch", folder / "lockgen-health.sh")
    quick = CertifyJob(**{**job.__dict__, "quick": True, "timeout_s": health_limit_s - 5})
    for path, text in ((scripts.sbatch, sbatch_script(job)), (scripts.health, health_script(quick, health_limit_s, drain, prom_dir, nfd_dir))):
        write_atomic(path, text, 0o777)
    return scripts
