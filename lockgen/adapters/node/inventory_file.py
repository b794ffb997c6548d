"""The inventory file `freeze --inventory OUT` writes and `pin` reads: a `NodeInventory` as sorted, indented
JSON, gzipped when its name ends in `.gz` (byte-stable: no timestamp in the gzip header), read back whichever
it is (by gzip's magic bytes), and validated whole by its model."""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from pathlib import Path

from pydantic import ValidationError

from lockgen.adapters import user_files
from lockgen.adapters.atomic_files import write_bytes_atomic
from lockgen.errors import UserError
from lockgen.model.inventory import NodeInventory


def as_bytes(document: NodeInventory) -> bytes:
    """An inventory as its file holds it (before any gzip): sorted keys, one line per value."""
    return (json.dumps(document.model_dump(mode="json"), indent=1, sort_keys=True) + "\n").encode()


def write(out: Path, document: NodeInventory) -> None:
    """`document` written to `out` atomically (gzipped for a `.gz` name)."""
    data = as_bytes(document)
    write_bytes_atomic(out, gzip.compress(data, mtime=0) if out.name.endswith(".gz") else data)


def read(path: Path) -> tuple[NodeInventory, str]:
    """The inventory in `path`, gzipped or not, and the sha256 of the file's bytes (the source a pinned lock
    records), read once; a file that is not one is a user error."""
    try:
        raw = user_files.read_bytes(path)
        document = NodeInventory.model_validate_json(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
        return document, hashlib.sha256(raw).hexdigest()
    except OSError as exc:
        raise UserError(
            f"cannot read inventory `{path}`: {exc.strerror or exc}", "pass the file freeze --inventory wrote"
        ) from None
    except (ValidationError, EOFError, zlib.error):
        raise UserError(
            f"`{path}` is not a lockgen inventory", "write one with lockgen freeze --python PY --inventory OUT"
        ) from None
