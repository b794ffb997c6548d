"""The one form of lockgen's kept fingerprints (`fingerprint_records`: a wheel's proof record, an environment's
`stats.json`): what is written reads back the same; anything else (not JSON, another layout, a column of another
length or type) reads as no record, never an error and never a misread; and the manifest `env_manifest.built` makes
in one pass is byte for byte the canonical JSON the environment digest has always been of."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.adapters.proof import fingerprint_records
from lockgen.adapters.store import env_manifest
from lockgen.digests import canonical_json

_paths = st.lists(st.text(max_size=8), max_size=5)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None)
@given(_paths, st.integers(min_value=1, max_value=7), st.data())
def test_a_record_written_reads_back_as_written(paths: list[str], width: int, data: st.DataObject) -> None:
    values = data.draw(st.lists(st.integers(), min_size=width * len(paths), max_size=width * len(paths)))
    digests = "".join(data.draw(st.text("0123456789abcdef", min_size=64, max_size=64)) for _ in paths)
    encoded = fingerprint_records.encode({"layout": 9, "folder": "archive-v0/x"}, paths, values, digests)
    record = fingerprint_records.decode(encoded, 9, width, digests=True)
    assert record == {"layout": 9, "folder": "archive-v0/x", "paths": paths, "fingerprints": values, "sha256": digests}
    assert fingerprint_records.decode(encoded, 8, width, digests=True) is None  # another layout: none


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=12), max_size=5), st.text(max_size=12), st.data())
def test_fingerprints_replaced_in_a_records_bytes_are_those_a_fresh_encoding_writes(
    paths: list[str], folder: str, data: st.DataObject
) -> None:
    """A proof renewed by replacing its fingerprints in the bytes read (materialize's placing pass) is byte for byte
    the record encoded afresh with them, whatever its paths and fields hold (quotes, `],"sha256":"` as text)."""
    width = 7
    old, new = (
        data.draw(st.lists(st.integers(), min_size=width * len(paths), max_size=width * len(paths))) for _ in "ab"
    )
    digests = "".join(data.draw(st.text("0123456789abcdef", min_size=64, max_size=64)) for _ in paths)
    fields = {"layout": 3, "wheel": '],"sha256":"' + folder, "folder": ',"fingerprints":[' + folder}
    kept = fingerprint_records.encode(fields, paths, old, digests)
    assert fingerprint_records.with_fingerprints(kept, new) == fingerprint_records.encode(fields, paths, new, digests)
    assert fingerprint_records.with_fingerprints(b'{"layout":3,"paths":[]}', new) is None


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["layout", "paths", "fingerprints", "sha256", "dirs"]), _json, max_size=5) | _json,
    st.integers(min_value=1, max_value=3),
)
def test_anything_else_reads_as_no_record_or_a_well_formed_one(value: Any, width: int) -> None:
    """Any JSON, and bytes that are no JSON: never an exception; what is read has columns of one length, strings
    for paths and integers (no bool, float or null) for fingerprints."""
    for data in (json.dumps(value).encode(), json.dumps(value).encode()[:-1], b"\xff" + json.dumps(value).encode()):
        for digests in (False, True):
            record = fingerprint_records.decode(
                data, value.get("layout") if isinstance(value, dict) else 0, width, digests
            )
            if record is None:
                continue
            paths, values = record["paths"], record["fingerprints"]
            assert isinstance(paths, list) and all(type(path) is str for path in paths)
            assert (
                isinstance(values, list) and all(type(v) is int for v in values) and len(values) == width * len(paths)
            )
            if digests:
                assert isinstance(record["sha256"], str) and len(record["sha256"]) == 64 * len(paths)


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(st.text(max_size=8), st.lists(st.integers(min_value=0), min_size=6, max_size=6), max_size=5),
    st.none() | st.lists(st.text(max_size=6), max_size=3),
)
def test_stats_read_back_as_written(files: dict[str, list[int]], dirs: list[str] | None) -> None:
    assert env_manifest.stats_of(env_manifest.stats_bytes({"files": files, "dirs": dirs})) == {
        "files": files,
        "dirs": dirs,
    }


def test_a_fingerprint_of_another_width_is_left_out_of_the_stats_not_misaligned() -> None:
    stats = env_manifest.stats_of(
        env_manifest.stats_bytes(
            {"files": {"a": [1, 2, 3, 4, 5], "b": [1, 2, 3, 4, 5, 6, 7], "c": [6] * 6}, "dirs": []}
        )
    )
    assert stats == {"files": {"c": [6] * 6}, "dirs": []}


def test_stats_an_older_lockgen_wrote_read_as_no_fingerprints_and_their_folders() -> None:
    """Layout 1 (an object of lists per path, no `layout`): every file is hashed again, its folders compared; one
    older still (no `dirs`), or one naming a layout, compares no folder."""
    older = json.dumps({"files": {"a": [1, 2, 3, 4, 5, 6]}, "dirs": ["x"]}, sort_keys=True).encode()
    assert env_manifest.stats_of(older) == {"files": {}, "dirs": ["x"]}
    for other in ({"files": {"a": [1, 2]}}, {"files": {}, "dirs": "x"}, {"layout": 1, "files": {}, "dirs": ["x"]}):
        assert env_manifest.stats_of(json.dumps(other).encode()) == {"files": {}, "dirs": None}


# The prefix's own folders (`lib`, `conda-meta`) are not names a generated file may take at its top.
_names = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="/\0"), min_size=1, max_size=6
).filter(lambda name: name not in (".", "..", "lib", "conda-meta") and len(name.encode()) < 200)


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(_names, st.sampled_from(["known", "odd", "read", "link", "exec"]), min_size=1, max_size=6),
    st.text(max_size=6),
)
def test_the_manifest_made_in_one_pass_is_its_canonical_json(kinds: dict[str, str], odd: str) -> None:
    """`built` encodes each entry as it makes it: byte for byte `canonical_json` of the entries, whether a file's
    sha256 was known (a plain hex one, or odd text from a damaged record), read, a link, a conda-meta record or in a
    folder, and `write` gives the same digest and bytes from it as from the entries alone."""
    with tempfile.TemporaryDirectory() as folder:
        prefix = Path(folder) / "env"
        (prefix / "conda-meta").mkdir(parents=True)
        (prefix / "conda-meta" / "x-1-0.json").write_text('{"name": "x", "url": "here"}')
        known: dict[str, str] = {}
        for n, (name, kind) in enumerate(kinds.items()):
            path = prefix / (name if n % 2 else f"lib/{name}")
            path.parent.mkdir(exist_ok=True)
            if kind == "link":
                path.symlink_to(f"../{name}\n")
                continue
            path.write_bytes(name.encode("utf-8", "surrogateescape") * n)
            if kind == "exec":
                path.chmod(0o755)
            relative = str(path.relative_to(prefix))
            if kind in ("known", "exec"):
                known[relative] = "ab" * 32
            elif kind == "odd":
                known[relative] = odd
        known["conda-meta/x-1-0.json"] = "cd" * 32  # a record is always read (hashed without its volatile fields)
        made = env_manifest.built(prefix, known)
        assert (
            made.files_json
            == canonical_json(made.manifest["files"])
            == env_manifest.entries_json(made.manifest["files"])
        )
        one, two = Path(folder) / "one", Path(folder) / "two"
        one.mkdir()
        two.mkdir()
        assert env_manifest.write(one, made.manifest, made.stats_json, {"prefix": "/p"}, made.files_json) == (
            env_manifest.write(two, made.manifest, None, {"prefix": "/p"})
        )
        assert (one / env_manifest.MANIFEST).read_bytes() == (two / env_manifest.MANIFEST).read_bytes()
        stats = env_manifest.stats_of((one / env_manifest.STATS).read_bytes())
        walked, _ = env_manifest.scan_tree(prefix)
        assert stats["files"] == {
            relative: env_manifest.fingerprint(info)
            for relative, info in walked.items()
            if env_manifest.covered(relative)
        }
        assert stats["dirs"] == sorted(
            os.path.relpath(root, prefix) for root, _, _ in os.walk(prefix) if root != str(prefix)
        )
