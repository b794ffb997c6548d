"""A wheel's placement kept on disk (`expected_env.placed_record`, read back by `manifest_steps.placed_wheel`):
read back it is exactly what the manifest places, any other record (another wheel, Python or layout, a damaged
one) is worked out again, a kept placement naming another package is refused, and a change of the placement rules
must bump `PLACEMENT_LAYOUT` (or the kept placements of the old rules would be trusted)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.adapters.proof import manifest_store
from lockgen.api.steps import manifest_steps
from lockgen.core.env.conformance import ExpectedFile
from lockgen.core.env.expected_env import (
    EXPECTED_FILE_ROW,
    PLACEMENT_LAYOUT,
    expected_digest,
    placed_of_record,
    placed_record,
    wheel_expected,
)
from lockgen.errors import UserError
from lockgen.model.lock import LockedPackage, PackageHash
from lockgen.model.manifests import ManifestFile, PackageManifest

SHA = "ab" * 32
_member = st.sampled_from(
    [
        "demo/__init__.py",
        "demo/x.so",
        "demo-1.0.dist-info/RECORD",
        "demo-1.0.dist-info/METADATA",
        "demo-1.0.data/scripts/tool",
        "demo-1.0.data/headers/h.h",
        "demo-1.0.data/data/share/d",
        "demo-1.0.data/purelib/p.py",
        "demo-1.0.data/platlib/q.so",
        "ü/ñ.py",
        ".libs/a.so",
    ]
)


def _manifest(members: list[str], hashed: bool = True) -> PackageManifest:
    files = tuple(
        ManifestFile(path=m, sha256=hashlib.sha256(m.encode()).hexdigest() if hashed else None, size=len(m))
        for m in dict.fromkeys(members)
    )
    return PackageManifest(
        sha256=SHA,
        name="Demo",
        version="1.0",
        kind="wheel",
        files=files,
        dist_info="demo-1.0.dist-info",
        scripts=("tool",),
        entry_points={"tool": "demo:main"},
    )


@settings(max_examples=100, deadline=None)
@given(st.lists(_member, max_size=11), st.booleans(), st.sampled_from(["3.11", "3.12"]))
def test_a_kept_placement_reads_back_as_the_manifest_places_it(members: list[str], hashed: bool, python: str) -> None:
    manifest = _manifest(members, hashed)
    kept, record = placed_record(manifest, python)
    assert kept.placed == wheel_expected(manifest, python)
    again = placed_of_record(json.loads(json.dumps(record)), SHA, python)
    assert again is not None and again == kept and (again.name, again.version) == ("Demo", "1.0")


def test_a_kept_placements_rows_are_made_in_the_expected_files_field_order() -> None:
    """The rows are made by `tuple.__new__` (no length check, for speed): a field added to `ExpectedFile` without
    adding it to the rows would shift every field after it."""
    assert ExpectedFile._fields == EXPECTED_FILE_ROW


def test_any_other_record_is_worked_out_again() -> None:
    _, record = placed_record(_manifest(["demo/__init__.py"]), "3.11")
    assert placed_of_record(record, SHA, "3.11") is not None
    assert placed_of_record(record, "cd" * 32, "3.11") is None  # another wheel's
    assert placed_of_record(record, SHA, "3.12") is None  # another Python's
    for damaged in (
        {**record, "layout": PLACEMENT_LAYOUT + 1},
        {**record, "files": [["a", None]]},
        {**record, "files": [["a", None, "7"]]},
        {**record, "files": [["a", 5, 1]]},
        {**record, "scripts": "tool"},
        {**record, "entry_points": [["tool"]]},
        {**record, "name": None},
        {**record, "dist_info": 3},
        [record],
        None,
    ):
        assert placed_of_record(damaged, SHA, "3.11") is None


def test_a_change_of_the_placement_rules_bumps_the_layout() -> None:
    members = [
        "demo/__init__.py",
        "demo-1.0.dist-info/RECORD",
        "demo-1.0.data/scripts/tool",
        "demo-1.0.data/headers/h.h",
        "demo-1.0.data/data/share/d",
        "demo-1.0.data/platlib/q.so",
        ".libs/a.so",
        "a/./b.py",
    ]
    placed = wheel_expected(_manifest(members), "3.11")
    # when this fails, the rules place a wheel's files elsewhere now: bump PLACEMENT_LAYOUT, then the digest here
    assert (PLACEMENT_LAYOUT, expected_digest([placed])) == (
        2,
        "2ed2e5785451ec0ea1b9f9905ce0af7c161dd91ce6ca0dd513553af18ce3526a",
    )


def test_a_kept_placement_naming_another_package_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path))
    manifest = _manifest(["demo/__init__.py"])
    manifest_store.keep(manifest)
    package = LockedPackage(
        name="demo",
        version="1.0",
        manager="pip",
        platform="linux-64",
        url="https://example.invalid/demo-1.0-py3-none-any.whl",
        hash=PackageHash(sha256=SHA),
    )
    read: list[str] = []
    monkeypatch.setattr(manifest_steps, "manifest_of", lambda *a: (read.append("manifest"), (manifest, None))[1])
    first = manifest_steps.placed_wheel(package, "3.11")
    assert read == ["manifest"] and first == wheel_expected(manifest, "3.11")
    assert manifest_steps.placed_wheel(package, "3.11") == first and read == ["manifest"]  # read back, not worked out
    assert manifest_steps.placed_wheel(package, "3.11", afresh=True) == first and read == ["manifest"] * 2  # --verify
    _, record = placed_record(manifest, "3.11")
    manifest_store.keep_placed(SHA, "3.11", PLACEMENT_LAYOUT, {**record, "name": "other"})
    with pytest.raises(UserError):
        manifest_steps.placed_wheel(package, "3.11")


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d["files"][0].update(size="12"),
        lambda d: d["files"][0].update(extra=True),
        lambda d: d["files"][0].pop("sha256"),  # a file without its digest would be judged by its path alone
        lambda d: d.update(kind="egg"),
        lambda d: d.update(scripts="tool"),
        lambda d: d.pop("source"),
        lambda d: d.update(extra=1),
    ],
)
def test_a_kept_manifest_is_read_back_without_a_validator_and_a_damaged_one_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: Callable[[dict], object]
) -> None:
    """The store's manifests are built again from their JSON as plain records (a build of a kept lock imports no
    pydantic); one not of their shape is removed, so the package's own archive is read again."""
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path))
    manifest = _manifest(["demo/__init__.py", "ü/ñ.py"])
    manifest_store.keep(manifest)
    assert manifest_store.cached(SHA) == manifest
    (path,) = (tmp_path / "manifests").rglob(f"{SHA}.json")
    document = json.loads(path.read_bytes())
    damage(document)
    path.write_text(json.dumps(document))
    assert manifest_store.cached(SHA) is None and not path.exists()


_CELL = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from(["", "a", SHA]), st.just([]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.lists(_CELL, min_size=3, max_size=5), _CELL), max_size=4))
def test_a_kept_placements_rows_are_judged_as_one_by_one(rows: list) -> None:
    """The rows of a kept placement, judged a column at a time, pass exactly when each row is `[path, sha256 or None,
    size or None, executable or None]` (a size no bool), as the row-by-row rule it replaced judged them."""
    _, record = placed_record(_manifest(["demo/__init__.py"]), "3.11")

    def row_by_row(row: object) -> bool:
        return (
            type(row) is list
            and len(row) == 4
            and type(row[0]) is str
            and (row[1] is None or type(row[1]) is str)
            and (row[2] is None or type(row[2]) is int)
            and (row[3] is None or type(row[3]) is bool)
        )

    accepted = placed_of_record({**record, "files": rows}, SHA, "3.11") is not None
    assert accepted == all(map(row_by_row, rows))
