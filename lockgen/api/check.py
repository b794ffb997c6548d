"""Use case `lockgen check`: an environment (a prefix, an interpreter's, or the one inside an image)
compared with what it should hold.

With `--lock` (`check_lock`) that is conformance: every file accounted for by exactly one locked
package's own manifest (RECORD, paths.json) or a named rule, content and mode matching; it works on
environments lockgen did not make, and never trusts a digest stored in the artifact; an image is proven whole
(`image_proof_steps`: the environment its config runs, the config, every file outside it). Without a lock,
a lockgen environment is compared with the manifest it recorded when it was made (drift). What only images
and drift need is imported where they are used: a repeated `check --lock` of a prefix costs about a stat walk.
A prefix's lock in a stack's locks/ may hold local packages: the published ones are proven as always, and each
local one as far as it can be (`conformance_steps._local_proof` says how), each said on a line of its own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lockgen.adapters.lock import kept_inputs, lock_file
from lockgen.api.steps.conformance_steps import conform, kept_conformance, read_bundle, read_manifests
from lockgen.errors import LockgenError, UserError
from lockgen.model.requests import CheckRequest, CheckTarget, Image, Prefix, Python
from lockgen.model.results import Conformance, Drift, ImageDrift

if TYPE_CHECKING:
    from lockgen.api.steps.shared_steps import Meter


def check(
    request: CheckRequest, progress: Callable[[str], None] = lambda _: None, meter: Meter | None = None
) -> Drift | ImageDrift | Conformance:
    """The check the request asks: conformance with its lock, else the drift of a prefix (an interpreter's) or
    an image's environment from what it recorded."""
    target = request.target
    if request.lock is not None:
        return check_lock(
            request.lock,
            target,
            request.manifests,
            request.platform,
            progress,
            meter,
            request.allow_foreign,
            request.full,
        )
    if isinstance(target, Image):
        return check_image(target.source, None, target.insecure, progress, meter)
    return check_prefix(_prefix_of(target), request.full)


def _prefix_of(target: Prefix | Python) -> Path:
    if isinstance(target, Prefix):
        return target.path
    from lockgen.adapters.pypi import python_dists

    return python_dists.prefix_of(target.interpreter)


def check_prefix(prefix: Path, full: bool) -> Drift:
    """Files missing, extra or changed against the manifest; only files whose size or mtime moved are
    re-hashed unless `full`."""
    from lockgen.adapters.conda import conda_meta
    from lockgen.adapters.store import env_manifest
    from lockgen.api.steps.shared_steps import recorded_drift

    if not (prefix / env_manifest.MANIFEST).is_file():
        if (prefix / conda_meta.FOLDER).is_dir():
            return _check_conda_meta(prefix)
        raise UserError(
            f"{prefix} has no lockgen manifest and no conda-meta", "materialize it with lockgen materialize"
        )
    return recorded_drift(prefix, full)


def _check_conda_meta(prefix: Path) -> Drift:
    """Drift of an environment lockgen did not make (say, by `rattler.install` itself), against the
    paths and hashes its conda-meta records list. Files under conda-meta/ and caches are not judged."""
    from lockgen.adapters.conda import conda_meta
    from lockgen.adapters.store import env_manifest

    expected = conda_meta.listed_paths(prefix)
    present = {
        p for p in env_manifest.walk(prefix) if not p.startswith(f"{conda_meta.FOLDER}/") and p != "CACHEDIR.TAG"
    }
    modified = conda_meta.changed_files(prefix, expected, present & expected.keys())
    missing = sorted(p for p in expected.keys() - present if not (prefix / p).is_symlink())
    return Drift(missing, sorted(present - expected.keys()), modified)


def check_image(
    source: str | Path,
    lock: Path | None = None,
    insecure: bool = False,
    progress: Callable[[str], None] = lambda _: None,
    meter: Meter | None = None,
) -> ImageDrift:
    """Unpacks the image (a layout folder or a registry reference) and recomputes the environment digest at
    its prefix. With `lock`, the image must come from exactly that lock."""
    from lockgen.adapters.image import image_source
    from lockgen.adapters.store import env_manifest
    from lockgen.api.steps.image_proof_steps import SBOM_INSIDE, sbom_problems
    from lockgen.api.steps.shared_steps import unsafe_modes
    from lockgen.core.env.drift import manifest_drift

    exported_from = lock_file.read(lock) if lock is not None else None
    with image_source.unpacked(source, progress, insecure, exported_from, meter) as image:
        if (image.prefix / env_manifest.MANIFEST).is_file():  # compared with the files as unpacked: hashed once
            found = manifest_drift(env_manifest.read(image.prefix)[0], image.manifest)
            drift = Drift(
                found.missing, found.extra, found.modified, unsafe_modes(image.prefix)
            )  # the modes as a runtime lands them
        else:
            drift = check_prefix(image.prefix, full=True)
        problems = sbom_problems(source, image.prefix / SBOM_INSIDE, None, image.recorded_environment)
        drift = Drift(drift.missing, drift.extra, sorted(drift.modified + problems), drift.unsafe)
        return ImageDrift(image.recorded_environment, image.environment, drift)


def check_lock(
    lock_path: Path,
    target: CheckTarget,
    manifests: Path | None = None,
    platform: str | None = None,
    progress: Callable[[str], None] = lambda _: None,
    meter: Meter | None = None,
    allow_foreign: Sequence[str] = (),
    full: bool = False,
) -> Conformance:
    """Conformance of one environment, named by its prefix, its interpreter, or an image holding it. An
    environment on disk checked before against the same lock is proven by its files' fingerprints where they
    did not move (`conformance_store`) unless `full`; an image is hashed whole each time. The lock is read once:
    for a prefix its bytes (a kept verdict needs only their sha256; the steps parse them when they work), for an
    image parsed at once."""
    lock, bundle = lock_file.read(lock_path), read_bundle(manifests)
    if not isinstance(target, Image):
        from lockgen.core.stack import stack_layout

        prefix = _prefix_of(target)
        venv_python = target.interpreter if isinstance(target, Python) else str(prefix / "bin" / "python")
        interpreter = (
            venv_python if (prefix / "pyvenv.cfg").is_file() else None
        )  # held to the lock's exact Python, if it names one
        return conform(
            lock,
            prefix,
            platform,
            bundle,
            progress,
            meter,
            allow_foreign=allow_foreign,
            fingerprints=not full,
            interpreter=interpreter,
            local_from=stack_layout.stack_folder_of_lock(lock_path.absolute()),  # where its local packages are
        )
    from lockgen.adapters.lock.lockfile_yaml import parsed
    from lockgen.api.steps.image_proof_steps import prove_image

    loaded = parsed(lock)
    read_manifests(loaded, platform, bundle, progress)  # a lock that cannot be proven: refused before the pull
    return prove_image(
        loaded, target.source, bundle, platform, target.insecure, target.prefix, progress, meter, allow_foreign
    )


def kept_check_lock(
    lock_path: Path, prefix: Path, platform: str | None, progress: Callable[[str], None]
) -> Conformance | None:
    """`check_lock` of the environment at `prefix` (no bundle, nothing allowed, fingerprints trusted) when the
    verdict of its last passing check against the lock's bytes stands: no lock parsed, no model loaded. None,
    having said nothing, otherwise (an unreadable lock too, or kept values turned off: `LOCKGEN_REPARSE`), which
    `check_lock` decides."""
    if not kept_inputs.trusted():
        return None
    try:
        lock = lock_file.read(lock_path)
    except LockgenError:
        return None
    return kept_conformance(lock, prefix, platform, progress)
