"""`export --from-prefix` hashes the environment once: the manifest takes the sha256 conformance just read for
each file whose inode is untouched since (the image tree is hard links of it), and reads again any file that
changed after the check, so the image's record is what its layers hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockgen.adapters.store import env_manifest
from lockgen.api import export as export_module
from lockgen.api.export import export
from lockgen.model.requests import ExportRequest, FromPrefix
from lockgen.api.materialize import materialize
from tests.test_export import make_lock


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    read: list[str] = []
    real = env_manifest.entry_of
    monkeypatch.setattr(
        env_manifest, "entry_of", lambda prefix, relative: read.append(relative) or real(prefix, relative)
    )
    return read


def test_the_manifest_takes_the_hashes_the_check_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    lock = make_lock(tmp_path, "1.0")
    prefix, digest = materialize(lock, None, tmp_path / "env", lambda _: None)
    read = _reads(monkeypatch)
    exported = export(ExportRequest(lock, tmp_path / "img", FromPrefix(prefix)), lambda _: None).environment_digest
    assert exported == digest  # the same manifest as materialize recorded from its own proofs
    # only what no package states a hash for is read: conda's records (hashed without their local fields), the tag
    assert read and all(path.startswith("conda-meta/") or path == "CACHEDIR.TAG" for path in read), read


def test_a_file_changed_after_the_check_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    lock = make_lock(tmp_path, "1.0")
    prefix, digest = materialize(lock, None, tmp_path / "env", lambda _: None)
    target = prefix / "lib" / "libfoo.txt"
    real = export_module.conform

    def then_edit(*args: object, **kwargs: object) -> object:
        result = real(*args, **kwargs)  # type: ignore[arg-type]
        target.write_text("FOO 1.0\n")  # after the check, through the source: the tree's link is the same inode
        return result

    monkeypatch.setattr(export_module, "conform", then_edit)
    read = _reads(monkeypatch)
    exported = export(ExportRequest(lock, tmp_path / "img", FromPrefix(prefix)), lambda _: None).environment_digest
    assert "lib/libfoo.txt" in read
    assert exported != digest
    assert exported == env_manifest.digest(env_manifest.build(prefix)[0])  # the bytes the image holds
