"""An image to check or certify: an OCI layout folder (`DIR`, or `DIR:TAG` for the image a tag names), or a
registry reference (`docker://HOST/REPO:TAG`) pulled through skopeo into a temporary layout; unpacked with
every blob and layer checked, whiteouts applied (the file system a runtime mounts), and the environment at
its prefix re-digested against the digest the image's labels record."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from lockgen.adapters import user_files
from lockgen.adapters.distribution import registry
from lockgen.adapters.image import oci_layout
from lockgen.adapters.store import env_manifest
from lockgen.core import nesting
from lockgen.digests import canonical_json
from lockgen.model.environment_record import EnvironmentManifest
from lockgen.model.names import shown
from lockgen.errors import LockFormatError, UserError
from lockgen.core.image.image_config import is_environment_prefix
from lockgen.core.image.image_reference import refuse_credentials
from lockgen.model.image import ImageConfig, ImageManifest, LayerEntry
from lockgen.model.inputs import LockBytes
from lockgen.model.oci_documents import OciConfig
from lockgen.model.oci import ENVIRONMENT_LABEL, IMAGE_PREFIX, LOCK_LABEL, PREFIX_LABEL


@dataclass(frozen=True)
class UnpackedImage:
    digest: str  # the manifest digest, sha256:...
    labels: dict[str, str]
    root: Path  # the unpacked root file system
    recorded_environment: str  # the environment digest the labels record (hex)
    manifest: EnvironmentManifest  # built from the unpacked files
    environment: str  # its digest (hex)
    prefix: Path  # the folder of `root` holding the environment (at its prefix label, else /opt/env)


def is_reference(source: str) -> bool:
    return "://" in source and not source.startswith("file://")


def require_lock(labels: Mapping[str, str], lock: LockBytes) -> None:
    """Refuses an image that was not exported from exactly `lock` (its bytes, as read)."""
    wanted = lock.sha256
    have = labels.get(LOCK_LABEL)
    if have != wanted:
        came_from = f"lock sha256 {str(have)[:16]}…" if have else "a lock it does not name (no lock label)"
        raise UserError(
            f"the image was exported from {came_from}, not `{lock.source}` ({wanted[:16]}…)",
            "pass the lock the image was exported from, or export this lock",
        )


@dataclass(frozen=True)
class OpenedImage:
    """Any image, unpacked as a runtime mounts it (whiteouts applied): its manifest digest, manifest, config, root
    file system, and each layer's members (bottom first)."""

    digest: str
    config: OciConfig  # as written (compared with the config export writes)
    root: Path
    manifest: ImageManifest
    typed_config: ImageConfig
    layers: tuple[tuple[LayerEntry, ...], ...]

    @property
    def user(self) -> str:
        return str(self.config.get("config", {}).get("User") or "")


def split_tag(source: str) -> tuple[str, str | None]:
    """A layout named with its tag (`DIR:TAG`, as skopeo's `oci:` transport writes it) as (DIR, TAG); a
    registry reference, or a folder that holds a layout itself, as it is."""
    folder, colon, tag = source.rpartition(":")
    if is_reference(source) or not colon or (Path(source) / "index.json").is_file() or "/" in tag:
        return source, None
    return folder, tag


@contextlib.contextmanager
def _layout_of(
    source: str, work: Path, progress: Callable[[str], None], insecure: bool
) -> Iterator[tuple[Path, str | None]]:
    """The layout to read (a folder, or a registry image pulled into one) and the tag asked for."""
    folder, tag = split_tag(source)
    layout = Path(folder)
    if is_reference(source):
        refuse_credentials(source)
        progress(f"pulling {source}")
        layout = work / "layout"
        registry.pull(source, layout, insecure, progress)
    elif not (layout / "index.json").is_file():
        raise UserError(
            f"`{source}` is not an OCI image layout", "pass an OCI layout folder (DIR or DIR:TAG), or docker://REF"
        )
    yield layout, tag


def _one_image(layout: Path, tag: str | None, work: Path) -> tuple[Path, ImageManifest, ImageConfig, OciConfig, str]:
    """The image `tag` names (the layout's only one without a tag) as a layout of that image alone (its blobs
    those of `layout`), so unpacking reads the image the tag names; with its manifest and config (typed, and
    the config as written) and its digest."""
    manifest, config, digest = oci_layout.read_image(layout, tag=tag)
    typed_manifest, typed_config = oci_layout.check_image(layout, manifest, config)
    index = nesting.loads(user_files.read_bytes(layout / "index.json"))
    if len(index["manifests"]) == 1:
        return layout, typed_manifest, typed_config, config, digest
    view = work / "chosen"
    view.mkdir()
    (view / "blobs").symlink_to((layout / "blobs").resolve(), target_is_directory=True)
    (view / "oci-layout").write_bytes((layout / "oci-layout").read_bytes())
    chosen = oci_layout.tagged_entry(layout, index, tag)
    (view / "index.json").write_bytes(canonical_json({**index, "manifests": [chosen]}))
    return view, typed_manifest, typed_config, config, digest


@contextlib.contextmanager
def opened(source: str | Path, progress: Callable[[str], None], insecure: bool = False) -> Iterator[OpenedImage]:
    """Any image (a layout folder, `DIR:TAG`, or a registry reference, lockgen's or not), every blob and layer
    checked as it is unpacked into a temporary folder, removed afterwards."""
    work = Path(tempfile.mkdtemp(prefix="lockgen-image-"))
    try:
        with _layout_of(str(source), work, progress, insecure) as (layout, tag):
            layout, manifest, typed_config, config, digest = _one_image(layout, tag, work)
            progress(f"unpacking {digest[:19]}…")
            layers = oci_layout.unpack(layout, work / "root")
            yield OpenedImage(digest, config, work / "root", manifest, typed_config, layers)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def lockgen_image(opened: OpenedImage, prefix: str) -> UnpackedImage:
    """An opened image as a lockgen image with its environment at `prefix` (the one its config runs): the
    environment manifest recomputed from the unpacked files."""
    labels = opened.typed_config.config.labels or {}
    if ENVIRONMENT_LABEL not in labels:
        raise LockFormatError(
            f"the image {opened.digest[:19]}… was not exported by lockgen (no {ENVIRONMENT_LABEL} label)",
            "pass an image made by lockgen export",
        )
    folder = environment_in(opened.root, prefix)
    manifest, _ = env_manifest.build(folder)
    return UnpackedImage(
        digest=opened.digest,
        labels=labels,
        root=opened.root,
        recorded_environment=labels[ENVIRONMENT_LABEL].removeprefix("sha256:"),
        manifest=manifest,
        environment=env_manifest.digest(manifest),
        prefix=folder,
    )


@contextlib.contextmanager
def unpacked(
    source: str | Path,
    progress: Callable[[str], None],
    insecure: bool = False,
    lock: LockBytes | None = None,
    meter: Callable[[str, int, int], None] | None = None,
) -> Iterator[UnpackedImage]:
    """Yields a lockgen image unpacked in a temporary folder (removed afterwards); with `lock`, an image
    exported from another lock is refused before anything is unpacked."""
    source = str(source)
    work = Path(tempfile.mkdtemp(prefix="lockgen-image-"))
    try:
        with _layout_of(source, work, progress, insecure) as (layout, tag):
            layout, _, typed_config, _, digest = _one_image(layout, tag, work)
            labels = typed_config.config.labels or {}
            if ENVIRONMENT_LABEL not in labels:
                raise LockFormatError(
                    f"`{source}` was not exported by lockgen (no {ENVIRONMENT_LABEL} label)",
                    "pass an image made by lockgen export",
                )
            if lock is not None:
                require_lock(labels, lock)
            progress(f"unpacking {digest[:19]}…")
            root = work / "root"
            oci_layout.unpack(layout, root, meter)
        prefix = environment_in(root, labels.get(PREFIX_LABEL, IMAGE_PREFIX))  # an adopted one keeps its own path
        environment, _ = env_manifest.build(prefix)
        yield UnpackedImage(
            digest=digest,
            labels=labels,
            root=root,
            recorded_environment=labels[ENVIRONMENT_LABEL].removeprefix("sha256:"),
            manifest=environment,
            environment=env_manifest.digest(environment),
            prefix=prefix,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def environment_in(root: Path, prefix: str) -> Path:
    """The folder of an unpacked image's root file system holding the environment at `prefix` (an image's
    own label may name it: refused unless it is an absolute path that stays inside the root, links resolved, and
    a folder there: an image whose layers put nothing at its prefix has no environment to check or prove)."""
    if not is_environment_prefix(prefix):
        raise LockFormatError(
            f"the image names its environment at `{prefix}`, not a folder inside the image",
            "pass --image-prefix with the environment's absolute path inside the image",
        )
    inside = root / prefix.strip("/")
    if os.path.commonpath([os.path.realpath(inside), os.path.realpath(root)]) != os.path.realpath(root):
        raise LockFormatError(
            f"`{prefix}` in the image leads outside it (through a link)",
            "the image was crafted to point a check at the host; refuse it",
        )
    if not inside.is_dir():
        raise LockFormatError(
            f"the image holds no environment at `{shown(prefix)}` (its layers put "
            f"{'a file' if inside.exists() else 'nothing'} there)",
            "pass an image lockgen exported, or --image-prefix with the environment's path inside the image",
        )
    return inside
