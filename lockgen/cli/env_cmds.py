"""`lockgen materialize` and `lockgen check`: a lock becomes an environment; an environment is checked for drift."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from lockgen.cli.ui import fail, handles_errors, progress


@handles_errors
def materialize(
    lock: Path = typer.Argument(..., help="A lock written by lockgen resolve (or import)."),
    platform: Optional[str] = typer.Option(None, "--platform", "-p", help="Which platform of the lock (default: this host's)."),
    prefix: Optional[Path] = typer.Option(None, "--prefix", help="Where (default: $LOCKGEN_HOME/envs/<lock digest>-<name>)."),
) -> None:
    """Install exactly the lock's packages, hash-checked, atomically; print the prefix."""
    from lockgen.api.materialize import materialize as run
    from lockgen.cli.ui import Meter

    meter = Meter()
    try:
        path, digest = run(lock, platform, prefix, progress, meter)
    finally:
        meter.close()
    progress(f"environment digest sha256:{digest}")
    print(path)


@handles_errors
def check(
    prefix: Optional[Path] = typer.Option(None, "--prefix", help="An environment made by lockgen materialize."),
    image: Optional[str] = typer.Option(None, "--image", help="An OCI layout made by lockgen export, or docker://REF."),
    lock: Optional[Path] = typer.Option(None, "--lock", help="With --image: the lock the image must come from."),
    insecure: bool = typer.Option(False, "--insecure", help="With --image docker://REF: plain HTTP or a self-signed registry."),
    full: bool = typer.Option(False, "--full", help="Re-hash every file, not only those whose size or mtime changed."),
) -> None:
    """Compare an environment (or an image's) with its manifest: missing, extra, modified files; exit 1 on drift."""
    if (prefix is None) == (image is None):
        fail("pass exactly one of --prefix and --image", "lockgen check --prefix DIR, or lockgen check --image LAYOUT")
    if image is not None:
        from lockgen.api.check import check_image

        recorded, recomputed, drift = check_image(image, lock, insecure, progress)
        print(f"environment digest sha256:{recomputed}")
        if recorded != recomputed or not drift.clean:
            fail(f"the image's environment (sha256:{recomputed[:16]}) differs from what it records "
                 f"(sha256:{recorded[:16]})", "re-export it from its lock")
        progress(f"{image}: the environment in the image is the one its lock describes")
        return
    from lockgen.api.check import check_prefix as run

    drift = run(prefix, full)
    for kind, paths in (("missing", drift.missing), ("extra", drift.extra), ("modified", drift.modified)):
        for path in paths:
            print(f"{kind} {path}")
    if not drift.clean:
        fail(f"{prefix} drifted from its lock: {len(drift.missing)} missing, {len(drift.extra)} extra, "
             f"{len(drift.modified)} modified files", "materialize the lock again into a fresh prefix")
    progress(f"{prefix} matches its manifest")


def envs() -> None:
    """List the environments in the store ($LOCKGEN_HOME/envs)."""
    from lockgen.api.store import list_envs

    for entry in list_envs():
        print(f"{entry.path}  env sha256:{entry.environment_digest[:16]}  lock sha256:{entry.lock_sha256[:16]}  {entry.platform}")


@handles_errors
def gc(
    roots: list[Path] = typer.Argument(..., help="Locks, or folders searched for *.conda-lock.yml, whose environments stay."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only print what would be removed."),
) -> None:
    """Remove store environments that none of the given locks refers to."""
    from lockgen.api.store import gc as run

    for path in run(roots, dry_run):
        print(path)


@handles_errors
def freeze(
    prefix: Optional[Path] = typer.Option(None, "--prefix", help="A conda environment (conda-meta) to pin."),
    python: Optional[str] = typer.Option(None, "--python", help="An interpreter whose installed distributions to pin."),
    target: Optional[str] = typer.Option(None, "--target", "-t", help="Name of the lock: locks/<NAME>.conda-lock.yml."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write here instead of locks/<NAME>.conda-lock.yml."),
    skip_unpinnable: bool = typer.Option(False, "--skip-unpinnable", help="Leave out distributions with no URL and hash."),
    inventory: Optional[Path] = typer.Option(None, "--inventory", help="With --python: write the node's inventory here "
                                             "(no network) for `lockgen pin` on a connected machine."),
) -> None:
    """Write a lock from an existing environment, or (--inventory) what `lockgen pin` needs to write one."""
    if inventory is not None:
        from lockgen.api.freeze import write_inventory

        if python is None or prefix is not None or target is not None:
            fail("--inventory takes --python only", "lockgen freeze --python PY --inventory OUT", 2)
        write_inventory(python, inventory, progress)
        print(inventory)
        return
    if target is None:
        fail("freeze needs --target NAME", "lockgen freeze --python PY --target NAME", 2)
    from lockgen.api.freeze import freeze as run

    path, lock = run(prefix, python, target, out, skip_unpinnable)
    progress(f"pinned {len(lock.package)} packages")
    print(path)


@handles_errors
def export(
    lock: Path = typer.Argument(..., help="A lock written by lockgen resolve."),
    out: Path = typer.Option(..., "--out", help="The OCI image layout folder to write."),
    platform: Optional[str] = typer.Option(None, "--platform", "-p", help="Which platform of the lock (default: this host's)."),
    tag: Optional[str] = typer.Option(None, "--tag", help="The tag in the layout (default: <target>-<platform>)."),
    layers: int = typer.Option(100, "--layers", help="Layer budget: one per package up to this, then grouped."),
    level: int = typer.Option(1, "--compression-level", help="gzip level of new layers (1 fast ... 9 small)."),
    base: Optional[Path] = typer.Option(None, "--base", help="An OCI layout of a base image (a CUDA runtime, a Debian slim)."),
    fmt: str = typer.Option("oci-layout", "--format", help="oci-layout (a folder), oci-archive or docker-archive (a file)."),
) -> None:
    """Write the lock's environment (at /opt/env) as an OCI image layout; print the manifest digest."""
    from lockgen.api.export import export as run

    digest, env_digest = run(lock, platform, out, tag, layers, level, progress, base, fmt)
    progress(f"environment digest sha256:{env_digest}")
    print(digest)


@handles_errors
def push(
    layout: Path = typer.Argument(..., help="An OCI layout made by lockgen export."),
    reference: str = typer.Argument(..., help="Where: docker://HOST[:PORT]/REPO:TAG."),
    insecure: bool = typer.Option(False, "--insecure", help="Plain HTTP or a self-signed registry (loopback tests)."),
) -> None:
    """Push an exported image with skopeo; print the manifest digest, which stays the layout's."""
    from lockgen.api.publish import push as run

    print(run(layout, reference, insecure))
