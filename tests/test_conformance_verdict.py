"""The whole verdict of a passing `check --lock`, kept by the fingerprint of the tree's stat walk: a repeated
check of an unchanged environment is that verdict (no file read, same report); every change that could make
the tree another one (an edit with size and mtime put back, a file replaced by rename, a file added or
removed, another lock, a tree still changing) means the work is done again and a failing tree fails; a
record that is damaged, or that `--full` contradicts, is never a pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.adapters import conformance_store, prefix_observer, stat_walk
from lockgen.api.check import check_lock
from lockgen.model.requests import Prefix
from lockgen.api.materialize import materialize
from lockgen.core.conformance import passing_report
from lockgen.errors import UserError
from tests.conftest import run_cli
from tests.test_export import make_lock


def _settle() -> None:
    """Files changed within RACY_NS of a check are not trusted by their fingerprint: let the tree age past it."""
    time.sleep(prefix_observer.RACY_NS / 1e9 + 0.05)


@pytest.fixture
def checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, list[str]]:
    """(lock, prefix, paths hashed): an environment checked once and passing, its verdict kept."""
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    lock = make_lock(tmp_path, "1.0")
    prefix, _ = materialize(lock, None, tmp_path / "env", lambda _: None)
    _settle()
    read: list[str] = []
    real = prefix_observer.hash_files
    monkeypatch.setattr(prefix_observer, "hash_files", lambda files, progress=None: read.extend(p for p, _ in files) or real(files, progress))
    assert check_lock(lock, Prefix(prefix)).clean and read
    assert _verdicts(tmp_path)
    read.clear()
    return lock, prefix, read


def _verdicts(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "home" / "conformance").glob("*.verdict.json"))


def test_an_unchanged_tree_is_its_verdict_read_from_nothing(checked: tuple[Path, Path, list[str]]) -> None:
    lock, prefix, read = checked
    said: list[str] = []
    again = check_lock(lock, Prefix(prefix), progress=said.append)
    assert again.clean and read == []
    assert any("proven by their fingerprints" in line for line in said)
    assert again.to_dict() == check_lock(lock, Prefix(prefix), full=True).to_dict()  # the same report as the work gives


def test_an_edit_keeping_size_and_mtime_is_read_and_fails(checked: tuple[Path, Path, list[str]]) -> None:
    lock, prefix, read = checked
    target = prefix / "lib" / "libfoo.txt"
    before = target.stat()
    target.write_text("FOO 1.0\n")  # same size
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # mtime put back; ctime moved
    result = check_lock(lock, Prefix(prefix))
    assert not result.clean and read == [str(target)]
    assert "libfoo 1.0: modified lib/libfoo.txt" in result.lines()
    assert not check_lock(lock, Prefix(prefix)).clean  # the failure stands: no verdict says otherwise


def test_a_file_replaced_by_rename_is_read(checked: tuple[Path, Path, list[str]]) -> None:
    lock, prefix, read = checked
    target = prefix / "lib" / "libfoo.txt"
    before = target.stat()
    twin = prefix / "lib" / ".twin"
    twin.write_text(target.read_text())  # the same bytes first: a new inode is read, and passes
    os.utime(twin, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.rename(twin, target)
    assert check_lock(lock, Prefix(prefix)).clean and read == [str(target)]
    read.clear()
    twin.write_text("FOO 1.0\n")  # other bytes of the same size and mtime
    os.utime(twin, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.rename(twin, target)
    assert "libfoo 1.0: modified lib/libfoo.txt" in check_lock(lock, Prefix(prefix)).lines()
    assert read == [str(target)]


def test_a_file_added_or_removed_is_seen(checked: tuple[Path, Path, list[str]]) -> None:
    lock, prefix, _ = checked
    (prefix / "lib" / "extra.txt").write_text("x\n")
    assert "foreign: lib/extra.txt" in check_lock(lock, Prefix(prefix)).lines()
    (prefix / "lib" / "extra.txt").unlink()
    (prefix / "bin" / "foo").unlink()
    assert "libfoo 1.0: missing bin/foo" in check_lock(lock, Prefix(prefix)).lines()


def test_another_lock_is_not_that_verdict(checked: tuple[Path, Path, list[str]], tmp_path: Path) -> None:
    lock, prefix, read = checked
    other = make_lock(tmp_path / "other", "1.1")
    result = check_lock(other, Prefix(prefix))
    assert not result.clean and read  # the work was done, against the other lock's manifests
    assert any(line.startswith("libfoo 1.1:") for line in result.lines())
    lock.write_bytes(lock.read_bytes() + b"\n")  # the same entries, other bytes: another key
    read.clear()
    assert check_lock(lock, Prefix(prefix)).clean and read


def test_a_tree_still_changing_keeps_no_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file changed within RACY_NS of the look may change again in the same tick of the file system's
    clock without its fingerprint moving: neither its fingerprint nor the tree's verdict is kept."""
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    lock = make_lock(tmp_path, "1.0")
    prefix, _ = materialize(lock, None, tmp_path / "env", lambda _: None)
    assert check_lock(lock, Prefix(prefix)).clean
    assert _verdicts(tmp_path) == []
    _settle()
    assert check_lock(lock, Prefix(prefix)).clean
    assert len(_verdicts(tmp_path)) == 1


def test_full_that_fails_drops_the_verdict(checked: tuple[Path, Path, list[str]], tmp_path: Path) -> None:
    """A write no stat shows (below the file system), played by a record made to match the changed tree: the
    plain check trusts it, `--full` reads every file, fails and forgets it, and the plain check then fails."""
    lock, prefix, _ = checked
    (prefix / "lib" / "libfoo.txt").write_text("FOO 1.0\n")
    [record] = _verdicts(tmp_path)
    kept = json.loads(record.read_text())
    record.write_text(json.dumps({**kept, "tree": stat_walk.tree_fingerprint(prefix).digest}))
    assert check_lock(lock, Prefix(prefix)).clean  # what a record is trusted for: hence --full
    assert not check_lock(lock, Prefix(prefix), full=True).clean
    assert _verdicts(tmp_path) == []
    assert not check_lock(lock, Prefix(prefix)).clean


@pytest.mark.parametrize("damage", ["not json", '{"layout": 1}', "[]", "tree", "report", "allowed"])
def test_a_damaged_record_is_no_verdict(checked: tuple[Path, Path, list[str]], tmp_path: Path, damage: str) -> None:
    lock, prefix, read = checked
    [record] = _verdicts(tmp_path)
    kept = json.loads(record.read_text())
    text = {
        "tree": json.dumps({**kept, "tree": 7}),
        "report": json.dumps({**kept, "verdict": {**kept["verdict"], "report": {"packages": "x"}}}),
        "allowed": json.dumps({**kept, "verdict": {**kept["verdict"], "allowed": [1]}}),
    }.get(damage, damage)
    record.write_text(text)
    said: list[str] = []
    assert check_lock(lock, Prefix(prefix), progress=said.append).clean  # the work done again (files by their proofs)
    assert not any("proven by their fingerprints" in line for line in said) and read == []
    assert json.loads(record.read_text())["tree"] == kept["tree"]  # and the record made anew


def test_the_cli_says_the_same_from_its_verdict(checked: tuple[Path, Path, list[str]], tmp_path: Path) -> None:
    lock, prefix, _ = checked
    home = {"LOCKGEN_HOME": str(tmp_path / "home")}
    again = run_cli("check", "--lock", str(lock), "--prefix", str(prefix), "--json", env=home)
    full = run_cli("check", "--lock", str(lock), "--prefix", str(prefix), "--json", "--full", env=home)
    assert again.returncode == 0 and full.returncode == 0, again.stderr + full.stderr
    assert "proven by their fingerprints" in again.stderr and "proven by their fingerprints" not in full.stderr
    assert json.loads(again.stdout) == json.loads(full.stdout)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8), lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["packages", "accepted", "files_expected", "files_observed", "site_packages"]), _JSON) | _JSON)
def test_a_kept_report_is_a_clean_report_or_none(record: object) -> None:
    report = passing_report(record)
    assert report is None or (report.clean and not report.lines())


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200) | _JSON.map(lambda v: json.dumps(v).encode()))
def test_any_record_bytes_load_as_a_verdict_or_none(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    home = tmp_path_factory.mktemp("home")
    prefix = home / "env"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LOCKGEN_HOME", str(home))
        conformance_store.save_verdict(prefix, "0" * 64, ["c"], "t", 1, {})
        [record] = (home / "conformance").glob("*.verdict.json")
        record.write_bytes(data)
        kept = conformance_store.load_verdict(prefix, "0" * 64, ["c"])
    assert kept is None or (isinstance(kept["tree"], str) and isinstance(kept["verdict"], dict))


LOADED = ("pydantic", "yaml", "lockgen.api.steps.shared_steps", "lockgen.adapters.lockfile_yaml", "lockgen.adapters.installers")
SHOW_LOADED = (
    "import atexit, runpy, sys\n"
    f"atexit.register(lambda: print('loaded:', [m for m in {LOADED!r} if m in sys.modules], file=sys.stderr))\n"
    "sys.argv = ['lockgen', *sys.argv[1:]]\nrunpy.run_module('lockgen', run_name='__main__')\n"
)


def _loaded(*args: str) -> tuple[int, str]:
    """A lockgen command's exit status and the heavy modules it loaded (its stderr's last line)."""
    done = subprocess.run([sys.executable, "-c", SHOW_LOADED, *args], capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})
    return done.returncode, done.stderr.strip().splitlines()[-1]


def test_a_repeated_materialize_found_unchanged_loads_no_parser_and_no_build_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The found-unchanged path reads the manifest and the kept drift verdict only: no lock parser, no model,
    no build step. Another lock at that prefix, another platform, or a tree that moved take the full path,
    which says what is wrong."""
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    lock, other = make_lock(tmp_path, "1.0"), make_lock(tmp_path, "1.1")
    prefix = tmp_path / "env"
    assert run_cli("materialize", str(lock), "--prefix", str(prefix)).returncode == 0
    _settle()
    assert run_cli("materialize", str(lock), "--prefix", str(prefix)).returncode == 0  # keeps the verdict
    assert _loaded("materialize", str(lock), "--prefix", str(prefix)) == (0, "loaded: []")
    code, loaded = _loaded("materialize", str(other), "--prefix", str(prefix))
    assert code == 1 and "lockgen.api.steps.shared_steps" in loaded
    code, loaded = _loaded("materialize", str(lock), "--prefix", str(prefix), "--platform", "linux-aarch64")
    assert code == 1 and "lockgen.adapters.lockfile_yaml" in loaded
    (prefix / "lib" / "libfoo.txt").write_text("moved\n")
    done = run_cli("materialize", str(lock), "--prefix", str(prefix))
    assert done.returncode == 1 and "changed since it was made" in done.stderr


def test_a_lockgen_environment_unchanged_is_clean_by_one_walk_and_any_change_is_drift(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The drift check against the environment's own record (`check --prefix`, a repeated materialize) keeps
    its clean verdict the same way: nothing is read while the walk is the same; an edit with size and mtime
    put back, a new empty folder, a mode change are each drift."""
    from lockgen.adapters import env_manifest
    from lockgen.api.check import check_prefix

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    lock = make_lock(tmp_path, "1.0")
    prefix, digest = materialize(lock, None, tmp_path / "env", lambda _: None)
    _settle()
    assert check_prefix(prefix, full=False).clean and _verdicts(tmp_path)
    read: list[str] = []
    real = env_manifest.read
    monkeypatch.setattr(env_manifest, "read", lambda where: read.append(str(where)) or real(where))
    assert check_prefix(prefix, full=False).clean and read == []
    real_bytes = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda path: read.append(str(path)) or real_bytes(path))
    assert materialize(lock, None, prefix, lambda _: None) == (prefix, digest)
    assert not [path for path in read if path.startswith(str(prefix))]  # the record is in the verdict: not read
    monkeypatch.setattr(Path, "read_bytes", real_bytes)
    target = prefix / "lib" / "libfoo.txt"
    before = target.stat()
    target.write_text("FOO 1.0\n")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert check_prefix(prefix, full=False).modified == ["lib/libfoo.txt"]
    with pytest.raises(UserError, match="changed since it was made"):
        materialize(lock, None, prefix, lambda _: None)
    target.write_text("foo 1.0\n")
    (prefix / "lib" / "empty").mkdir()
    assert check_prefix(prefix, full=False).extra == ["lib/empty/"]
    (prefix / "lib" / "empty").rmdir()
    assert check_prefix(prefix, full=False).clean
    target.chmod(0o666)
    assert check_prefix(prefix, full=False).unsafe


def test_an_exec_bit_other_than_the_package_s_is_named_after_a_kept_verdict(checked: tuple[Path, Path, list[str]]) -> None:
    """`chmod -x` of a locked program, `chmod +x` of a locked data file (same bytes each) and a sticky file: each
    is named by `check --lock`, after a passing check kept its verdict and fingerprints (chmod moved only ctime and
    mode, so the files hash equal: `chmod -x` passed before the package's exec bits were part of the expectation)."""
    lock, prefix, _ = checked
    program, data = prefix / "bin" / "foo", prefix / "lib" / "libfoo.txt"
    program.chmod(0o644)
    data.chmod(0o755)
    result = check_lock(lock, Prefix(prefix))
    libfoo = next(p for p in result.report.packages if p.key.startswith("libfoo "))
    assert not result.clean and libfoo.exec_bit == ("bin/foo", "lib/libfoo.txt") and libfoo.modified == ()
    assert f"{libfoo.key}: exec bit not the package's: bin/foo, lib/libfoo.txt" in result.report.lines()
    done = run_cli("check", "--prefix", str(prefix), "--lock", str(lock), "--json")
    assert done.returncode == 1 and json.loads(done.stdout)["report"]["counts"]["modified"] == 1, done.stdout
    program.chmod(0o755)
    data.chmod(0o644)
    assert check_lock(lock, Prefix(prefix)).clean
    program.chmod(0o1755)
    assert check_lock(lock, Prefix(prefix)).report.mode == ("bin/foo",)
