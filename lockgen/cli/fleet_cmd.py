"""`lockgen fleet`: certification inside the engines fleets run. `fleet slurm` writes the sbatch job that
certifies N nodes together and the health-check program that drains a failing node with its reason."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Optional

import typer

from lockgen.cli.ui import fail, handles_errors, print_json, progress

fleet_app = typer.Typer(help="Certify nodes inside the engines fleets run (Slurm).", no_args_is_help=True,
                        rich_markup_mode=None)


@fleet_app.command("slurm")
@handles_errors
def slurm(
    arch: str = typer.Option(..., "--arch", help="The arch every node must certify as (sm90, ...; cpu for a test cluster)."),
    python: Optional[str] = typer.Option(None, "--python", help="The environment's interpreter on each node; "
                                         "$SLURMD_NODENAME and other variables are expanded there."),
    prefix: Optional[str] = typer.Option(None, "--prefix", help="A materialized environment on each node (PREFIX/bin/python)."),
    image: Optional[str] = typer.Option(None, "--image", help="An image each node runs (OCI layout path or docker://REF)."),
    lock: Optional[Path] = typer.Option(None, "--lock", help="The lock each node's environment must be (conformance first)."),
    key: Optional[Path] = typer.Option(None, "--key", help="The signing key, at a path every node can read."),
    nodes: int = typer.Option(..., "--nodes", help="Nodes the sbatch job certifies together."),
    gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node", help="Processes per node (default: every GPU)."),
    quick: bool = typer.Option(False, "--quick", help="The job certifies with --quick too (the health check always does)."),
    partition: Optional[str] = typer.Option(None, "--partition", help="sbatch --partition."),
    time_limit: str = typer.Option("00:15:00", "--time", help="sbatch --time."),
    constraint: Optional[str] = typer.Option(None, "--constraint", help="sbatch --constraint (node features)."),
    timeout: int = typer.Option(600, "--timeout", help="Seconds each node's kernel may run in the job."),
    health_limit: int = typer.Option(55, "--health-limit", help="Seconds the health check may take (Slurm kills it at 60)."),
    no_drain: bool = typer.Option(False, "--no-drain", help="The health check reports a failure but does not drain."),
    certs: Path = typer.Option(Path("certs"), "--certs", help="Where nodes write certificates and logs (shared by all nodes)."),
    lockgen_command: Optional[str] = typer.Option(None, "--lockgen", help="How nodes run lockgen (default: this interpreter's)."),
    out: Path = typer.Option(Path("slurm"), "--out", help="Folder for certify.sbatch and lockgen-health.sh."),
    as_json: bool = typer.Option(False, "--json", help="Print {sbatch, health} as JSON."),
) -> None:
    """Write a Slurm job that certifies N nodes together, and a HealthCheckProgram that drains a failing node."""
    from lockgen.api.fleet import write_slurm

    chosen = [(flag, value) for flag, value in (("--python", python), ("--prefix", prefix), ("--image", image)) if value]
    if len(chosen) > 1:
        fail("--python, --prefix and --image each name the environment to certify", "pass one of them", 2)
    scripts = write_slurm(
        out, lockgen=lockgen_command or f"{shlex.quote(sys.executable)} -m lockgen", arch=arch,
        environment=tuple(chosen[0]) if chosen else (), lock=str(lock.resolve()) if lock else None,
        key=str(key.resolve()) if key else None, out_dir=str(certs.resolve()), nodes=nodes, gpus_per_node=gpus_per_node,
        quick=quick, partition=partition, time_limit=time_limit, constraint=constraint, timeout_s=timeout,
        health_limit_s=health_limit, drain=not no_drain)
    if as_json:
        print_json({"sbatch": str(scripts.sbatch), "health": str(scripts.health)})
        return
    print(scripts.sbatch)
    print(scripts.health)
    progress(f"submit: sbatch {scripts.sbatch}; health: HealthCheckProgram={scripts.health.resolve()} in slurm.conf")
