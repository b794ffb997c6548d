"""Canonical JSON with parts encoded beforehand (`digests.canonical_json_with`) is byte for byte
`canonical_json` of the whole: the environment manifest's digest and the file written share its files'
encoding, and a digest that moved would make every environment look changed. A list hashed a chunk at a time
(`canonical_list_digest`, a lock's package set) has the whole list's digest."""

from __future__ import annotations

import tracemalloc
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.adapters.store import env_manifest
from lockgen.core.lock.lock_builder import package_set
from lockgen.digests import canonical_digest, canonical_json, canonical_json_with, canonical_list_digest
from lockgen.model.lock import pip_wheel

_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=4), _values, max_size=5), st.integers(min_value=0))
def test_parts_encoded_beforehand_give_the_same_bytes(value: dict[str, Any], chosen: int) -> None:
    keys = {key for n, key in enumerate(sorted(value)) if chosen >> n & 1}  # any subset, by the bits of `chosen`
    encoded = {key: canonical_json(value[key]) for key in keys}
    assert canonical_json_with(value, encoded) == canonical_json(value)
    assert canonical_json_with({k: v for k, v in value.items() if k not in keys}, encoded) == canonical_json(value)


def test_the_manifest_written_holds_its_own_digest(tmp_path) -> None:  # type: ignore[no-untyped-def]
    manifest = {"format": 1, "files": [{"path": "a é", "type": "file", "size": 1, "mode": "644", "sha256": "0" * 64}]}
    digest = env_manifest.write(
        tmp_path, manifest, {"files": {}, "dirs": []}, {"prefix": "/p", "lock_sha256": "1" * 64}
    )
    written = (tmp_path / env_manifest.MANIFEST).read_bytes()
    assert digest == canonical_digest(manifest) == env_manifest.digest(manifest)
    assert (
        written
        == canonical_json({**manifest, "prefix": "/p", "lock_sha256": "1" * 64, "environment_digest": digest}) + b"\n"
    )


_file_entries = st.fixed_dictionaries(
    {
        "path": st.text(max_size=12),
        "type": st.just("file"),
        "size": st.integers(min_value=0, max_value=2**63),
        "mode": st.sampled_from(["644", "755"]),
        "sha256": st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
    }
)
_odd_entries = st.dictionaries(
    st.sampled_from(["path", "type", "size", "mode", "sha256", "target"]),
    _values | st.just("file") | st.floats(allow_nan=False),
    max_size=6,
)


@settings(max_examples=100, deadline=None)
@given(st.lists(_file_entries | _odd_entries | _values, max_size=6))
def test_manifest_entries_encode_as_canonical_json(entries: list[Any]) -> None:
    """`env_manifest.entries_json` writes file entries field by field: byte for byte what the encoder writes, for
    entries of the manifest's shapes, near misses (a bool size, a missing or sixth key, odd text) and anything."""
    assert env_manifest.entries_json(entries) == canonical_json(entries)
    manifest = {"format": 1, "files": entries}
    assert env_manifest.digest(manifest) == canonical_digest(manifest)


@settings(max_examples=100, deadline=None)
@given(st.lists(_values, max_size=9), st.integers(min_value=1, max_value=4))
def test_a_list_hashed_a_piece_at_a_time_has_its_whole_digest(items: list[Any], chunk: int) -> None:
    """A lock's package set is hashed a chunk of pins at a time (any chunk: the list empty, shorter than one, cut
    anywhere): the digest is the whole list's, as every kept package-set record holds it."""
    assert canonical_list_digest(iter(items), chunk) == canonical_digest(items)


def test_a_large_package_set_is_hashed_without_its_json_held() -> None:
    """`package_set` of 30,000 entries (one platform of the 300k-package uv.lock benchmark is 300,000) made every
    pin and their whole JSON at once: 377 bytes an entry at its peak, traced. Made and hashed a chunk at a time:
    what is left is the sorted order of the entries and their sort keys."""
    entries = [
        pip_wheel(f"pkg{n}", "1.0", "linux-64", f"https://files.example/pkg{n}-1.0-py3-none-any.whl", f"{n:064x}")
        for n in range(30000)
    ]
    tracemalloc.start()
    try:
        package_set(entries)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak / len(entries) < 200, peak / len(entries)
