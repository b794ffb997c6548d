"""What `lockgen fleet slurm` writes scripts for, as values the CLI builds from its flags: the job that
certifies nodes (`core/fleet/slurm_scripts.py` renders it) and how the health check runs."""

from __future__ import annotations

from dataclasses import dataclass

from lockgen.model.requests import Environment


@dataclass(frozen=True)
class CertifyJob:
    """What the job certifies and where it writes: the lockgen command line's parts and Slurm's options."""

    lockgen: str  # how the nodes run lockgen (an absolute path, or `python -m lockgen`)
    arch: str
    environment: Environment | None  # the one of --python PY, --prefix DIR, --image REF (PY, DIR may hold $VARIABLES)
    lock: str | None
    manifests: str | None  # with lock: the manifests bundle, for nodes without network
    allow_foreign: tuple[str, ...]  # with lock: files no package states that the fleet accepts
    key: str | None
    out_dir: str
    nodes: int
    gpus_per_node: int | None
    quick: bool
    partition: str | None
    time_limit: str
    constraint: str | None
    timeout_s: int


@dataclass(frozen=True)
class SlurmHealth:
    """The `HealthCheckProgram`: the seconds it may take (Slurm kills it at 60), whether a failing node is
    drained, and the folders it writes node_exporter metrics (`prom_dir`) and NFD features (`nfd_dir`) to."""

    limit_s: int
    drain: bool
    prom_dir: str | None = None
    nfd_dir: str | None = None
