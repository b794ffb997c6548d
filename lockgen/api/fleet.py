"""Use case `lockgen fleet`: what certifies nodes inside the engines fleets run, written atomically into
one folder. `slurm`: `certify.sbatch` (N nodes in one job, one certificate per node) and `lockgen-health.sh`
(a `HealthCheckProgram` that drains a failing node with lockgen's reason). `kubernetes`: the manifests of a
certifying Job, a re-certifying DaemonSet and a training pod's gate (`core/fleet/kubernetes_manifests.py`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from lockgen.adapters import user_files
from lockgen.adapters.atomic_files import WRITABLE_HINT, check_writable, write_atomic
from lockgen.adapters.kubernetes_yaml import render_documents
from lockgen.core.gpu.facts import arch_fact, load_facts
from lockgen.core.image.image_reference import parse_reference
from lockgen.core.fleet.kubernetes_manifests import (
    GPUS_PER_NODE_DEFAULT,
    CertifyFleet,
    certify_job,
    check_fleet,
    gate_fragment,
    lock_config_map,
    monitor_daemon_set,
)
from lockgen.core.fleet.slurm_scripts import KILL_AFTER_S, check_job, health_script, sbatch_script
from lockgen.errors import UserError
from lockgen.model.fleet import CertifyJob, SlurmHealth
from lockgen.model.names import normalize_arch

SLURM_HEALTH_LIMIT_S = 60  # Slurm kills a HealthCheckProgram after 60 s


@dataclass(frozen=True)
class SlurmScripts:
    sbatch: Path
    health: Path


def write_slurm(folder: Path, job: CertifyJob, health: SlurmHealth) -> SlurmScripts:
    """Writes both scripts into `folder` (made if needed); each is executable and complete, or not there."""
    if (job.manifests or job.allow_foreign) and not job.lock:
        raise UserError(
            "--manifests and --allow-foreign go with --lock", "pass --lock LOCK, the lock the nodes must be"
        )
    if job.environment is None:
        raise UserError(
            "the scripts need the environment to certify on each node",
            "pass --python PY, --prefix DIR or --image REF (PY and DIR may use $SLURMD_NODENAME)",
        )
    prom_dir, nfd_dir, health_limit_s = health.prom_dir, health.nfd_dir, health.limit_s
    check_job(job, *(d for d in (prom_dir, nfd_dir) if d))
    if nfd_dir and not job.lock:
        raise UserError("node features name the lock a node is certified for", "pass --lock LOCK with --nfd-dir")
    if job.nodes < 1:
        raise UserError(f"--nodes {job.nodes} certifies nothing", "pass --nodes 1 or more")
    longest = SLURM_HEALTH_LIMIT_S - KILL_AFTER_S - 1  # the check's SIGKILL, and its drain, before Slurm's kill
    if not 5 <= health_limit_s <= longest:
        raise UserError(
            f"--health-limit {health_limit_s} s does not fit Slurm's health check",
            f"Slurm kills a HealthCheckProgram after {SLURM_HEALTH_LIMIT_S} s: pass 5 to {longest}",
        )
    check_writable(folder, f"--out {folder}", WRITABLE_HINT)  # before the certificates' folder is made
    folder.mkdir(parents=True, exist_ok=True)
    Path(job.out_dir).mkdir(parents=True, exist_ok=True)  # sbatch opens its --output there before the script runs
    scripts = SlurmScripts(folder / "certify.sbatch", folder / "lockgen-health.sh")
    health_job = replace(job, quick=True, timeout_s=health_limit_s - 5)
    for path, text in ((scripts.sbatch, sbatch_script(job)), (scripts.health, health_script(health_job, health))):
        write_atomic(path, text, 0o777)
    return scripts


@dataclass(frozen=True)
class KubernetesManifests:
    job: Path
    daemonset: Path
    gate: Path


def write_kubernetes(
    folder: Path,
    *,
    image: str,
    lockgen_image: str,
    arch: str,
    gpu_product: str | None,
    gpus_per_node: int | None,
    nodes: int,
    lock: Path | None,
    namespace: str,
    name: str | None,
    certs_claim: str,
    key_secret: str | None,
    registry_auth_secret: str | None,
    interval_s: int,
) -> KubernetesManifests:
    """Writes `certify-job.yaml` (the lock's ConfigMap first, with --lock), `monitor-daemonset.yaml` and
    `gate-init-container.yaml` into `folder`; every value is checked and every file rendered before the
    first is written, so bad input leaves the folder as it was."""
    arch = normalize_arch(arch)
    if arch != "cpu":
        arch_fact(load_facts(), arch)
    fleet = CertifyFleet(
        name=name or f"lockgen-{arch}",
        namespace=namespace,
        image=parse_reference(image),
        lockgen_image=lockgen_image,
        arch=arch,
        gpu_product=gpu_product,
        gpus_per_node=gpus_per_node if gpus_per_node is not None or arch == "cpu" else GPUS_PER_NODE_DEFAULT,
        nodes=nodes,
        lock_name=lock.name if lock else None,
        certs_claim=certs_claim,
        key_secret=key_secret,
        registry_auth_secret=registry_auth_secret,
        interval_s=interval_s,
    )
    check_fleet(fleet)
    check_writable(folder, f"--out {folder}", WRITABLE_HINT)  # before the lock is read and the manifests rendered
    shared = [lock_config_map(fleet, _lock_text(lock))] if lock else []
    heading = (
        f"Written by `lockgen fleet kubernetes`: certifies {fleet.pinned_image} as {arch}"
        + (f" on nodes labelled {fleet.gpu_product}" if fleet.gpu_product else "")
        + "."
    )
    manifests = KubernetesManifests(
        folder / "certify-job.yaml", folder / "monitor-daemonset.yaml", folder / "gate-init-container.yaml"
    )
    texts = {
        manifests.job: render_documents(
            [*shared, certify_job(fleet)],
            heading
            + f"\nkubectl apply -f this file: one pod per node on {fleet.nodes} nodes, certificates on the claim "
            f"{certs_claim}.",
        ),
        manifests.daemonset: render_documents(
            [*shared, monitor_daemon_set(fleet)],
            heading + f"\nkubectl apply -f this file: re-certifies every such node with --quick every {interval_s} s.",
        ),
        manifests.gate: render_documents(
            [gate_fragment(fleet)],
            heading + "\nMerge into a training pod's spec: its "
            "initContainers and volumes; the pod starts only if a passing certificate\n"
            f"signed by the key in the ConfigMap {fleet.name}-signing-pub is attached to the image.",
        ),
    }
    folder.mkdir(parents=True, exist_ok=True)
    for path, text in texts.items():
        write_atomic(path, text)
    return manifests


def _lock_text(lock: Path) -> str:
    try:
        return user_files.read_bytes(lock).decode("utf-8")
    except OSError as error:
        raise UserError(
            f"cannot read the lock `{lock}`: {error.strerror}", "pass the lock the image was exported from"
        ) from None
    except UnicodeDecodeError:
        raise UserError(
            f"`{lock}` is not a text lock file",
            "pass the lock (conda-lock YAML, pylock.toml) the image was exported from",
        ) from None
