"""Base images for tests that run exported images, made offline from this host's own files, as distroless
images are: the dynamic loader and the C libraries this host's Debian `pythonX.Y` and its extension modules
link (as `ldd` names them), and, for a Python base, that interpreter at `/usr/bin/pythonX.Y` with its
standard library (`/usr/lib/pythonX.Y`, without its `__pycache__` and its test, IDLE and Tk folders), and
any other programs of this host a test names (`/bin/sh`) with what they link. Each
path is put as this host has it: a folder that is a link here (Debian's `/lib -> usr/lib`) is that link in
the image. One gzip layer, written from the image-spec (not by lockgen), so podman runs the real interpreter
on it, and export proves a venv's Python against a base it did not write."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
INTERPRETER = Path(f"/usr/bin/python{PYTHON}")
STDLIB = Path(f"/usr/lib/python{PYTHON}")
_LEFT_OUT = {"__pycache__", "test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "site-packages"}
_LINKED = re.compile(r"(?:=>\s*)?(/\S+)\s+\(0x")


def host_python() -> Path:
    """This host's Debian interpreter of the running Python's version; the test fails (not skips) without it."""
    if not INTERPRETER.is_file() or not STDLIB.is_dir():
        pytest.fail(f"these tests run images on this host's {INTERPRETER} and {STDLIB}: apt-get install python{PYTHON}")
    return INTERPRETER


def _libraries(programs: list[Path]) -> set[str]:
    """The shared libraries (and the dynamic loader) `programs` link, as ldd names them."""
    found: set[str] = set()
    for program in programs:
        listed = subprocess.run(["ldd", str(program)], capture_output=True, text=True).stdout
        found.update(match.group(1) for match in _LINKED.finditer(listed))
    return found


def _add(entries: dict[str, tarfile.TarInfo | bytes], path: str) -> None:
    """`path` (absolute) as this host has it: each folder on the way, a folder that is a link as that link
    (and what it leads to), then the file itself (a link to a file as that link and its target)."""
    parts = [p for p in path.split("/") if p]
    for depth in range(1, len(parts) + 1):
        here = "/" + "/".join(parts[:depth])
        name = here.lstrip("/")
        if os.path.islink(here):
            link = tarfile.TarInfo(name)
            link.type, link.linkname = tarfile.SYMTYPE, os.readlink(here)
            entries[name] = link
            _add(
                entries,
                os.path.realpath(here) + "/" + "/".join(parts[depth:])
                if depth < len(parts)
                else os.path.realpath(here),
            )
            return
        if depth < len(parts) or os.path.isdir(here):
            entries.setdefault(name, tarfile.TarInfo(name))
            entries[name].type, entries[name].mode = tarfile.DIRTYPE, 0o755
        else:
            entries[name] = Path(here).read_bytes()


def _layer(entries: dict[str, tarfile.TarInfo | bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, entry in sorted(entries.items()):
            if isinstance(entry, bytes):
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(entry), 0o755
                tar.addfile(info, io.BytesIO(entry))
            else:
                tar.addfile(entry)
    return raw.getvalue()


def _stdlib_files() -> list[Path]:
    files = []
    for folder, folders, names in os.walk(STDLIB):
        folders[:] = sorted(f for f in folders if f not in _LEFT_OUT and not f.startswith("config-"))
        files += [Path(folder) / name for name in sorted(names)]
    return files


def stdlib_files() -> list[Path]:
    """This host's standard library of the running Python's version, as the bases hold it."""
    return _stdlib_files()


def python_base(folder: Path, python: bool = True, tag: str = "base", programs: tuple[Path, ...] = ()) -> Path:
    """An OCI layout at `folder` of one image: glibc and the libraries this host's python links, and with
    `python` that interpreter and its standard library; `programs` of this host (`/bin/sh`) with what they
    link; PATH as Debian's."""
    host_python()
    stdlib = _stdlib_files()
    entries: dict[str, tarfile.TarInfo | bytes] = {}
    for library in sorted(_libraries([INTERPRETER, *programs, *(f for f in stdlib if f.suffix == ".so")])):
        _add(entries, library)
    for path in [*([INTERPRETER, *stdlib] if python else []), *programs]:
        _add(entries, str(path))
    tar = _layer(entries)
    blobs = folder / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def put(data: bytes) -> dict[str, object]:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return {"digest": f"sha256:{digest}", "size": len(data)}

    layer = {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **put(gzip.compress(tar, 1, mtime=0))}
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(tar).hexdigest()]},
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "layers": [layer],
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            **put(json.dumps(config, sort_keys=True).encode()),
        },
    }
    top = {
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        **put(json.dumps(manifest, sort_keys=True).encode()),
        "annotations": {"org.opencontainers.image.ref.name": tag},
    }
    (folder / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [top]}))
    (folder / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    return folder
