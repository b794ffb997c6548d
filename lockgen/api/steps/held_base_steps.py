"""A step below export: what a team lock's export takes from its base image instead of building it.

A team lock held to a base lock (`[stack] extends`) exported on lockgen's image of that very base lock
(same prefix) is the base's layers, unchanged, plus the team's packages. The held packages are then
neither fetched, linked nor hashed again: the team environment is the base environment as its image
records it plus the team's packages, built for real. What is taken from the base image, and how it is
held to account before use:
- its recorded environment manifest (`.lockgen/manifest.json` in its layers): its digest must be the
  image's environment label, and it must name the base lock the team lock was held to, at this prefix;
- each held package's conda-meta record (read from its layer): its digest must be the manifest's entry;
- each held package whose own manifest is known here (`$LOCKGEN_HOME/manifests`, filled by any earlier
  materialize, check or export of it): every file it states with a hash must have that hash in the
  base's manifest. The rest are as the base image records them, which `lockgen check --image OUT --lock
  LOCK` proves file by file against the packages' own hashes (said in the progress line).
When the team adds PyPI packages, they install with the base's Python: the base's conda python and the
packages it needs to run (its dependency closure in the base lock, a few tens of MB beside the
gigabytes of CUDA libraries) are linked again from their verified archives, and their files, proven
as any linked package's, stand in the manifest for the base's record of them. On a base that is a Python
environment (only pip packages: a venv lockgen exported, or one adopted by `pin` and exported with
`--from-prefix`), the team's wheels are installed alone, in a scratch venv of the same Python, and go into
the base's prefix. A conda base without a conda python is built whole, only the layers shared."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from lockgen.adapters.conda import conda_meta
from lockgen.adapters.proof import manifest_store
from lockgen.adapters.store import env_manifest
from lockgen.adapters.image import layer_members
from lockgen.adapters.image.layer_members import LayerOpener
from lockgen.api.steps import team_steps
from lockgen.core.lock import lock_builder
from lockgen.core.env.expected_env import is_wheel, lock_python, package_expected, site_packages_of
from lockgen.core.image.image_config import service_files
from lockgen.core.lock.lock_builder import LockgenMeta
from lockgen.core.stack.team import HeldEnvironment, package_key, python_closure, same_builds
from lockgen.model.names import shown
from lockgen.errors import LockFormatError, UserError
from lockgen.model.environment_record import EnvironmentManifest, ManifestEntry
from lockgen.model.oci_documents import OciConfig, OciManifest
from lockgen.model.lock import Lock
from lockgen.model.oci import ENVIRONMENT_LABEL, LOCK_LABEL, PREFIX_LABEL, SERVICE_LAUNCHER

_RECORDS = f"{conda_meta.FOLDER}/"


def held_packages(
    lock: Lock,
    lock_path: Path | None,
    platform: str,
    base_config: OciConfig,
    prefix: str,
    progress: Callable[[str], None],
) -> tuple[Lock | None, frozenset[str]]:
    """(the base lock, the packages it holds) when the base image is lockgen's image of the base lock `lock`
    was held to, at the same prefix: their layers are the base's, reused byte for byte. (None, empty) for a
    base with no lockgen environment at `prefix`; a lockgen image of any other lock there is refused: its
    files would stay under ours."""
    labels = (base_config.get("config") or {}).get("Labels") or {}
    if labels.get(PREFIX_LABEL) != prefix or not labels.get(LOCK_LABEL):
        return None, frozenset()
    held_to = LockgenMeta(lock).base_lock
    if labels[LOCK_LABEL] != held_to or lock_path is None:
        raise UserError(
            f"the base image is lockgen's image of lock {labels[LOCK_LABEL][:16]}… at {prefix}, "
            + (f"not of this team lock's base ({held_to[:16]}…)" if held_to else "and this lock extends no base"),
            "pass the image of the lock's own base stack, or a base without an environment at that prefix",
        )
    if any(LockgenMeta(lock).base_moved(p) for p in lock.metadata.platforms):
        raise UserError(
            "this team lock moved base packages (override), so its image cannot be the base's layers plus its own",
            "export it without --base, or on a base image of a base that holds what the team needs",
        )
    read = team_steps.held_base(lock_path, lock)
    if read is None or read.sha256 != held_to:
        raise UserError(
            f"the base lock this team lock was held to is not at {team_steps.held_base_path(lock_path, lock)} any more",
            "resolve the team stack again, or export on the image of the base lock it names",
        )
    base_lock = read.lock
    same_builds(lock, base_lock, platform)
    refuse_leftover_services(lock, base_config, prefix)
    held = frozenset(package_key(p) for p in base_lock.packages_for(platform))
    progress(f"the base image is this team lock's base: its {len(held)} packages' layers are reused as they are")
    return base_lock, held


def refuse_leftover_services(lock: Lock, base_config: OciConfig, prefix: str) -> None:
    """Refuses a team lock without `[image] services` on a base image that runs them: the base's launcher and
    services.json would stay under the team's layers (lockgen's layers delete nothing), files the team lock
    does not state."""
    entrypoint = (base_config.get("config") or {}).get("Entrypoint")
    runs_launcher = isinstance(entrypoint, list) and entrypoint[-1:] == [f"{prefix}/{SERVICE_LAUNCHER}"]
    if runs_launcher and not service_files(lock):
        raise UserError(
            "the base image runs [image] services and this team lock states none: the base's service launcher "
            "would stay in the team image",
            "state the base's services in the team stack's [image] (a team on a base stack.toml takes them when "
            "it states no [image]), or export without --base",
        )


def held_environment(
    lock: Lock,
    base_lock: Lock,
    held: frozenset[str],
    platform: str,
    open_layer: LayerOpener,
    base_manifest: OciManifest,
    base_config: OciConfig,
    prefix: str,
    progress: Callable[[str], None],
) -> HeldEnvironment | None:
    """The base environment a team export builds on, read from the base image and checked (module
    docstring); None when the team adds wheels and the base's Python is no conda package (built whole then)."""
    own = [p for p in lock.packages_for(platform) if package_key(p) not in held]
    relinked: frozenset[str] = frozenset()
    python_environment = all(p.manager == "pip" for p in (*base_lock.packages_for(platform), *own))  # wheels only
    if any(p.manager == "pip" for p in own) and python_environment:
        progress(
            f"the base is a Python environment: the team's {len(own)} packages are installed alone, into its prefix"
        )
    elif any(p.manager == "pip" for p in own):
        relinked = python_closure(base_lock, platform)
        if not relinked:
            progress(
                "the team adds PyPI packages and the base's Python is no conda package: building the whole environment"
            )
            return None
        progress(
            f"the team adds PyPI packages: the base's Python and the {len(relinked) - 1} packages it needs are "
            "linked again to install them"
        )
    found = layer_members.environment_record(
        open_layer, base_manifest["layers"], prefix, records=not python_environment
    )
    recorded = _recorded_manifest(found, base_config, platform, prefix)
    entries = {entry["path"]: entry for entry in recorded["files"]}
    site = site_packages_of(lock_python(base_lock, platform) or "")
    if python_environment and not any(path.startswith(f"{site}/") for path in entries):
        raise UserError(
            f"the base's Python environment keeps no packages in {site} under {prefix}",
            "lockgen adds a team's wheels to a prefix laid out as a venv (lib/pythonX.Y/site-packages); export "
            "the team stack without --base",
        )
    records = {path: data for path, data in found.items() if conda_meta.is_record(path)}
    for package in base_lock.packages_for(platform):
        path = f"{_RECORDS}{package_key(package)}.json"
        if package.manager == "conda" and path not in records:
            raise LockFormatError(
                f"the base image has no conda-meta record of its package {package.name} {package.version}",
                "pass the base stack's own lockgen image, exported again if it was changed",
            )
    for path, data in records.items():
        digest = entries[path].get("sha256") if path in entries else None
        if digest != env_manifest.content_digest(path, data):
            raise LockFormatError(
                f"the base image's {path} is not what its environment manifest records",
                "the base image was changed: export or pull it again",
            )
    proven = _proven(base_lock, platform, prefix, entries)
    progress(
        f"the base's {len(entries)} files are taken as its image records them ({proven} of "
        f"{len(base_lock.packages_for(platform))} packages also proven against their own manifests here); "
        "check --image --lock proves every file"
    )
    return HeldEnvironment(held, records, entries, relinked)


def _recorded_manifest(
    found: dict[str, bytes], base_config: OciConfig, platform: str, prefix: str
) -> EnvironmentManifest:
    """The base image's environment manifest, held to its image's label and the base lock."""
    labels = (base_config.get("config") or {}).get("Labels") or {}
    try:
        recorded = json.loads(found[env_manifest.MANIFEST])
        files = recorded["files"]
        digest = env_manifest.digest({"format": recorded["format"], "files": files})
    except (KeyError, ValueError, TypeError, RecursionError):
        raise LockFormatError(
            "the base image holds no readable environment manifest",
            "pass the base stack's own lockgen image, exported again",
        ) from None
    broken = env_manifest.not_a_manifest(recorded)  # the label binds its bytes, not its shape: its maker chose both
    if broken is not None:
        raise LockFormatError(
            f"the base image's environment manifest is {shown(broken, 300)}",
            "pass the base stack's own lockgen image, exported again",
        )
    if f"sha256:{digest}" != labels.get(ENVIRONMENT_LABEL) or recorded.get("environment_digest") != digest:
        raise LockFormatError(
            f"the base image's environment manifest ({digest[:19]}…) is not the environment its label names",
            "the base image was changed: export or pull it again",
        )
    if (
        recorded.get("prefix") != prefix
        or recorded.get("platform") != platform
        or recorded.get("lock_sha256") != labels.get(LOCK_LABEL)
    ):
        raise LockFormatError(
            "the base image's environment manifest is of another lock, platform or prefix",
            "the base image was changed: export or pull it again",
        )
    return recorded


def _proven(base_lock: Lock, platform: str, prefix: str, entries: dict[str, ManifestEntry]) -> int:
    """How many held packages' own manifests (those known here) agree with the base's manifest, file by
    file; a disagreement is a changed base image."""
    python, proven = lock_python(base_lock, platform), 0
    accepted = lock_builder.accepted_changes(base_lock, platform)
    for package in base_lock.packages_for(platform):
        manifest = manifest_store.cached(package.hash.sha256 or package.hash.md5 or "")
        if manifest is None or (manifest.kind == "wheel" and python is None):
            continue
        patched = {} if is_wheel(manifest) else manifest_store.cached_patched(manifest.sha256, prefix) or {}
        expected = package_expected(manifest, python, accepted, patched)
        for file in expected.files:
            recorded = entries[file.path].get("sha256") if file.path in entries else None
            if file.kind == "file" and file.sha256 and env_manifest.covered(file.path) and recorded != file.sha256:
                raise LockFormatError(
                    f"the base image records {file.path} of {expected.key} as {str(recorded)[:12]}…, "
                    f"the package states {file.sha256[:12]}…",
                    "the base image was changed: export or pull it again",
                )
        proven += 1
    return proven
