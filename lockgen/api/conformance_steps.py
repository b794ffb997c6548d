"""A step below the use cases (check, verify, export): the conformance of an environment on disk to its
lock, every path accounted for by a locked package's own manifest or a named rule (and, for a lock with
`[image] services`, lockgen's launcher and services.json, checked byte for byte against what the lock states)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from hashlib import sha256
from pathlib import Path

from lockgen.adapters import bytecode_proof, conformance_store, manifest_store, prefix_observer
from lockgen.adapters.lockfile_yaml import load_lock
from lockgen.api.manifest_steps import expected_manifests, expected_packages
from lockgen.api.shared_steps import Meter, lock_platform
from lockgen.core.conformance import ExpectedFile, ExpectedPackage, compare, launcher_targets, pyc_pairs
from lockgen.core.expected_env import expected_digest, lock_python, site_packages_of
from lockgen.core.image_config import service_files
from lockgen.digests import file_digest
from lockgen.errors import UserError
from lockgen.model.oci import LOCK_INSIDE
from lockgen.model.results import Conformance

ALLOWED_FOREIGN = "allowed foreign files"
SERVICES_PACKAGE = "lockgen [image] services"  # the service launcher and services.json, checked against the lock
CARRIED_LOCK = "the image's own lock"  # .lockgen/lock.conda-lock.yml, which must be the lock checked against


def read_manifests(lock_path: Path, platform: str | None, manifests: Path | None, progress: Callable[[str], None]) -> None:
    """Every locked package's manifest read (and kept), each checked against the hash the lock pins: run before
    an image is pulled and unpacked, a lock whose packages cannot be proven is refused before that work, and
    `conform` then finds each manifest kept."""
    lock = load_lock(lock_path)
    bundle = manifest_store.read_bundle(manifests) if manifests else {}
    chosen = lock_platform(lock, platform)
    expected_manifests(lock, chosen, bundle, lambda _: None)  # said once, here; conform's own read finds them kept
    progress(f"the manifests of the lock's {len(lock.packages_for(chosen))} packages are at hand (each checked against "
             "its pinned hash)")


def conform(lock_path: Path, prefix: Path, platform: str | None, manifests: Path | None, progress: Callable[[str], None],
            meter: Meter | None = None, final_prefix: str | None = None, allow_foreign: Sequence[str] = (),
            carried_lock: bool = True, fingerprints: bool = False) -> Conformance:
    """The conformance of the environment at `prefix` (installed for `final_prefix`, default `prefix`).
    `allow_foreign` names files no package states that the caller accepts (a site's CA hook, a venv seed):
    they are hashed and recorded, and their byte code counts as theirs. `fingerprints`: files whose
    fingerprint is what an earlier check of this environment and lock kept are not read again
    (`conformance_store`; for an environment that stays, not an image unpacked for one check)."""
    lock = load_lock(lock_path)
    chosen = lock_platform(lock, platform)
    if not prefix.is_dir():
        raise UserError(f"{prefix} is not a folder", "pass the environment's prefix (the folder holding bin/ and lib/)")
    bundle = manifest_store.read_bundle(manifests) if manifests else {}
    expected = expected_packages(lock, chosen, final_prefix or str(prefix), bundle, progress)
    allowed = sorted(set(allow_foreign))
    services = {path: sha256(data).hexdigest() for path, data in service_files(lock).items()}
    # `carried_lock` false: an export about to write its own (re-adopting a lockgen image under a new lock)
    carried = {LOCK_INSIDE: file_digest(lock_path)} if carried_lock and (prefix / LOCK_INSIDE).is_file() else {}
    wanted = {f.path for p in expected for f in p.files if f.sha256 is not None} | set(allowed) | set(services) | set(carried)
    lock_sha256 = file_digest(lock_path)
    kept = conformance_store.load(prefix, lock_sha256) if fingerprints else {}
    proofs = dict(kept) if fingerprints else None
    progress(f"hashing the {len(wanted)} files the packages state in {prefix}"
             + (f" (those whose fingerprint moved since the last check: {len(kept)} kept)" if kept else ""))
    observed = prefix_observer.observe(prefix, wanted, meter, read_these=launcher_targets(expected).keys(), proofs=proofs)
    if proofs is not None and proofs != kept:
        conformance_store.save(prefix, lock_sha256, proofs)
    found = {o.path: o.sha256 for o in observed}
    hook = [ExpectedPackage(ALLOWED_FOREIGN, tuple(ExpectedFile(path, found[path], None) for path in allowed if path in found))] if allowed else []
    # `[image] services`: the launcher and services.json an image holds are the lock's, byte for byte
    hook += [ExpectedPackage(SERVICES_PACKAGE, tuple(ExpectedFile(p, d, None) for p, d in services.items()))] if services else []
    # the lock an image carries (a team stack's `extends` reads it) must be this lock, byte for byte
    hook += [ExpectedPackage(CARRIED_LOCK, tuple(ExpectedFile(p, d, None) for p, d in carried.items()))] if carried else []
    python = lock_python(lock, chosen)
    unproven = bytecode_proof.unproven(prefix, pyc_pairs(expected, observed), progress,
                                       {o.path: o.sha256 for o in observed if o.sha256})  # the sources: just hashed
    report = compare(expected + hook, observed, site_packages_of(python) if python else "", final_prefix or str(prefix),
                     unproven)
    by_path_only = sum(1 for p in expected for f in p.files if f.kind == "file" and f.sha256 is None)
    return Conformance(lock_sha256, chosen, str(prefix), expected_digest(expected), report,
                       allowed={path: found.get(path) for path in allowed}, by_path_only=by_path_only)
