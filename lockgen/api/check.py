"""Use case `lockgen check`: an environment (a prefix, an interpreter's, or the one inside an image)
compared with what it should hold.

With `--lock` (`check_lock`) that is conformance: every file accounted for by exactly one locked
package's own manifest (RECORD, paths.json) or a named rule, content and mode matching; it works on
environments lockgen did not make, and never trusts a digest stored in the artifact. Without a lock,
a lockgen environment is compared with the manifest it recorded when it was made (drift)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from lockgen.adapters import conda_meta, env_manifest, image_source, python_dists
from lockgen.api.conformance_steps import conform, read_manifests
from lockgen.api.shared_steps import Meter, recorded_drift
from lockgen.adapters.lockfile_yaml import load_lock
from lockgen.core.drift import manifest_drift
from lockgen.core.sbom import cyclonedx
from lockgen.digests import canonical_json, file_digest
from lockgen.errors import UserError
from lockgen.model.oci import ENVIRONMENT_LABEL, IMAGE_PREFIX, PREFIX_LABEL
from lockgen.model.results import Conformance, Drift

ROOT_USERS = ("", "0", "0:0", "root", "root:root")


def check_prefix(prefix: Path, full: bool) -> Drift:
    """Files missing, extra or changed against the manifest; only files whose size or mtime moved are
    re-hashed unless `full`."""
    if not (prefix / env_manifest.MANIFEST).is_file():
        if (prefix / conda_meta.FOLDER).is_dir():
            return _check_conda_meta(prefix)
        raise UserError(f"{prefix} has no lockgen manifest and no conda-meta", "materialize it with lockgen materialize")
    return recorded_drift(prefix, full)


def _check_conda_meta(prefix: Path) -> Drift:
    """Drift of an environment lockgen did not make (say, by `rattler.install` itself), against the
    paths and hashes its conda-meta records list. Files under conda-meta/ and caches are not judged."""
    expected = conda_meta.listed_paths(prefix)
    present = {p for p in env_manifest.walk(prefix) if not p.startswith(f"{conda_meta.FOLDER}/") and p != "CACHEDIR.TAG"}
    modified = []
    for relative in sorted(present & expected.keys()):
        entry, path = expected[relative], prefix / relative
        digest = entry.get("sha256_in_prefix") or entry.get("sha256")
        if entry.get("path_type") == "softlink" or path.is_symlink() or digest is None:
            continue
        if file_digest(path) != digest:
            modified.append(relative)
    missing = sorted(p for p in expected.keys() - present if not (prefix / p).is_symlink())
    return Drift(missing, sorted(present - expected.keys()), modified)


def check_image(source: str | Path, lock: Path | None = None, insecure: bool = False,
                progress: Callable[[str], None] = lambda _: None, meter: Meter | None = None) -> tuple[str, str, Drift]:
    """Unpacks the image (a layout folder or a registry reference) and recomputes the environment digest at
    its prefix: (recorded, recomputed, drift). With `lock`, the image must come from exactly that lock."""
    with image_source.unpacked(source, progress, insecure, lock, meter) as image:
        if (image.prefix / env_manifest.MANIFEST).is_file():  # compared with the files as unpacked: hashed once
            drift = manifest_drift(env_manifest.read(image.prefix)[0], image.manifest)
        else:
            drift = check_prefix(image.prefix, full=True)
        problems = _sbom_problems(source, image.prefix / SBOM_INSIDE, None, image.recorded_environment)
        drift = Drift(drift.missing, drift.extra, sorted(drift.modified + problems), drift.unsafe)
        return image.recorded_environment, image.environment, drift


SBOM_INSIDE = ".lockgen/sbom.cdx.json"


def _stated_environment(sbom: bytes) -> str | None:
    """The environment digest an SBOM names (its top component's version), or None when unreadable."""
    try:
        version = json.loads(sbom)["metadata"]["component"]["version"]
    except (ValueError, KeyError, TypeError):
        return None
    return str(version).removeprefix("sha256:")


def _sbom_problems(source: str | Path, inside: Path, expected: bytes | None, labelled: str) -> list[str]:
    """The image's SBOMs that are not what they should be: the one inside the image must name the
    environment its label records, the one export wrote beside a layout folder (`DIR/sbom.cdx.json`) or an
    archive (`FILE.sbom.cdx.json`) must be the same bytes, and with a lock (`expected`: the SBOM regenerated
    from it) both must be exactly the lock's."""
    reference = expected
    problems = []
    if not inside.is_file():
        problems.append(f"{SBOM_INSIDE} (missing from the image)")
    else:
        found = inside.read_bytes()
        if expected is not None and found != expected:
            problems.append(f"{SBOM_INSIDE} (not the SBOM of the lock)")
        stated = _stated_environment(found)
        if stated is not None and stated != labelled:
            problems.append(f"{SBOM_INSIDE} (names environment {stated[:16]}…, the image's label {labelled[:16]}…)")
        reference = reference or found
    beside = _sbom_beside(source)
    if beside is not None and beside.is_file() and reference is not None and beside.read_bytes() != reference:
        problems.append(f"{beside} (differs from the image's SBOM" + (" and the lock's)" if expected else ")"))
    return problems


def _sbom_beside(source: str | Path) -> Path | None:
    if image_source.is_reference(str(source)):
        return None
    path = Path(str(source).removeprefix("file://"))
    return path / "sbom.cdx.json" if path.is_dir() else path.with_name(path.name + ".sbom.cdx.json")


def check_lock(lock_path: Path, prefix: Path | None = None, python: str | None = None, image: str | None = None,
               manifests: Path | None = None, platform: str | None = None, insecure: bool = False,
               image_prefix: str | None = None, progress: Callable[[str], None] = lambda _: None,
               meter: Meter | None = None, allow_foreign: Sequence[str] = ()) -> Conformance:
    """Conformance of one environment, named by its prefix, its interpreter, or an image holding it."""
    if sum(x is not None for x in (prefix, python, image)) != 1:
        raise UserError("check --lock needs exactly one of --prefix, --python and --image",
                        "lockgen check --lock L --prefix DIR (or --python PY, or --image LAYOUT|docker://REF)")
    if image is None:
        where = prefix if prefix is not None else python_dists.prefix_of(str(python))
        return conform(lock_path, where, platform, manifests, progress, meter, allow_foreign=allow_foreign)
    read_manifests(lock_path, platform, manifests, progress)  # a lock that cannot be proven: refused before the pull
    with image_source.opened(image, progress, insecure) as opened:
        labels = opened.config.get("config", {}).get("Labels") or {}
        image_prefix = image_prefix or labels.get(PREFIX_LABEL) or IMAGE_PREFIX
        inside = image_source.environment_in(opened.root, image_prefix)
        result = conform(lock_path, inside, platform, manifests, progress, meter, image_prefix, allow_foreign)
        problems = (f"image: runs as root (User {opened.user or 'unset'})",) if opened.user in ROOT_USERS else ()
        # the SBOM's packages, lock and platform come from the lock; the environment digest it names must be
        # the one the image's label records (which `check --image` recomputes from the files)
        labelled = str(labels.get(ENVIRONMENT_LABEL, "")).removeprefix("sha256:")
        expected_sbom = canonical_json(cyclonedx(load_lock(lock_path), result.platform, result.lock_sha256, labelled))
        problems += tuple(f"image: {finding}" for finding in _sbom_problems(image, inside / SBOM_INSIDE, expected_sbom, labelled))
        return Conformance(result.lock_sha256, result.platform, f"{image}:{image_prefix}", result.expected_digest,
                           result.report, problems, opened.digest, result.allowed, result.by_path_only)
