"""The one form of lockgen's records of files' fingerprints, read and written here alone: a wheel's proof record
(`$LOCKGEN_HOME/proven/wheels/<wheel sha256>.json`, `wheel_store`) and an environment's `.lockgen/stats.json`
(`env_manifest`). Materialize, `check`, `store verify` and the tests all go through `encode` and `decode`.

A record is one compact JSON object, readable by any JSON parser: the record's own fields (`layout`, the stamp of
its kind's form, and e.g. the wheel and its cache folder) and its files as columns, not an object per file:
`paths`, a list of their paths; `fingerprints`, their integers end to end (`width` per file, in the order the kind
documents); and, for a proof record, `sha256`, their digests end to end as one string (64 hex digits each). Flat
columns read and write 3-4 times faster than a list or object per file (a torch's 15,000 files: `json` parses and
writes a list of ints and of strings in C). A record of another layout, or not of this shape (an older lockgen's,
one cut short or edited), decodes as none: its files are hashed again, never misread and never an error."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

DIGEST_WIDTH = 64  # the hex digits of one sha256 in a `sha256` column


def encode(
    fields: Mapping[str, object], paths: Sequence[str], fingerprints: Sequence[int], digests: str | None = None
) -> bytes:
    """A record's bytes: `fields` (its `layout` among them) then the columns (`digests`: the files' sha256 end to
    end, for a kind that keeps them)."""
    columns: dict[str, object] = {"paths": paths, "fingerprints": fingerprints}
    if digests is not None:
        columns["sha256"] = digests
    return json.dumps({**fields, **columns}, separators=(",", ":")).encode()


def decode(data: bytes, layout: int, width: int, digests: bool = False) -> dict[str, object] | None:
    """The record in `data` when it is one of this `layout`: an object whose `paths` are strings, whose
    `fingerprints` are `width` integers per path and (`digests`) whose `sha256` is 64 characters per path; else
    None (not JSON, another layout or shape)."""
    try:
        record = json.loads(data)
    except (ValueError, RecursionError):  # not UTF-8 JSON (UnicodeDecodeError is a ValueError), or nested past it
        return None
    if not isinstance(record, dict) or record.get("layout") != layout:
        return None
    paths, values = record.get("paths"), record.get("fingerprints")
    if not (isinstance(paths, list) and isinstance(values, list) and len(values) == width * len(paths)):
        return None
    if not (set(map(type, paths)) <= {str} and set(map(type, values)) <= {int}):  # no bool, float or null
        return None
    if digests:
        kept = record.get("sha256")
        if not (isinstance(kept, str) and len(kept) == DIGEST_WIDTH * len(paths) and kept.isascii()):
            return None
    return record


FINGERPRINTS_AT, FINGERPRINTS_END = b',"fingerprints":[', b'],"sha256":"'


def with_fingerprints(data: bytes, fingerprints: Sequence[int]) -> bytes | None:
    """The bytes of the proof record `data` (as `encode` writes it, its `sha256` column after its `fingerprints`) with
    other fingerprints, its paths and digests as they are, untouched (a torch's 15,000 paths and digests encoded again
    cost 0.03 s); None where `data` is not of that form. The key is found by its text: inside a JSON string a quote is
    escaped, so no path or field holds it."""
    start = data.find(FINGERPRINTS_AT)
    end = data.find(FINGERPRINTS_END, start)
    if start < 0 or end < 0 or set(map(type, fingerprints)) - {int}:
        return None
    column = json.dumps(fingerprints, separators=(",", ":"))[1:-1].encode()  # the C encoder: 40% faster than a join
    return b"".join((data[: start + len(FINGERPRINTS_AT)], column, data[end:]))
