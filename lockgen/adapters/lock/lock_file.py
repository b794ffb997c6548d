"""Reads a lock file's bytes once for a command, and their sha256, without the lock parser (pyyaml, the
models): the one reader of a lock file, whose bytes `lockfile_yaml` parses when the entries are needed, so a
command that only binds to a lock's digest (a kept conformance verdict, a found-unchanged environment) imports
nothing more. A `--manifests` bundle is read here the same way (`manifest_store` parses it)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from lockgen.adapters import user_files
from lockgen.errors import LockFormatError, UserError
from lockgen.model.inputs import BundleBytes, LockBytes


def read(path: Path) -> LockBytes:
    """The bytes of the lock at `path` and their sha256; a missing or unreadable file is a LockFormatError."""
    try:
        data = user_files.read_bytes(path)
    except FileNotFoundError:
        raise LockFormatError(f"lock `{path}` does not exist", "run `lockgen resolve STACK` to write it") from None
    except OSError as exc:
        raise LockFormatError(
            f"cannot read lock `{path}`: {exc.strerror or exc}", "pass the path of a .conda-lock.yml"
        ) from None
    return LockBytes(str(path), data, hashlib.sha256(data).hexdigest())


def read_bundle(path: Path) -> BundleBytes:
    """A manifests bundle file's bytes (what a verdict reached with it is bound to)."""
    try:
        return BundleBytes(path, user_files.read_bytes(path))
    except OSError as exc:
        raise UserError(
            f"cannot read manifests `{path}`: {exc.strerror or exc}", "pass a file written by lockgen manifests"
        ) from None
