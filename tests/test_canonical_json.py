"""Canonical JSON with parts encoded beforehand (`digests.canonical_json_with`) is byte for byte
`canonical_json` of the whole: the environment manifest's digest and the file written share its files'
encoding, and a digest that moved would make every environment look changed."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.adapters.store import env_manifest
from lockgen.digests import canonical_digest, canonical_json, canonical_json_with

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
