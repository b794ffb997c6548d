"""`lockgen materialize`, `check`, `envs`, `gc`, `freeze`, `pin` and `manifests`: a lock becomes an environment; an
environment is checked for drift, listed, collected, frozen into a lock. (`export` and `push`: `image_cmds`.)"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from lockgen.cli.terminal import print_conforming, said_read
from lockgen.cli.ui import fail, handles_errors, print_environment, print_json, progress, say

if TYPE_CHECKING:  # imported where a command renders them: a repeated materialize loads none (20 ms)
    from lockgen.model.results import Conformance, Drift, ImageDrift

DIFFERENCES = ("modified", "missing", "missing_packages", "foreign", "mode", "clobbered")


@handles_errors
def materialize(
    lock: Path = typer.Argument(..., help="A lock written by lockgen resolve (or import)."),
    platform: Optional[str] = typer.Option(
        None, "--platform", "-p", help="Which platform of the lock (default: this host's)."
    ),
    prefix: Optional[Path] = typer.Option(
        None, "--prefix", help="Where (default: $LOCKGEN_HOME/envs/<lock digest>-<name>)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print {prefix, environment_digest, lock} as JSON."),
    allow_md5: bool = typer.Option(
        False,
        "--allow-md5",
        help="Install conda entries the lock pins by md5 alone (refused by default: md5 is no proof of content).",
    ),
    verify: bool = typer.Option(
        False,
        "--verify",
        help="Hash every installed wheel file against its RECORD, trusting no fingerprint of lockgen's wheel store.",
    ),
) -> None:
    """Install exactly the lock's packages, hash-checked, atomically; print the prefix."""
    from lockgen.api.materialize import materialize as run
    from lockgen.cli.ui import Meter

    with Meter() as meter:
        path, digest = run(lock, platform, prefix, progress, meter, allow_md5, verify)
    print_environment(path, digest, as_json, {"lock": str(lock)})


@handles_errors
def check(
    prefix: Optional[Path] = typer.Option(None, "--prefix", help="An environment's folder."),
    python: Optional[str] = typer.Option(
        None, "--python", help="With --lock: an interpreter, whose environment is checked."
    ),
    image: Optional[str] = typer.Option(None, "--image", help="An OCI layout, or docker://REF."),
    lock: Optional[Path] = typer.Option(
        None, "--lock", help="Prove the environment is this lock, from the packages' own hashes."
    ),
    manifests: Optional[Path] = typer.Option(
        None, "--manifests", help="With --lock: a bundle from lockgen manifests (no network)."
    ),
    platform: Optional[str] = typer.Option(None, "--platform", "-p", help="With --lock: which platform of the lock."),
    image_prefix: Optional[str] = typer.Option(
        None,
        "--image-prefix",
        help="With --image --lock: where the environment is; it must be the one the image's config runs "
        "(CONDA_PREFIX).",
    ),
    insecure: bool = typer.Option(
        False, "--insecure", help="With --image docker://REF: plain HTTP or a self-signed registry."
    ),
    full: bool = typer.Option(
        False,
        "--full",
        help="Re-hash every file, not only those whose fingerprint (size, mtime, ctime, inode) changed since lockgen "
        "recorded or last checked it.",
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the report as JSON (with --lock: the conformance report)."
    ),
    allow_foreign: list[str] = typer.Option(
        [],
        "--allow-foreign",
        help="With --lock: a file no package states that you accept (prefix-relative); hashed and reported. "
        "Repeatable.",
    ),
) -> None:
    """Check an environment: with --lock, against the lock's packages (exit 1 on any difference); else
    against the manifest lockgen recorded."""
    from lockgen.api.check import check as run
    from lockgen.cli.ui import Meter, environment
    from lockgen.model.requests import CheckRequest

    if lock is not None:
        refusal = (
            "check --lock needs exactly one of --prefix, --python and --image",
            "lockgen check --lock L --prefix DIR (or --python PY, or --image LAYOUT|docker://REF)",
            1,
        )
    elif python is not None or manifests is not None:
        fail("--python and --manifests need --lock", "lockgen check --lock L --python PY", 2)
    else:
        refusal = (
            "pass exactly one of --prefix and --image",
            "lockgen check --prefix DIR, or lockgen check --lock L --image LAYOUT",
            2,
        )
    target = environment(prefix, python, image, refusal, required=True, insecure=insecure, image_prefix=image_prefix)
    assert target is not None  # required: none has failed
    request = CheckRequest(target, lock, manifests, platform, tuple(allow_foreign), full)
    from lockgen.model.results import Conformance, ImageDrift

    with Meter() as meter:
        result = run(request, progress, meter)
    if isinstance(result, Conformance):
        _render_conformance(result, lock, as_json, image is not None)
    elif isinstance(result, ImageDrift):
        _render_image_drift(result, str(image), as_json)
    else:
        _render_drift(result, prefix, full, as_json)


def _render_image_drift(result: ImageDrift, image: str, as_json: bool) -> None:
    recorded, recomputed, drift = result.recorded, result.recomputed, result.drift
    if as_json:
        print_json(
            {
                "image": image,
                "recorded_environment": recorded,
                "recomputed_environment": recomputed,
                "clean": result.clean,
                **_drift_dict(drift),
            }
        )
    else:
        say(f"environment digest sha256:{recomputed}")
        for kind, paths in _drift_dict(drift).items():
            for path in paths:
                say(f"{kind} {path}")
    if not result.clean:
        counted = ", ".join(f"{len(paths)} {kind}" for kind, paths in _drift_dict(drift).items() if paths)
        fail(
            f"the image's environment (sha256:{recomputed[:16]}) differs from what it records (sha256:{recorded[:16]})"
            + (f": {counted}" if counted else ""),
            "re-export it from its lock",
        )
    progress(f"{image}: the environment matches the manifest the image records (pass --lock to prove it is a lock)")


def _render_drift(drift: Drift, prefix: Optional[Path], full: bool, as_json: bool) -> None:
    if as_json:
        print_json(
            {
                "prefix": str(prefix),
                "full": full,
                "clean": drift.clean,
                "read_every_byte": drift.read_every_byte,
                **_drift_dict(drift),
            }
        )
    else:
        for kind, paths in _drift_dict(drift).items():
            for path in paths:
                say(f"{kind} {path}")
    said_read(prefix, drift.read_every_byte)
    if not drift.clean:
        fail(
            f"{prefix} drifted from its lock: {len(drift.missing)} missing, {len(drift.extra)} extra, "
            f"{len(drift.modified)} modified files"
            + (f", {len(drift.unsafe)} with unsafe modes" if drift.unsafe else ""),
            "materialize the lock again into a fresh prefix",
        )
    progress(f"{prefix} matches its manifest")


def _drift_dict(drift: Drift) -> dict[str, list[str]]:
    return {kind: list(getattr(drift, kind)) for kind in ("missing", "extra", "modified", "unsafe")}


def _render_conformance(result: Conformance, lock: Optional[Path], as_json: bool, image: bool) -> None:
    if as_json:
        print_json(result.to_dict())
    else:
        for line in result.lines():
            say(line)
    counts = result.report.counts
    said_read(result.where, result.read_every_byte)
    if not result.clean:
        shown = ", ".join(f"{counts[k]} {k.replace('_', ' ')}" for k in DIFFERENCES if counts.get(k))
        problems = list(result.problems[:1]) + [f"and {len(result.problems) - 1} more"] * (len(result.problems) > 1)
        fail(
            f"{result.where} is not the environment of {lock}: " + "; ".join(([shown] if shown else []) + problems),
            "re-export the image from the lock (lockgen export LOCK) and run it as exported"
            if problems and not shown and image
            else "materialize the lock into a fresh prefix (lock it again first where a local package's folder"
            " changed: lockgen resolve), or re-pin the environment",
        )
    print_conforming(result, lock)


@handles_errors
def manifests(
    lock: Path = typer.Argument(..., help="A lock."),
    out: Path = typer.Option(..., "--out", "-o", help="The bundle to write (.json, or .json.gz)."),
    known: Optional[Path] = typer.Option(
        None,
        "--manifests",
        help="A bundle to take manifests from (the one pin wrote, for check-only entries: a team lock on an adopted "
        "base).",
    ),
) -> None:
    """Write the manifests of every package of a lock (RECORDs, paths.json), for check --manifests offline."""
    from lockgen.api.manifests import write_manifests

    count = write_manifests(lock, out, progress, known)
    progress(f"{count} package manifests")
    say(out)


@handles_errors
def envs(as_json: bool = typer.Option(False, "--json", help="Print the list as JSON.")) -> None:
    """List the environments in the store ($LOCKGEN_HOME/envs)."""
    from lockgen.api.store import list_envs

    found = list_envs()
    if as_json:
        print_json(
            [
                {
                    "prefix": str(e.path),
                    "environment_digest": e.environment_digest,
                    "lock_sha256": e.lock_sha256,
                    "platform": e.platform,
                }
                for e in found
            ]
        )
        return
    if not found:
        progress("no environments in the store yet (lockgen materialize LOCK makes one)")
    for entry in found:
        say(
            f"{entry.path}  env sha256:{entry.environment_digest[:16]}  lock sha256:{entry.lock_sha256[:16]}  "
            f"{entry.platform}"
        )


@handles_errors
def gc(
    roots: list[Path] = typer.Argument(
        ..., help="Locks, or folders searched for *.conda-lock.yml, whose environments stay."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only print what would be removed."),
) -> None:
    """Remove store environments that none of the given locks refers to."""
    from lockgen.api.store import gc as run

    for path in run(roots, dry_run):
        say(path)


@handles_errors
def freeze(
    prefix: Optional[Path] = typer.Option(
        None, "--prefix", metavar="DIR", help="A conda environment (conda-meta) to pin."
    ),
    python: Optional[str] = typer.Option(
        None,
        "--python",
        metavar="PY",
        help="An interpreter whose installed distributions to pin: inventoried and found on --index in one step.",
    ),
    target: Optional[str] = typer.Option(
        None, "--target", "-t", metavar="NAME", help="Name of the lock: locks/<NAME>.conda-lock.yml."
    ),
    out: Optional[Path] = typer.Option(
        None, "--out", "-o", metavar="FILE", help="Write here instead of locks/<NAME>.conda-lock.yml."
    ),
    skip_unpinnable: bool = typer.Option(
        False,
        "--skip-unpinnable",
        help="Lock only what the environment records a wheel URL and hash of (no index asked); leave out the rest.",
    ),
    inventory: Optional[Path] = typer.Option(
        None,
        "--inventory",
        metavar="FILE",
        help="With --python: write the node's inventory here (no network) for `lockgen pin` on a connected machine.",
    ),
    index: str = typer.Option(
        "https://pypi.org/simple",
        "--index",
        metavar="URL",
        help="With --python: the index the distributions came from (PEP 691).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print what was written as JSON on stdout."),
) -> None:
    """Write a lock from an existing environment, or (--inventory) what `lockgen pin` needs to write one."""
    if inventory is not None:
        from lockgen.api.freeze import write_inventory

        if python is None or prefix is not None or target is not None:
            fail("--inventory takes --python only", "lockgen freeze --python PY --inventory OUT", 2)
        document = write_inventory(python, inventory, progress)
        _written(
            {"inventory": str(inventory), "distributions": len(document.inventory.distributions)}, inventory, as_json
        )
        return
    if target is None:
        fail("freeze needs --target NAME", "lockgen freeze --python PY --target NAME", 2)
    if python is not None and prefix is None and not skip_unpinnable:
        from lockgen.api.pin import pin_python

        pinned = pin_python(python, target, out, index, False, (), progress)
        path, bundle, lock = pinned.path, pinned.manifests, pinned.lock
    else:
        from lockgen.api.freeze import freeze as run

        (path, lock), bundle = run(prefix, python, target, out, skip_unpinnable), None
    progress(f"pinned {len(lock.package)} packages")
    _written(
        {
            "lock": str(path),
            "target": target,
            "packages": len(lock.package),
            "manifests": str(bundle) if bundle else None,
        },
        path,
        as_json,
    )


def _written(document: dict, path: Path, as_json: bool) -> None:
    """What a command wrote: its JSON document, or the path alone."""
    if as_json:
        print_json(document)
    else:
        say(path)


@handles_errors
def pin(
    inventory: Path = typer.Argument(
        ..., help="The file `lockgen freeze --python PY --inventory OUT` wrote on the node."
    ),
    target: str = typer.Option(..., "--target", "-t", help="Name of the lock: locks/<NAME>.conda-lock.yml."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write here instead of locks/<NAME>.conda-lock.yml."),
    index: str = typer.Option(
        "https://pypi.org/simple", "--index", help="The index the distributions came from (PEP 691)."
    ),
    allow_unpublished: bool = typer.Option(
        False, "--allow-unpublished", help="Keep distributions no index has as check-only entries."
    ),
    accept_changed: list[str] = typer.Option(
        [],
        "--accept-changed",
        help="A file (prefix-relative) that differs from its package on purpose; the lock records the hash found. "
        "Repeatable.",
    ),
) -> None:
    """Write a lock from a node's inventory: every distribution at its index wheel, checked against its RECORD."""
    from lockgen.api.pin import pin as run

    pinned = run(inventory, target, out, index, allow_unpublished, accept_changed, progress)
    progress(f"manifests for check --manifests: {pinned.manifests}")
    say(pinned.path)
