"""A step below the use cases (check, verify, materialize, export, manifests): a lock's expected
environment, from the packages' own manifests. Each manifest is found by the hash the lock pins: in a bundle given with
`--manifests`, in `$LOCKGEN_HOME/manifests`, in the conda archive in the package store (fetched and
verified against the lock's hash when missing), or, for a wheel, by range requests on its URL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from lockgen.adapters.proof import manifest_store
from lockgen.adapters.store import file_roots
from lockgen.core.lock import lock_builder
from lockgen.core.env.conformance import ExpectedPackage
from lockgen.core.env.package_identity import require_manifest_of
from lockgen.core.env.expected_env import PLACEMENT_LAYOUT, is_wheel, lock_python, package_expected, placed_of_record
from lockgen.core.env.expected_env import placed_record, wheel_expected
from lockgen.errors import UserError
from lockgen.model.lock import Lock, LockedPackage
from lockgen.model.manifests import PackageManifest


def _pin(package: LockedPackage) -> str:
    return package.hash.sha256 or package.hash.md5 or ""


def _wheel_manifest(package: LockedPackage) -> PackageManifest:
    from lockgen.adapters.pypi import wheel_record  # with its HTTP client: only where no manifest is kept

    if lock_builder.is_check_only(package):
        raise UserError(
            f"{package.name} {package.version} is a check-only entry and its manifest is not here",
            "pass the bundle lockgen pin wrote with --manifests FILE",
        )
    if package.url.startswith("file://"):  # a local wheel: read whole, checked against the lock's hash first
        contents = wheel_record.read_wheel_file(
            file_roots.local_path(package.url, f"{package.name} {package.version}"), _pin(package)
        )
    elif package.url.startswith(("http://", "https://")):
        contents, _ = wheel_record.read_wheel_url(package.url)
    else:
        raise UserError(
            f"no manifest of {package.name} {package.version} ({package.url})",
            "pass --manifests FILE, written by lockgen manifests LOCK on a machine that can read it",
        )
    manifest = wheel_record.wheel_manifest(contents, _pin(package), package.name, package.version, package.url)
    manifest_store.keep(manifest)
    return manifest


def keep_wheel_manifest(package: LockedPackage, wheel: Path) -> None:
    """Keeps the manifest of a locked wheel read from a local copy of it (checked against the lock's sha256 first),
    so nothing needs its URL for it (`lockgen unpack`)."""
    from lockgen.adapters.pypi import wheel_record

    contents = wheel_record.read_wheel_file(
        wheel, _pin(package), unquote(urlsplit(package.url).path.rsplit("/", 1)[-1])
    )
    manifest_store.keep(
        wheel_record.wheel_manifest(contents, _pin(package), package.name, package.version, package.url)
    )


def manifest_of(
    package: LockedPackage, bundle: dict[str, PackageManifest], archive: Path | None = None
) -> tuple[PackageManifest, Callable[[], Path | None]]:
    """The manifest of a locked package, and a way to its verified archive (conda packages; hashed only when
    asked for, since a known manifest rarely needs it). `archive`: one the caller has just verified. A local
    package has no published file to state what it installs: what needs one (an image, a pack, `check --lock`) is
    refused, naming it."""
    lock_builder.refuse_local([package], "proven by check --lock")
    pin = _pin(package)
    known = bundle.get(pin) or manifest_store.cached(pin)
    if known is not None and known.kind in ("conda", "wheel"):  # kept from the file itself: the entry must name it
        require_manifest_of(package, known.name, known.version)
    if package.manager == "conda":
        from lockgen.adapters.store import package_store  # the conda side's (and its HTTP client): not a wheel's

        if known is None:
            from lockgen.adapters import archive_safety
            from lockgen.adapters.conda import conda_package

            archive = archive or package_store.fetch(package)
            # scanned as materialize scans it: an archive writing through its own links may not be the ground of
            # a check (check --lock of an environment another installer made from it passed, naming the link)
            archive_safety.check_archive(archive, f"`{package.name}` {package.version} ({package.url})")
            known = conda_package.read_manifest(archive, package)
            manifest_store.keep(known)
            return known, lambda: archive
        return known, lambda: package_store.in_store(package)
    if known is not None:
        return known, lambda: None
    return _wheel_manifest(package), lambda: None


def placed_wheel(package: LockedPackage, python: str, afresh: bool = False) -> ExpectedPackage:
    """The files a locked wheel places into a venv of Python `X.Y` (prefix-relative, with the sha256 its RECORD
    states): worked out from its manifest once, then kept beside it (`manifest_store.keep_placed`, bound to the
    wheel's sha256, the Python and the placement rules' layout) and read back, which costs a torch 0.05 s
    instead of 0.3 s; `afresh` (materialize --verify) works it out from the manifest again. A kept placement
    must name the locked package, as a kept manifest must."""
    pin = _pin(package)
    kept = (
        None if afresh else placed_of_record(manifest_store.cached_placed(pin, python, PLACEMENT_LAYOUT), pin, python)
    )
    if kept is None:
        manifest = manifest_of(package, {})[0]
        if manifest.kind != "wheel":
            return wheel_expected(manifest, python)
        kept, record = placed_record(manifest, python)
        manifest_store.keep_placed(pin, python, PLACEMENT_LAYOUT, record)
    require_manifest_of(package, kept.name, kept.version)
    return kept.placed


def expected_manifests(
    lock: Lock,
    platform: str,
    bundle: dict[str, PackageManifest],
    progress: Callable[[str], None],
    published_only: bool = False,
) -> list[tuple[PackageManifest, Callable[[], Path | None]]]:
    """The manifest of every locked package of `platform` (read in parallel), with its way to the archive. A local
    package has none (refused, naming it), unless `published_only` leaves the local ones to the caller."""
    packages = [p for p in lock.packages_for(platform) if not (published_only and lock_builder.local_of(p))]
    from concurrent.futures import ThreadPoolExecutor  # with logging: 3 ms a build from kept placements never needs

    with ThreadPoolExecutor(max_workers=16) as pool:
        found = list(pool.map(lambda p: manifest_of(p, bundle), packages))
    progress(f"read the manifests of {len(packages)} locked packages")
    return found


def expected_packages(
    lock: Lock,
    platform: str,
    prefix: str,
    bundle: dict[str, PackageManifest],
    progress: Callable[[str], None],
    published_only: bool = False,
) -> list[ExpectedPackage]:
    """Every locked package of `platform` as the files it puts into an environment at `prefix` (the published ones
    alone with `published_only`: `expected_manifests`)."""
    python = lock_python(lock, platform)
    accepted = lock_builder.accepted_changes(lock, platform)
    found = expected_manifests(lock, platform, bundle, progress, published_only)
    expected = []
    for manifest, archive in found:
        if python is None and manifest.kind == "wheel":  # a check-only entry ("installed") is placed already
            raise UserError(
                "the lock has wheels but names no Python version", "re-create it with lockgen resolve or pin"
            )
        patched = {} if is_wheel(manifest) else _patched(manifest, archive, prefix)
        expected.append(package_expected(manifest, python, accepted, patched))
    return expected


def _patched(manifest: PackageManifest, archive_of: Callable[[], Path | None], prefix: str) -> dict[str, str]:
    """Placeholder files' hashes once patched for `prefix`: computed from the verified archive once, then kept."""
    if not any(f.placeholder for f in manifest.files):
        return {}
    known = manifest_store.cached_patched(manifest.sha256, prefix)
    archive = archive_of() if known is None else None
    if known is None and archive is not None:
        from lockgen.adapters.conda import conda_package

        known = conda_package.patched_digests(archive, manifest, prefix)
        manifest_store.keep_patched(manifest.sha256, prefix, known)
    return known or {}


def bundle_of(lock: Lock, bundle: dict[str, PackageManifest]) -> list[PackageManifest]:
    """The manifests of every package of every platform of the lock (for `lockgen manifests`)."""
    from concurrent.futures import ThreadPoolExecutor  # with logging: 3 ms a build from kept placements never needs

    with ThreadPoolExecutor(max_workers=16) as pool:
        return [m for m, _ in pool.map(lambda p: manifest_of(p, bundle), lock.package)]
