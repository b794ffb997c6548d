"""A step below the use cases (check, certs): an image proven its lock's, whole. Its environment is the one its
config runs (CONDA_PREFIX, first on PATH), proven file by file against the packages' own hashes in the image's
final file system (whiteouts applied); its config is the one export writes from the lock (on the image's
pinned base's config, with its diff_ids and environment label); every layer member outside the environment
lies in the pinned base's layers, which the image carries the manifest and config of (hashing to the digest its
manifest pins), or it is refused; and its SBOMs are the lock's. Each difference is one problem line."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from lockgen.adapters.image import image_source, oci_layout
from lockgen.api.steps.conformance_steps import conform
from lockgen.api.steps.shared_steps import Meter
from lockgen.core.image.image_config import image_config
from lockgen.core.image.image_whole import config_differences, environment_prefix, outside_problems
from lockgen.core.lock.lock_builder import LockgenMeta
from lockgen.core.image.sbom import cyclonedx
from lockgen.digests import canonical_json
from lockgen.errors import LockgenError
from lockgen.model.oci_documents import OciConfig
from lockgen.model.inputs import BundleBytes
from lockgen.model.image import ImageConfig, ImageManifest
from lockgen.model.lock import LoadedLock, Lock
from lockgen.model.oci import (
    BASE_CONFIG_INSIDE,
    BASE_DIGEST_ANNOTATION,
    BASE_MANIFEST_INSIDE,
    ENVIRONMENT_LABEL,
    LOCK_LABEL,
)
from lockgen.model.results import Conformance

ROOT_USERS = ("", "0", "0:0", "root", "root:root")
SBOM_INSIDE = ".lockgen/sbom.cdx.json"


def prove_image(
    loaded: LoadedLock,
    image: str,
    manifests: BundleBytes | None,
    platform: str | None,
    insecure: bool,
    image_prefix: str | None,
    progress: Callable[[str], None],
    meter: Meter | None,
    allow_foreign: Sequence[str],
) -> Conformance:
    """The conformance of the image's environment to the lock (as its use case read it), with every way the
    image is not what export writes from it among its problems."""
    with image_source.opened(image, progress, insecure) as opened:
        return prove_opened(loaded, opened, image, manifests, platform, image_prefix, progress, meter, allow_foreign)


def prove_opened(
    loaded: LoadedLock,
    opened: image_source.OpenedImage,
    image: str,
    manifests: BundleBytes | None,
    platform: str | None,
    image_prefix: str | None,
    progress: Callable[[str], None],
    meter: Meter | None,
    allow_foreign: Sequence[str],
) -> Conformance:
    """`prove_image` of an image already opened (verify runs its kernel in the same unpacked root)."""
    prefix = environment_prefix(opened.typed_config, image_prefix)
    inside = image_source.environment_in(opened.root, prefix)
    result = conform(loaded, inside, platform, manifests, progress, meter, prefix, allow_foreign)
    problems = [f"image: runs as root (User {opened.user or 'unset'})"] if opened.user in ROOT_USERS else []
    lock = loaded.lock
    account = _base(opened.manifest, opened.typed_config, inside, lock)
    base_count, base_config = account.layers, account.config
    problems += account.problems
    if base_count:
        progress(
            f"files outside {prefix}: the {base_count} layers of the base its manifest pins, "
            f"{(opened.manifest.annotations or {})[BASE_DIGEST_ANNOTATION]} (trusted as pinned)"
        )
    if base_count is not None:
        problems += outside_problems(list(opened.layers), base_count, prefix)
        problems += _config_problems(lock, result, opened, base_config, prefix)
    # the SBOM's packages, lock and platform come from the lock; the environment digest it names must be
    # the one the image's label records
    labelled = (opened.typed_config.config.labels or {}).get(ENVIRONMENT_LABEL, "").removeprefix("sha256:")
    expected_sbom = canonical_json(cyclonedx(lock, result.platform, result.lock_sha256, labelled))
    problems += [f"image: {finding}" for finding in sbom_problems(image, inside / SBOM_INSIDE, expected_sbom, labelled)]
    base = (opened.manifest.annotations or {}).get(BASE_DIGEST_ANNOTATION) if base_count else None
    return Conformance(
        result.lock_sha256,
        result.platform,
        f"{image}:{prefix}",
        result.expected_digest,
        result.report,
        tuple(problems),
        opened.digest,
        result.allowed,
        result.by_path_only,
        base_digest=base,
    )


def _config_problems(
    lock: Lock, result: Conformance, opened: image_source.OpenedImage, base_config: OciConfig | None, prefix: str
) -> list[str]:
    """The image's config (as written) against the one export writes from the lock over the image's own layers
    and environment label (which the files and the SBOM check), on its base's config."""
    environment = (opened.typed_config.config.labels or {}).get(ENVIRONMENT_LABEL, "").removeprefix("sha256:")
    diff_ids = list(opened.typed_config.rootfs.diff_ids)
    try:
        expected = image_config(lock, result.platform, result.lock_sha256, environment, diff_ids, base_config, prefix)
    except (LockgenError, KeyError, TypeError, AttributeError, ValueError):
        return ["image: its base's config is not one export can build on, so the config cannot be the lock's"]
    return config_differences(expected, opened.config)


class BaseAccount(NamedTuple):
    """How an image's files outside its environment are accounted for by its pinned base: how many of its layers
    are the base's (None: they cannot be told), the base's config as written, and the problems found."""

    layers: int | None
    config: OciConfig | None  # as written, of the shape `check_image` checks
    problems: list[str]


def _base(manifest: ImageManifest, config: ImageConfig, inside: Path, lock: Lock) -> BaseAccount:
    """How the image's pinned base accounts for its files outside the environment; no base: 0 layers, no config,
    no problem. A base the image does not carry the manifest and config of, or one whose layers are not the
    image's first ones, gives None and the problem: nothing outside the environment can then be accounted for."""
    pinned = (manifest.annotations or {}).get(BASE_DIGEST_ANNOTATION)
    if pinned is None:
        return BaseAccount(0, None, [])
    try:
        data, config_data = (inside / BASE_MANIFEST_INSIDE).read_bytes(), (inside / BASE_CONFIG_INSIDE).read_bytes()
    except OSError:
        return BaseAccount(
            None,
            None,
            [
                f"image: its manifest pins base {pinned[:23]}…, whose manifest and config it does not carry "
                f"({BASE_MANIFEST_INSIDE}): the base's layers cannot be told (re-export it)"
            ],
        )
    if "sha256:" + hashlib.sha256(data).hexdigest() != pinned:
        return BaseAccount(
            None, None, [f"image: the base manifest it carries is not base {pinned[:23]}…, which its manifest pins"]
        )
    try:
        written = json.loads(config_data)
        base_manifest, base_config = oci_layout.check_image("the image's base", json.loads(data), written)
    except (LockgenError, ValueError):
        return BaseAccount(
            None, None, [f"image: the base manifest and config it carries ({BASE_MANIFEST_INSIDE}) are not an image's"]
        )
    count = len(base_manifest.layers)
    if base_manifest.config.digest != "sha256:" + hashlib.sha256(config_data).hexdigest():
        wrong_config = f"image: the base config it carries is not the one base {pinned[:23]}… names"
        return BaseAccount(None, None, [wrong_config])
    if [layer.digest for layer in base_manifest.layers] != [
        layer.digest for layer in manifest.layers[:count]
    ] or base_config.rootfs.diff_ids != config.rootfs.diff_ids[:count]:
        return BaseAccount(None, None, [f"image: its first {count} layers are not those of its base {pinned[:23]}…"])
    held_to, base_lock = LockgenMeta(lock).base_lock, (base_config.config.labels or {}).get(LOCK_LABEL)
    problems = (
        [
            f"image: its base {pinned[:23]}… is exported from lock sha256 {base_lock[:16]}…, not the base lock "
            f"{held_to[:16]}… the lock was held to"
        ]
        if held_to and base_lock and base_lock != held_to
        else []
    )
    return BaseAccount(count, written, problems)


def _stated_environment(sbom: bytes) -> str | None:
    """The environment digest an SBOM names (its top component's version), or None when unreadable."""
    try:
        version = json.loads(sbom)["metadata"]["component"]["version"]
    except (ValueError, KeyError, TypeError):
        return None
    return str(version).removeprefix("sha256:")


def sbom_problems(source: str | Path, inside: Path, expected: bytes | None, labelled: str) -> list[str]:
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
    folder, _ = image_source.split_tag(str(source))
    path = Path(folder.removeprefix("file://"))
    return path / "sbom.cdx.json" if path.is_dir() else path.with_name(path.name + ".sbom.cdx.json")
