"""Use case `lockgen freeze`: a lock from an existing environment (an NGC image, a hand-made node), so it
can be pinned, checked and certified like one lockgen made.

conda packages come from `conda-meta/*.json` (URL, md5, sha256, depends); Python distributions that
conda did not install come from the inventory probe (`adapters.node.inventory_probe`, the one reader of an
interpreter's installed distributions: run isolated, its dist-info and egg-info folders): those installed from a URL
with
a recorded archive hash (`direct_url.json`, as uv and pip write for `name @ URL`) become pip entries.
A distribution installed from an index keeps no wheel URL or hash, so it cannot be locked: it is an
error listing them, or with `--skip-unpinnable` it is left out and named in the lock's metadata;
`lockgen pin` finds such distributions' wheels on their index instead.

`freeze --inventory OUT` needs no network: it writes what the interpreter can say about its
distributions (names, versions, WHEEL tags, installed RECORDs) and the re-hash of every file those
RECORDs list, for `lockgen pin` to turn into a lock on a connected machine.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lockgen.adapters import home
from lockgen.adapters.conda import conda_meta
from lockgen.adapters.node import inventory_file, inventory_probe
from lockgen.adapters.atomic_files import WRITABLE_HINT, check_writable, write_atomic
from lockgen.adapters.lock.lockfile_yaml import checked_lock_text
from lockgen.core.env.expected_env import python_xy
from lockgen.core.lock.lock_builder import frozen_lock
from lockgen.core.stack.stack_layout import default_lock_path
from lockgen.errors import UserError
from lockgen.model.inventory import InstalledDistribution, NodeInventory
from lockgen.model.lock import Lock, LockedPackage, PackageHash
from lockgen.model.names import normalize


def freeze(
    prefix: Path | None, python: str | None, target: str, out: Path | None, skip_unpinnable: bool
) -> tuple[Path, Lock]:
    if prefix is None and python is None:
        raise UserError("freeze needs --prefix or --python", "name the environment to pin")
    path = out or default_lock_path(target)
    check_writable(path, f"the lock {path}", WRITABLE_HINT, file=True)  # before the environment is read
    platform = home.native_platform("linux-64")
    packages: list[LockedPackage] = []
    if prefix is not None:
        packages += conda_meta.locked_packages(prefix, platform)
        candidate = prefix / "bin" / "python"
        python = python or (str(candidate) if candidate.exists() else None)
    frozen_from = str(prefix or python)
    version: str | None = None
    unpinnable: list[str] = []
    if python is not None:
        found = inventory_probe.probe(Path(python))
        pip, unpinnable = _pip_entries(found.distributions, platform, {normalize(p.name) for p in packages})
        packages += pip
        version = python_xy(found.python)
        if unpinnable and not skip_unpinnable:
            shown = ", ".join(unpinnable[:6]) + (f" and {len(unpinnable) - 6} more" if len(unpinnable) > 6 else "")
            raise UserError(
                f"{len(unpinnable)} distributions keep no wheel hash (installed from an index, or by uv, whose "
                f"direct_url.json records the URL only): {shown}",
                f"lock them from their index: lockgen freeze --python {python} --target {target} (on a node "
                f"without network: --inventory inv.json.gz, then lockgen pin inv.json.gz --target {target} "
                "where there is one), or pass --skip-unpinnable",
            )
    if not packages:
        raise UserError("found nothing to lock", "point --prefix at a conda environment or --python at an interpreter")
    lock = frozen_lock(target, frozen_from, platform, version, unpinnable, packages)
    write_atomic(
        path,
        checked_lock_text(
            lock,
            f"frozen from {lock.metadata.sources[0] if lock.metadata.sources else 'an environment'}",
            "the environment's own package records hold this value: reinstall that package from a published "
            "build and freeze again",
        ),
    )
    return path, lock


def _pip_entries(
    distributions: Sequence[InstalledDistribution], platform: str, conda_names: set[str]
) -> tuple[list[LockedPackage], list[str]]:
    entries, unpinnable = [], []
    for dist in sorted(distributions, key=lambda d: normalize(d.name)):
        name = normalize(dist.name)
        if dist.installer == "conda" or name in conda_names:
            continue
        direct = _direct_url(dist)
        archive = direct.get("archive_info") or {}
        sha256 = (archive.get("hashes") or {}).get("sha256") or (
            archive.get("hash", "").removeprefix("sha256=") or None
        )
        if direct.get("url") and sha256 and not direct.get("dir_info"):
            entries.append(
                LockedPackage(
                    name=name,
                    version=dist.version,
                    manager="pip",
                    platform=platform,
                    url=direct["url"],
                    hash=PackageHash(sha256=sha256),
                )
            )
        else:
            unpinnable.append(f"{name}=={dist.version}")
    return entries, unpinnable


def _direct_url(dist: InstalledDistribution) -> dict[str, Any]:
    """A distribution's `direct_url.json` (PEP 610), or {} when its installer wrote none."""
    try:
        found = json.loads(dist.direct_url) if dist.direct_url else {}
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise UserError(
            f"{dist.key}: its direct_url.json ({dist.dist_info}) is not a JSON object",
            "reinstall the distribution (its installer writes the file again)",
        )
    return found


def write_inventory(python: str, out: Path, progress: Callable[[str], None]) -> NodeInventory:
    """Probes `python` (its distributions, then every RECORD row re-hashed on disk) and writes the inventory."""
    check_writable(out, f"the inventory {out}", WRITABLE_HINT, file=True)  # before the probe re-hashes every file
    document = inventory_probe.node_inventory(Path(python), progress)
    inventory_file.write(out, document)
    return document
