"""A step below the use cases (check, verify, export, manifests): a lock's expected environment, from
the packages' own manifests, and the conformance of an environment on disk to it. Each manifest is found by the hash the lock pins: in a bundle given with
`--manifests`, in `$LOCKGEN_HOME/manifests`, in the conda archive in the package store (fetched and
verified against the lock's hash when missing), or, for a wheel, by range requests on its URL."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lockgen.adapters import conda_package, manifest_store, package_store, prefix_observer, wheel_record
from lockgen.adapters.lockfile_yaml import load_lock
from lockgen.api.shared_steps import Meter, lock_platform
from lockgen.core import lock_builder
from lockgen.core.conformance import ExpectedFile, ExpectedPackage, compare
from lockgen.core.expected_env import conda_expected, expected_digest, site_packages_of, wheel_expected
from lockgen.digests import file_digest
from lockgen.errors import UserError
from lockgen.model.lock import Lock, LockedPackage
from lockgen.model.manifests import ManifestFile, PackageManifest
from lockgen.model.names import normalize
from lockgen.model.results import Conformance

ALLOWED_FOREIGN = "allowed foreign files"


def lock_python(lock: Lock, platform: str) -> str | None:
    """The Python `X.Y` of a lock on a platform: its conda python, else the version the lock records."""
    conda_python = next((p.version for p in lock.packages_for(platform) if p.manager == "conda" and p.name == "python"), None)
    version = conda_python or lock.meta(f"python.{platform}") or None
    return ".".join(version.split(".")[:2]) if version else None


def _pin(package: LockedPackage) -> str:
    return package.hash.sha256 or package.hash.md5 or ""


def _wheel_manifest(package: LockedPackage) -> PackageManifest:
    if package.url.startswith(lock_builder.UNPUBLISHED_SCHEME):
        raise UserError(f"{package.name} {package.version} is a check-only entry and its manifest is not here",
                        "pass the bundle lockgen pin wrote with --manifests FILE")
    if not package.url.startswith(("http://", "https://")):
        raise UserError(f"no manifest of {package.name} {package.version} ({package.url})",
                        "pass --manifests FILE, written by lockgen manifests LOCK on a machine that can read it")
    contents, _ = wheel_record.read_wheel_url(package.url)
    manifest = PackageManifest(sha256=_pin(package), name=normalize(package.name), version=package.version, kind="wheel",
                               files=tuple(ManifestFile(path=r.path, sha256=r.sha256, size=r.size) for r in contents.record),
                               dist_info=contents.dist_info, scripts=tuple(s.name for s in contents.scripts),
                               source=package.url)
    manifest_store.keep(manifest)
    return manifest


def manifest_of(package: LockedPackage, bundle: dict[str, PackageManifest]) -> tuple[PackageManifest, Path | None]:
    """The manifest of a locked package, and its verified archive when it is a conda package."""
    pin = _pin(package)
    known = bundle.get(pin) or manifest_store.cached(pin)
    if package.manager == "conda":  # the archive, when here, also gives placeholder files their patched hash
        archive = package_store.in_store(package)
        if known is None:
            archive = archive or package_store.fetch(package)
            known = conda_package.read_manifest(archive, package)
            manifest_store.keep(known)
        return known, archive
    if known is not None:
        return known, None
    return _wheel_manifest(package), None


def expected_packages(lock: Lock, platform: str, prefix: str, bundle: dict[str, PackageManifest],
                      progress: Callable[[str], None]) -> list[ExpectedPackage]:
    """Every locked package of `platform` as the files it puts into an environment at `prefix`."""
    python = lock_python(lock, platform)
    accepted = lock_builder.accepted_changes(lock, platform)
    packages = lock.packages_for(platform)
    with ThreadPoolExecutor(max_workers=16) as pool:
        found = list(pool.map(lambda p: manifest_of(p, bundle), packages))
    progress(f"read the manifests of {len(packages)} locked packages")
    expected = []
    for manifest, archive in found:
        if manifest.kind == "wheel":
            if python is None:
                raise UserError("the lock has wheels but names no Python version", "re-create it with lockgen resolve or pin")
            expected.append(wheel_expected(manifest, python, accepted))
        else:
            patched = conda_package.patched_digests(archive, manifest, prefix) if archive is not None else {}
            expected.append(conda_expected(manifest, python, patched, accepted))
    return expected


def bundle_of(lock: Lock, bundle: dict[str, PackageManifest]) -> list[PackageManifest]:
    """The manifests of every package of every platform of the lock (for `lockgen manifests`)."""
    with ThreadPoolExecutor(max_workers=16) as pool:
        return [m for m, _ in pool.map(lambda p: manifest_of(p, bundle), lock.package)]


def conform(lock_path: Path, prefix: Path, platform: str | None, manifests: Path | None, progress: Callable[[str], None],
            meter: Meter | None = None, final_prefix: str | None = None, allow_foreign: Sequence[str] = ()) -> Conformance:
    """The conformance of the environment at `prefix` (installed for `final_prefix`, default `prefix`).
    `allow_foreign` names files no package states that the caller accepts (a site's CA hook, a venv seed):
    they are hashed and recorded, and their byte code counts as theirs."""
    lock = load_lock(lock_path)
    chosen = lock_platform(lock, platform)
    if not prefix.is_dir():
        raise UserError(f"{prefix} is not a folder", "pass the environment's prefix (the folder holding bin/ and lib/)")
    bundle = manifest_store.read_bundle(manifests) if manifests else {}
    expected = expected_packages(lock, chosen, final_prefix or str(prefix), bundle, progress)
    allowed = sorted(set(allow_foreign))
    wanted = {f.path for p in expected for f in p.files if f.sha256 is not None} | set(allowed)
    progress(f"hashing the {len(wanted)} files the packages state in {prefix}")
    observed = prefix_observer.observe(prefix, wanted, meter)
    found = {o.path: o.sha256 for o in observed}
    hook = [ExpectedPackage(ALLOWED_FOREIGN, tuple(ExpectedFile(path, found[path], None) for path in allowed if path in found))] if allowed else []
    python = lock_python(lock, chosen)
    report = compare(expected + hook, observed, site_packages_of(python) if python else "")
    return Conformance(file_digest(lock_path), chosen, str(prefix), expected_digest(expected), report,
                       allowed={path: found.get(path) for path in allowed})
