"""`lockgen fleet`: certification inside the engines fleets run. `fleet slurm` writes the sbatch job that
certifies N nodes together and the health-check program that drains a failing node with its reason;
`fleet kubernetes` writes a certifying Job, a re-certifying DaemonSet and a training pod's gate;
`fleet status` shows every node x lock from certificate folders and images' attestations."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Optional

import typer

from lockgen.cli.ui import environment, fail, handles_errors, noise_fraction, print_json, progress, say

fleet_app = typer.Typer(
    help="Certify nodes inside the engines fleets run (Slurm, Kubernetes), and see the fleet's state.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@fleet_app.command("slurm")
@handles_errors
def slurm(
    arch: str = typer.Option(
        ..., "--arch", help="The arch every node must certify as (sm90, ...; cpu for a test cluster)."
    ),
    python: Optional[str] = typer.Option(
        None,
        "--python",
        help="The environment's interpreter on each node; $SLURMD_NODENAME and other variables are expanded there.",
    ),
    prefix: Optional[str] = typer.Option(
        None, "--prefix", help="A materialized environment on each node (PREFIX/bin/python)."
    ),
    image: Optional[str] = typer.Option(
        None, "--image", help="An image each node runs (OCI layout path or docker://REF)."
    ),
    lock: Optional[Path] = typer.Option(
        None, "--lock", help="The lock each node's environment must be (conformance first)."
    ),
    manifests: Optional[Path] = typer.Option(
        None, "--manifests", help="With --lock: the manifests bundle (nodes without network)."
    ),
    allow_foreign: list[str] = typer.Option(
        [],
        "--allow-foreign",
        help="With --lock: a file no package states that nodes may have (recorded in each certificate). Repeatable.",
    ),
    key: Optional[Path] = typer.Option(None, "--key", help="The signing key, at a path every node can read."),
    nodes: int = typer.Option(..., "--nodes", help="Nodes the sbatch job certifies together."),
    gpus_per_node: Optional[int] = typer.Option(
        None, "--gpus-per-node", help="Processes per node (default: every GPU)."
    ),
    quick: bool = typer.Option(
        False, "--quick", help="The job certifies with --quick too (the health check always does)."
    ),
    partition: Optional[str] = typer.Option(None, "--partition", help="sbatch --partition."),
    time_limit: str = typer.Option("00:15:00", "--time", help="sbatch --time."),
    constraint: Optional[str] = typer.Option(None, "--constraint", help="sbatch --constraint (node features)."),
    timeout: int = typer.Option(600, "--timeout", help="Seconds each node's kernel may run in the job."),
    health_limit: int = typer.Option(
        55, "--health-limit", help="Seconds the health check may take (Slurm kills it at 60)."
    ),
    no_drain: bool = typer.Option(False, "--no-drain", help="The health check reports a failure but does not drain."),
    prom_dir: Optional[Path] = typer.Option(
        None,
        "--prom-dir",
        help="The health check writes lockgen.prom here (node_exporter's --collector.textfile.directory).",
    ),
    nfd_dir: Optional[Path] = typer.Option(
        None, "--nfd-dir", help="The health check writes the node features here (NFD's features.d; needs --lock)."
    ),
    certs: Path = typer.Option(
        Path("certs"), "--certs", help="Where nodes write certificates and logs (shared by all nodes)."
    ),
    lockgen_command: Optional[str] = typer.Option(
        None, "--lockgen", help="How nodes run lockgen (default: this interpreter's)."
    ),
    out: Path = typer.Option(Path("slurm"), "--out", help="Folder for certify.sbatch and lockgen-health.sh."),
    as_json: bool = typer.Option(False, "--json", help="Print {sbatch, health} as JSON."),
) -> None:
    """Write a Slurm job that certifies N nodes together, and a HealthCheckProgram that drains a failing node."""
    from lockgen.api.fleet import write_slurm
    from lockgen.model.fleet import CertifyJob, SlurmHealth

    target = environment(
        Path(prefix) if prefix is not None else None,
        python,
        image,
        ("--python, --prefix and --image each name the environment to certify", "pass one of them", 2),
    )
    job = CertifyJob(
        lockgen=lockgen_command or f"{shlex.quote(sys.executable)} -m lockgen",
        arch=arch,
        environment=target,
        lock=_absolute(lock),
        manifests=_absolute(manifests),
        allow_foreign=tuple(allow_foreign),
        key=_absolute(key),
        out_dir=str(certs.resolve()),
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        quick=quick,
        partition=partition,
        time_limit=time_limit,
        constraint=constraint,
        timeout_s=timeout,
    )
    scripts = write_slurm(out, job, SlurmHealth(health_limit, not no_drain, _absolute(prom_dir), _absolute(nfd_dir)))
    if as_json:
        print_json({"sbatch": str(scripts.sbatch), "health": str(scripts.health)})
        return
    say(scripts.sbatch)
    say(scripts.health)
    progress(f"submit: sbatch {scripts.sbatch}; health: HealthCheckProgram={scripts.health.resolve()} in slurm.conf")


def _absolute(path: Optional[Path]) -> Optional[str]:
    """A flag's path as the nodes see it: absolute (they run elsewhere), None when not given."""
    return str(path.resolve()) if path else None


@fleet_app.command("status")
@handles_errors
def status(
    sources: list[str] = typer.Argument(
        ...,
        metavar="FOLDER|docker://REF...",
        help="Folders of certificates (or one *.cert.json), images with attestations.",
    ),
    key: list[Path] = typer.Option(
        [],
        "--key",
        help="A signer's public key (KEY.pub): every certificate and attestation must be signed by one of the keys "
        "given and verify. Repeatable.",
    ),
    insecure: bool = typer.Option(False, "--insecure", help="With docker://REF: plain HTTP or a self-signed registry."),
    noise: float = typer.Option(
        0.05, "--noise", help="A figure worse than the node's previous certificate by more is a regression."
    ),
    html: Optional[Path] = typer.Option(
        None, "--html", help="Also write one static page: the matrix coloured by status, a chart per figure."
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print {rows: [{node, covers, passed, refused, age_s, figures, regressions, ...}], refused: [{node, "
        "source, reason}], numerics: {compared, differ}} as JSON.",
    ),
) -> None:
    """Every node x lock: the latest result, its age, headline figures, regressions; exit 1 if a node failed."""
    import datetime as dt

    from lockgen.api.fleet_status import fleet_status
    from lockgen.cli.fleet_report import print_status

    report = fleet_status(
        sources, key, insecure, noise_fraction(noise), html, dt.datetime.now(dt.timezone.utc), progress
    )
    failure = print_status(report, bool(key), as_json)  # what the fast path prints too (`fast_path`)
    if failure is not None:
        fail(*failure)


@fleet_app.command("kubernetes")
@handles_errors
def kubernetes(
    image: str = typer.Option(..., "--image", help="The image to certify, pinned: docker://HOST/REPO@sha256:HEX."),
    lockgen_image: str = typer.Option(
        ...,
        "--lockgen-image",
        help="The image the pods run: lockgen and skopeo on PATH, and sh (registry.example/tools/lockgen@sha256:...).",
    ),
    arch: str = typer.Option(
        ..., "--arch", help="The arch every node must certify as (sm90, ...; cpu for a test cluster)."
    ),
    gpu_product: Optional[str] = typer.Option(
        None,
        "--gpu-product",
        help="The nodes' nvidia.com/gpu.product label (GPU Feature Discovery's), e.g. NVIDIA-H100-80GB-HBM3; needed "
        "unless --arch cpu.",
    ),
    gpus_per_node: Optional[int] = typer.Option(
        None,
        "--gpus-per-node",
        help="nvidia.com/gpu each pod requests and verify --gpus (default 8; none for --arch cpu).",
    ),
    nodes: int = typer.Option(1, "--nodes", help="Nodes the Job certifies, one pod on each."),
    lock: Optional[Path] = typer.Option(
        None,
        "--lock",
        help="The lock the image must be (conformance first); carried in a ConfigMap (default: the image's own lock "
        "label).",
    ),
    namespace: str = typer.Option("default", "--namespace", help="The namespace of every object."),
    name: Optional[str] = typer.Option(None, "--name", help="Prefix of the objects' names (default lockgen-ARCH)."),
    certs_claim: str = typer.Option(
        ..., "--certs-claim", help="A PersistentVolumeClaim (ReadWriteMany) the pods write certificates to."
    ),
    key_secret: Optional[str] = typer.Option(
        None,
        "--key-secret",
        help="A Secret with signing.key and signing.pub (lockgen keygen's pair): certificates are signed and probes "
        "check them.",
    ),
    registry_auth_secret: Optional[str] = typer.Option(
        None,
        "--registry-auth-secret",
        help="A dockerconfigjson Secret for pulling the image and reading its attestations.",
    ),
    interval: int = typer.Option(3600, "--interval", help="Seconds between the DaemonSet's quick certifications."),
    out: Path = typer.Option(Path("kubernetes"), "--out", help="Folder for the manifests."),
    as_json: bool = typer.Option(False, "--json", help="Print {job, daemonset, gate} as JSON."),
) -> None:
    """Write Kubernetes manifests: a Job certifying N nodes, a DaemonSet re-certifying them, a training pod's gate."""
    from lockgen.api.fleet import write_kubernetes

    manifests = write_kubernetes(
        out,
        image=image,
        lockgen_image=lockgen_image,
        arch=arch,
        gpu_product=gpu_product,
        gpus_per_node=gpus_per_node,
        nodes=nodes,
        lock=lock,
        namespace=namespace,
        name=name,
        certs_claim=certs_claim,
        key_secret=key_secret,
        registry_auth_secret=registry_auth_secret,
        interval_s=interval,
    )
    if as_json:
        print_json({"job": str(manifests.job), "daemonset": str(manifests.daemonset), "gate": str(manifests.gate)})
        return
    for path in (manifests.job, manifests.daemonset, manifests.gate):
        say(path)
    progress(
        f"certify: kubectl apply -f {manifests.job}; watch: kubectl apply -f {manifests.daemonset}; gate: merge "
        f"{manifests.gate} into a training pod's spec"
    )
