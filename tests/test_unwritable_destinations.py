"""A destination that takes no new file is found before the work, not after it (issue 44): every command that
writes (resolve, add, import, pin, freeze, export, pack) refuses a folder it cannot write with exit 1, one
`error:` line naming the folder the user gave (never the temporary file the write would have made) and a `hint:`,
having solved, fetched and written nothing. The folders are made immutable with `chattr +i`, which binds root
too (the suite runs as root, who writes a chmod 0555 folder); a read-only mount refuses the same way (EROFS)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.test_export import make_lock

REFUSED = "is not writable (Operation not permitted)"


def _chattr(flag: str, folder: Path) -> bool:
    chattr = shutil.which("chattr")
    return chattr is not None and subprocess.run([chattr, flag, str(folder)], capture_output=True).returncode == 0


@pytest.fixture
def immutable() -> Iterator[list[Path]]:
    """Folders made immutable by the test, made mutable again after it (so its temporary folder can go)."""
    made: list[Path] = []
    yield made
    for folder in made:
        _chattr("-i", folder)


def _freeze(folder: Path, immutable: list[Path]) -> None:
    if not _chattr("+i", folder):
        pytest.skip("needs chattr +i (root, on a file system with immutable files)")
    immutable.append(folder)


def _refused(done: subprocess.CompletedProcess[str], folder: Path) -> str:
    """One `error:` line naming `folder`, a hint, exit 1, no traceback, no temporary file named."""
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "hint: " in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert errors[0].startswith(f"error: `{folder}` {REFUSED}"), errors[0]
    assert ".tmp" not in done.stderr and ".lockgen-" not in done.stderr, done.stderr
    return done.stderr


def test_resolve_and_add_refuse_before_solving(tmp_path: Path, immutable: list[Path]) -> None:
    """Before: resolve solved ("resolved h100 for linux-64: 3 packages"), then named `.h100.conda-lock.yml.*.tmp`."""
    lock = make_lock(tmp_path, "1.0")
    stack, before = lock.parent.parent / "stack.toml", lock.read_bytes()
    stack.write_text(stack.read_text().replace('"==1.0"', '"==1.1"'))
    _freeze(lock.parent, immutable)
    said = _refused(run_cli("resolve", str(stack)), lock.parent)
    assert "the lock of target `h100`" in said and "resolving" not in said and "resolved" not in said, said
    assert lock.read_bytes() == before and sorted(p.name for p in lock.parent.iterdir()) == [lock.name]
    _freeze(stack.parent, immutable)  # add writes the stack itself: its folder is checked before the solve too
    said = _refused(run_cli("add", "cuda-version", "--stack", str(stack)), stack.parent)
    assert "resolving" not in said and "cuda-version" not in stack.read_text(), said


def test_export_pack_import_and_pin_refuse_before_their_work(tmp_path: Path, immutable: list[Path]) -> None:
    """Before: export built the image and pack fetched every artifact, then each named its temporary file."""
    lock = make_lock(tmp_path, "1.0")
    folder = tmp_path / "read-only"
    folder.mkdir()
    _freeze(folder, immutable)
    said = _refused(run_cli("export", str(lock), "--out", str(folder / "img")), folder)
    assert "--out" in said and "hashing" not in said and "linking" not in said, said
    deeper = run_cli("export", str(lock), "--out", str(folder / "new" / "img"))  # a folder export would make
    assert f"error: `{folder / 'new'}` cannot be made in `{folder}` (Operation not permitted)" in deeper.stderr
    said = _refused(run_cli("pack", str(lock), "--out", str(folder / "p.tar")), folder)
    assert "fetch" not in said, said
    _refused(run_cli("import", str(lock), "-t", "copy", "-o", str(folder / "copy.conda-lock.yml")), folder)
    _refused(run_cli("pin", str(tmp_path / "inventory.json.gz"), "-t", "x", "-o", str(folder / "x.yml")), folder)
    assert list(folder.iterdir()) == []


def test_freeze_refuses_before_reading_the_environment(tmp_path: Path, immutable: list[Path]) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "uv", "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    folder = tmp_path / "read-only"
    folder.mkdir()
    _freeze(folder, immutable)
    python = str(venv / "bin" / "python")
    _refused(run_cli("freeze", "--python", python, "-t", "x", "-o", str(folder / "x.yml")), folder)
    _refused(run_cli("freeze", "--python", python, "--inventory", str(folder / "inventory.json.gz")), folder)
    assert list(folder.iterdir()) == []
