"""Untrusted input and lost work (issue 27): arguments that name nothing, leftovers of killed runs,
files never overwritten, downloads and registry calls bounded in size and time, values kept out of
shell scripts, certificates compared honestly, and the machine's refusals (read-only, no permission,
names too long) reported as the user's to fix."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lockgen.adapters import file_guard
from lockgen.api import resolve as api
from lockgen.api.export import export
from lockgen.api.materialize import materialize
from lockgen.api.store import gc, list_envs
from lockgen.errors import UserError
from tests.channel_factory import Pkg, build_channel
from tests.conftest import REPO, run_cli


def _one_error(result: subprocess.CompletedProcess[str], code: int = 1) -> str:
    """The single `error:` line of a refused command (with its `hint:`), no traceback."""
    assert result.returncode == code, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "hint:" in result.stderr and "Traceback" not in result.stderr, result.stderr
    return errors[0]


@pytest.fixture
def store_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A lock of a tiny real channel and its environment materialized in a temporary store."""
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    channel = build_channel(tmp_path / "channel", [Pkg("libfoo", "1.0", files={"lib/libfoo.txt": "foo\n"})])
    stack = tmp_path / "stack" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(f'[stack]\nname = "tiny"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\nlibfoo = "*"\n'
                     '[targets.cpu]\narch = "cpu"\n')
    api.resolve(stack)
    lock = stack.parent / "locks" / "cpu.conda-lock.yml"
    prefix, _ = materialize(lock, None, None, lambda _: None)
    return lock, prefix


def test_gc_refuses_roots_that_name_no_lock(store_env: tuple[Path, Path], tmp_path: Path) -> None:
    lock, prefix = store_env
    empty = tmp_path / "empty"
    empty.mkdir()
    not_a_lock = tmp_path / "notes.txt"
    not_a_lock.write_text("hello\n")
    for root in (tmp_path / "lcoks", empty, not_a_lock):  # misspelt, holding no lock, not a lock
        line = _one_error(run_cli("gc", str(root)))
        assert str(root) in line
        assert prefix.is_dir() and [e.path for e in list_envs()] == [prefix]
    _one_error(run_cli("gc", str(lock.parent), str(tmp_path / "lcoks")))  # one bad root among good ones: refused
    assert prefix.is_dir()


def test_gc_dry_run_lists_and_removes_nothing(store_env: tuple[Path, Path], tmp_path: Path) -> None:
    lock, prefix = store_env
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.conda-lock.yml").write_text(lock.read_text() + "# another lock\n")
    kept = run_cli("gc", "--dry-run", str(lock))
    assert kept.returncode == 0 and kept.stdout == ""
    listed = run_cli("gc", "--dry-run", str(other))
    assert listed.returncode == 0 and listed.stdout.split() == [str(prefix)] and prefix.is_dir()
    removed = run_cli("gc", str(other))
    assert removed.returncode == 0 and removed.stdout.split() == [str(prefix)] and not prefix.exists()


def test_gc_sweeps_what_a_killed_gc_left(store_env: tuple[Path, Path], tmp_path: Path) -> None:
    lock, prefix = store_env
    store = prefix.parent
    leftover = store / f".{prefix.name}.tmp-gc"  # what a gc killed between its rename and its delete leaves
    (leftover / "lib").mkdir(parents=True)
    (leftover / "lib" / "libfoo.txt").write_text("foo\n")
    (store / ".gc.lock").write_text("")  # its guard file too (the kernel released the flock when it died)
    assert gc([lock], dry_run=True) == [leftover] and leftover.is_dir()
    assert gc([lock], dry_run=False) == [leftover] and not leftover.exists() and prefix.is_dir()
    shutil.copytree(prefix, leftover)  # again, with the environment of that name still to remove
    other = tmp_path / "other.conda-lock.yml"
    other.write_text(lock.read_text() + "# another lock\n")
    result = run_cli("gc", str(other))
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.split()) == sorted([str(leftover), str(prefix)])
    assert not leftover.exists() and not prefix.exists()


def test_gc_leaves_a_live_gc_alone(store_env: tuple[Path, Path], tmp_path: Path) -> None:
    """A gc holding the store's guard keeps a second gc waiting: its folders are never swept under it."""
    lock, prefix = store_env
    store = prefix.parent
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom pathlib import Path\n"
                               "from lockgen.adapters import file_guard\n"
                               "with file_guard.held(Path(sys.argv[1])):\n"
                               "    Path(sys.argv[2]).mkdir(); print('held', flush=True); time.sleep(3)\n"
                               "    Path(sys.argv[2]).rmdir()\n",
                               str(store / ".gc.lock"), str(store / ".live.tmp-gc")],
                              stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert holder.stdout.readline().strip() == "held"
    second = run_cli("gc", str(lock))
    assert holder.wait(timeout=30) == 0  # its own folder was still there for it to remove: not swept under it
    assert second.returncode == 0 and second.stdout == "", second.stderr
    assert prefix.is_dir()


@pytest.mark.parametrize("existing", ["K", "K.pub"])
def test_keygen_never_overwrites_a_key(tmp_path: Path, existing: str) -> None:
    kept = tmp_path / existing
    kept.write_text("the only copy\n")
    line = _one_error(run_cli("keygen", "--out", str(tmp_path / "K")))
    assert str(kept) in line
    assert kept.read_text() == "the only copy\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [existing]  # its partner was not written either
    made = run_cli("keygen", "--out", str(tmp_path / "fresh"))
    assert made.returncode == 0 and made.stdout.split() == [str(tmp_path / "fresh"), str(tmp_path / "fresh.pub")]
    assert (tmp_path / "fresh").stat().st_mode & 0o777 == 0o600


_HOLD_FOLDER = ("import fcntl, os, sys\nd = os.open(sys.argv[1], os.O_RDONLY)\nfcntl.flock(d, fcntl.LOCK_EX)\n"
                "print('held', flush=True)\nsys.stdin.read()\n")


def test_export_sweeps_what_a_killed_export_left_and_nothing_a_live_one_holds(store_env: tuple[Path, Path],
                                                                               tmp_path: Path) -> None:
    lock, _ = store_env
    out = tmp_path / "images" / "img"
    out.parent.mkdir()
    old = time.time() - 3600
    stale = out.parent / ".lockgen-export-killed"  # what an export killed mid-way leaves (83 MB in the report)
    (stale / "tree").mkdir(parents=True)
    (stale / "tree" / "libtorch.so").write_bytes(b"\0" * 4096)
    os.utime(stale, (old, old))
    young = out.parent / ".lockgen-export-starting"  # made a moment ago: an export between mkdtemp and its flock
    young.mkdir()
    live = out.parent / ".lockgen-export-live"  # an old folder another export is still working in
    live.mkdir()
    os.utime(live, (old, old))
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_FOLDER, str(live)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        ours: list[Path] = []

        def progress(_: str) -> None:  # while this export runs, its own folder is held against any sweep
            if not ours:
                ours.extend(p for p in out.parent.glob(".lockgen-export-*") if p not in (young, live))
                os.utime(ours[0], (old, old))
                assert file_guard.sweep_stale(out.parent, ".lockgen-export-*") == []

        export(lock, None, out, None, 100, 1, progress)
    finally:
        holder.communicate("", timeout=10)
    assert len(ours) == 1 and not ours[0].exists() and (out / "oci-layout").is_file()
    assert not stale.exists() and young.is_dir() and live.is_dir()
    assert sorted(p.name for p in out.parent.iterdir()) == sorted(["img", young.name, live.name])
