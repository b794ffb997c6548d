"""Unpacking an image applies its layers in order, a later layer's entry replacing an earlier one: a team
layer's venv `bin/python -> /usr/bin/python3.11` over the platform layer's same symlink is not followed
out of the destination (`check --image` of a team image on a pure-PyPI base refused it, exit 3)."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from lockgen.adapters.image import oci_layout
from lockgen.digests import canonical_json
from lockgen.errors import LockFormatError


def _layer(folder: Path, name: str, entries: list[tuple[str, str | bytes]]) -> Path:
    """A tar of (path, symlink target as str | file content as bytes)."""
    path = folder / name
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for member, value in entries:
            info = tarfile.TarInfo(member)
            if isinstance(value, str):
                info.type, info.linkname = tarfile.SYMTYPE, value
                tar.addfile(info)
            else:
                info.size = len(value)
                tar.addfile(info, io.BytesIO(value))
    return path


def _layout(folder: Path, layers: list[Path]) -> Path:
    layout = folder / "img"
    layout.mkdir()
    (layout / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    blobs = [oci_layout.put_blob_file(layout, layer) for layer in layers]
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {},
        "rootfs": {
            "type": "layers",
            "diff_ids": ["sha256:" + hashlib.sha256(p.read_bytes()).hexdigest() for p in layers],
        },
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            **oci_layout.put_blob(layout, canonical_json(config)),
        },
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **blob} for blob in blobs],
    }
    oci_layout.write_index(layout, manifest, "t")
    return layout


def test_a_later_layer_replaces_an_earlier_symlink_instead_of_following_it(tmp_path: Path) -> None:
    venv = [("opt/env/bin/python", "/usr/bin/python3.11"), ("opt/env/pyvenv.cfg", b"home = /usr/bin\n")]
    layout = _layout(
        tmp_path,
        [
            _layer(tmp_path, "a.tar", venv),
            _layer(tmp_path, "b.tar", [*venv[:1], ("opt/env/pyvenv.cfg", b"home = /usr/bin\nv = 2\n")]),
        ],
    )
    root = tmp_path / "root"
    oci_layout.unpack(layout, root)
    assert (root / "opt/env/bin/python").readlink() == Path("/usr/bin/python3.11")
    assert (root / "opt/env/pyvenv.cfg").read_text().endswith("v = 2\n")


def test_every_layer_media_type_a_runtime_unpacks_is_read_and_no_other() -> None:
    """The media types a runtime refuses are refused (umoci is the oracle in test_image_whole), but every one
    containerd unpacks is read: BuildKit writes Docker's uncompressed and zstd layers (a review found a first
    list that left them out, so `export --base` on such an image failed)."""
    config = {"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "0" * 64]}}

    def manifest(media_type: str) -> dict:
        descriptor = {"digest": "sha256:" + "1" * 64, "size": 1}
        return {
            "schemaVersion": 2,
            "config": {**descriptor, "mediaType": "application/vnd.oci.image.config.v1+json"},
            "layers": [{**descriptor, "mediaType": media_type}],
        }

    buildkit = [
        "application/vnd.docker.image.rootfs.diff.tar",
        "application/vnd.docker.image.rootfs.diff.tar.zstd",
        "application/vnd.docker.image.rootfs.diff.tar.gzip",
    ]
    oci = [
        f"application/vnd.oci.image.layer.{kind}v1.tar{suffix}"
        for kind in ("", "nondistributable.")
        for suffix in ("", "+gzip", "+zstd")
    ]
    for media_type in buildkit + oci + ["application/vnd.docker.image.rootfs.foreign.diff.tar.gzip"]:
        oci_layout.check_image("here", manifest(media_type), config)
    for media_type in (
        "application/x-whatever",
        "application/vnd.oci.image.layer.v1.tar+bzip2",
        "application/vnd.oci.image.config.v1+json",
    ):
        with pytest.raises(LockFormatError, match="is no layer a runtime unpacks"):
            oci_layout.check_image("here", manifest(media_type), config)
