"""An image to check or certify: an OCI layout folder, or a registry reference (`docker://HOST/REPO:TAG`)
pulled through skopeo into a temporary layout; unpacked with every blob and layer checked, and the
environment at its prefix re-digested against the digest the image's labels record."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lockgen.adapters import env_manifest, oci_layout, registry
from lockgen.digests import file_digest
from lockgen.errors import LockFormatError, UserError
from lockgen.core.image_config import is_environment_prefix
from lockgen.model.oci import ENVIRONMENT_LABEL, IMAGE_PREFIX, LOCK_LABEL, PREFIX_LABEL



@dataclass(frozen=True)
class UnpackedImage:
    digest: str          # the manifest digest, sha256:...
    labels: dict[str, Any]
    root: Path           # the unpacked root file system
    recorded_environment: str   # the environment digest the labels record (hex)
    manifest: dict[str, Any]    # the environment manifest built from the unpacked files
    environment: str            # its digest (hex)
    prefix: Path         # the folder of `root` holding the environment (at its prefix label, else /opt/env)


def is_reference(source: str) -> bool:
    return "://" in source and not source.startswith("file://")


def require_lock(labels: dict[str, Any], lock: Path) -> None:
    """Refuses an image that was not exported from exactly `lock`."""
    wanted = file_digest(lock)
    have = labels.get(LOCK_LABEL)
    if have != wanted:
        came_from = f"lock sha256 {str(have)[:16]}…" if have else "a lock it does not name (no lock label)"
        raise UserError(f"the image was exported from {came_from}, not `{lock}` ({wanted[:16]}…)",
                        "pass the lock the image was exported from, or export this lock")


@dataclass(frozen=True)
class OpenedImage:
    """Any image, unpacked: its manifest digest, config and root file system."""

    digest: str
    config: dict[str, Any]
    root: Path

    @property
    def user(self) -> str:
        return str(self.config.get("config", {}).get("User") or "")


@contextlib.contextmanager
def _layout_of(source: str, work: Path, progress: Callable[[str], None], insecure: bool) -> Iterator[Path]:
    layout = Path(source)
    if is_reference(source):
        progress(f"pulling {source}")
        layout = work / "layout"
        registry.pull(source, layout, insecure, progress)
    elif not (layout / "index.json").is_file():
        raise UserError(f"`{source}` is not an OCI image layout", "pass an OCI layout folder, or docker://REF")
    yield layout


@contextlib.contextmanager
def opened(source: str | Path, progress: Callable[[str], None], insecure: bool = False) -> Iterator[OpenedImage]:
    """Any image (a layout folder or a registry reference, lockgen's or not), every blob and layer checked
    as it is unpacked into a temporary folder, removed afterwards."""
    work = Path(tempfile.mkdtemp(prefix="lockgen-image-"))
    try:
        with _layout_of(str(source), work, progress, insecure) as layout:
            _, config, digest = oci_layout.read_image(layout)
            progress(f"unpacking {digest[:19]}…")
            oci_layout.unpack(layout, work / "root")
            yield OpenedImage(digest, config, work / "root")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def unpacked(source: str | Path, progress: Callable[[str], None], insecure: bool = False,
             lock: Path | None = None, meter: Callable[[str, int, int], None] | None = None) -> Iterator[UnpackedImage]:
    """Yields a lockgen image unpacked in a temporary folder (removed afterwards); with `lock`, an image
    exported from another lock is refused before anything is unpacked."""
    source = str(source)
    work = Path(tempfile.mkdtemp(prefix="lockgen-image-"))
    try:
        with _layout_of(source, work, progress, insecure) as layout:
            _, config, digest = oci_layout.read_image(layout)
            labels = config.get("config", {}).get("Labels") or {}
            if ENVIRONMENT_LABEL not in labels:
                raise LockFormatError(f"`{source}` was not exported by lockgen (no {ENVIRONMENT_LABEL} label)",
                                      "pass an image made by lockgen export")
            if lock is not None:
                require_lock(labels, lock)
            progress(f"unpacking {digest[:19]}…")
            root = work / "root"
            oci_layout.unpack(layout, root, meter)
        prefix = environment_in(root, labels.get(PREFIX_LABEL, IMAGE_PREFIX))  # an adopted one keeps its own path
        manifest, _ = env_manifest.build(prefix)
        yield UnpackedImage(digest=digest, labels=labels, root=root,
                            recorded_environment=labels[ENVIRONMENT_LABEL].removeprefix("sha256:"),
                            manifest=manifest, environment=env_manifest.digest(manifest), prefix=prefix)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def environment_in(root: Path, prefix: str) -> Path:
    """The folder of an unpacked image's root file system holding the environment at `prefix` (an image's
    own label may name it: refused unless it is an absolute path that stays inside the root, links resolved)."""
    if not is_environment_prefix(prefix):
        raise LockFormatError(f"the image names its environment at `{prefix}`, not a folder inside the image",
                              "pass --image-prefix with the environment's absolute path inside the image")
    inside = root / prefix.strip("/")
    if os.path.commonpath([os.path.realpath(inside), os.path.realpath(root)]) != os.path.realpath(root):
        raise LockFormatError(f"`{prefix}` in the image leads outside it (through a link)",
                              "the image was crafted to point a check at the host; refuse it")
    return inside
