"""Unpacking an image applies its layers in order, a later layer's entry replacing an earlier one: a team
layer's venv `bin/python -> /usr/bin/python3.11` over the platform layer's same symlink is not followed
out of the destination (`check --image` of a team image on a pure-PyPI base refused it, exit 3)."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

from lockgen.adapters import oci_layout
from lockgen.digests import canonical_json


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
    config = {"architecture": "amd64", "os": "linux", "config": {}, "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(p.read_bytes()).hexdigest() for p in layers]}}
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **oci_layout.put_blob(layout, canonical_json(config))},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **blob} for blob in blobs],
    }
    oci_layout.write_index(layout, manifest, "t")
    return layout


def test_a_later_layer_replaces_an_earlier_symlink_instead_of_following_it(tmp_path: Path) -> None:
    venv = [("opt/env/bin/python", "/usr/bin/python3.11"), ("opt/env/pyvenv.cfg", b"home = /usr/bin\n")]
    layout = _layout(tmp_path, [_layer(tmp_path, "a.tar", venv), _layer(tmp_path, "b.tar", [*venv[:1], ("opt/env/pyvenv.cfg", b"home = /usr/bin\nv = 2\n")])])
    root = tmp_path / "root"
    oci_layout.unpack(layout, root)
    assert (root / "opt/env/bin/python").readlink() == Path("/usr/bin/python3.11")
    assert (root / "opt/env/pyvenv.cfg").read_text().endswith("v = 2\n")
