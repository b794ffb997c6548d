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

from lockgen.adapters.proof import conformance_store, prefix_observer, stat_walk
from lockgen.api.check import check_lock
from lockgen.model.requests import Prefix
from lockgen.api.materialize import materialize
from lockgen.core.env.conformance import passing_report
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
    monkeypatch.setattr(
        prefix_observer,
        "hash_files",
        lambda files, progress=None: read.extend(p for p, _ in files) or real(files, progress),
    )
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
    work = check_lock(lock, Prefix(prefix), full=True)  # the same report as the work gives, which read every byte now
    assert {**again.to_dict(), "read_every_byte": None} == {**work.to_dict(), "read_every_byte": None}
    assert (
        again.read_every_byte is not None
        and work.read_every_byte is not None
        and again.read_every_byte <= work.read_every_byte
    )


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
    now = stat_walk.tree_fingerprint(prefix)
    record.write_text(json.dumps({**kept, "tree": now.digest, "stamps": now.stamps}))
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
    kept, read = json.loads(again.stdout), json.loads(full.stdout)
    assert kept.pop("read_every_byte") <= read.pop(
        "read_every_byte"
    )  # the kept verdict's full read, and `--full`'s own now
    assert kept == read


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["packages", "held_files", "accepted", "files_expected", "files_observed", "site_packages"]),
        _JSON,
    )
    | _JSON
)
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
        conformance_store.save_verdict(
            prefix, "0" * 64, ["c"], stat_walk.TreeFingerprint("t", 1, True, {"": "1 2"}), {}
        )
        [record] = (home / "conformance").glob("*.verdict.json")
        record.write_bytes(data)
        kept = conformance_store.load_verdict(prefix, "0" * 64, ["c"])
    assert kept is None or (isinstance(kept["tree"], str) and isinstance(kept["verdict"], dict))


@settings(max_examples=100, deadline=None)
@given(
    st.binary(max_size=200)
    | _JSON.map(lambda v: json.dumps(v).encode())
    | st.fixed_dictionaries({"read": st.floats() | st.integers() | st.booleans() | st.text(max_size=4)}).map(
        lambda v: json.dumps(v).encode()
    )
)
def test_any_read_record_bytes_are_a_full_read_in_the_window_or_none(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    """When every byte was last read: any bytes in its record give a time within the window, or an expired trust
    (every byte read again); never an error."""
    home = tmp_path_factory.mktemp("home")
    prefix = home / "env"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LOCKGEN_HOME", str(home))
        conformance_store.every_byte_read(prefix, "", time.time())
        assert not conformance_store.byte_trust(prefix, "").expired
        [record] = (home / "conformance").glob("*.read.json")
        record.write_bytes(data)
        trust = conformance_store.byte_trust(prefix, "")
    assert trust.expired or (
        trust.read is not None and trust.read <= trust.now < trust.read + conformance_store.DEFAULT_TRUST_S
    )


LOADED = (
    "pydantic",
    "yaml",
    "lockgen.api.steps.shared_steps",
    "lockgen.adapters.lock.lockfile_yaml",
    "lockgen.adapters.store.installers",
)
SHOW_LOADED = (
    "import atexit, runpy, sys\n"
    f"atexit.register(lambda: print('loaded:', [m for m in {LOADED!r} if m in sys.modules], file=sys.stderr))\n"
    "sys.argv = ['lockgen', *sys.argv[1:]]\nrunpy.run_module('lockgen', run_name='__main__')\n"
)


def _loaded(*args: str) -> tuple[int, str]:
    """A lockgen command's exit status and the heavy modules it loaded (its stderr's last line)."""
    done = subprocess.run(
        [sys.executable, "-c", SHOW_LOADED, *args], capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}
    )
    return done.returncode, done.stderr.strip().splitlines()[-1]


def test_a_repeated_materialize_found_unchanged_loads_no_parser_and_no_build_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
    assert code == 1 and "lockgen.api.steps.shared_steps" in loaded  # the full path (from the lock's kept value)
    (prefix / "lib" / "libfoo.txt").write_text("moved\n")
    done = run_cli("materialize", str(lock), "--prefix", str(prefix))
    assert done.returncode == 1 and "changed since it was made" in done.stderr


def test_a_lockgen_environment_unchanged_is_clean_by_one_walk_and_any_change_is_drift(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drift check against the environment's own record (`check --prefix`, a repeated materialize) keeps
    its clean verdict the same way: nothing is read while the walk is the same; an edit with size and mtime
    put back, a new empty folder, a mode change are each drift."""
    from lockgen.adapters.store import env_manifest
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


def test_an_exec_bit_other_than_the_package_s_is_named_after_a_kept_verdict(
    checked: tuple[Path, Path, list[str]],
) -> None:
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


def _stat_blind_edit(target: Path, proofs: Path | None = None) -> None:
    """New bytes in `target` (same size) whose kept fingerprint is made the file's new one, as a write through a
    writable mapping opened before the check leaves it (size, mtime, ctime and inode kept): only a read sees it.
    `proofs`: the per-file record of `check --lock`; else the environment's own stats (`check --prefix`)."""
    data = target.read_bytes()
    target.write_bytes(bytes([data[0] ^ 1]) + data[1:])
    info = target.stat()
    relative = str(target.relative_to(target.parents[1]))
    if proofs is not None:
        record = json.loads(proofs.read_text())
        record["files"][relative][:5] = [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]
        proofs.write_text(json.dumps(record))
    else:
        from lockgen.adapters.store import env_manifest

        stats = target.parents[1] / ".lockgen" / "stats.json"
        record = env_manifest.stats_of(stats.read_bytes())
        assert relative in record["files"]  # the stats were read: the edit below is of a kept fingerprint
        record["files"][relative] = env_manifest.fingerprint(info)
        stats.write_bytes(env_manifest.stats_bytes(record))


def test_stat_trust_ends_and_every_byte_is_read_again(
    checked: tuple[Path, Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edit no stat shows passes while the kept fingerprints stand; a day after the check that read every byte
    (or at once with LOCKGEN_STAT_TRUST_S=0) every byte is read again and the edit is found. Before, a kept
    fingerprint stood for ever."""
    lock, prefix, _ = checked
    first = check_lock(lock, Prefix(prefix)).read_every_byte
    assert first is not None
    proofs = next(
        path
        for path in (tmp_path / "home" / "conformance").glob("*.json")
        if not path.name.endswith((".verdict.json", ".read.json"))
    )
    _stat_blind_edit(prefix / "lib" / "libfoo.txt", proofs)
    trusted = check_lock(lock, Prefix(prefix))
    assert trusted.clean and trusted.read_every_byte == first  # the window: what the docs say a stat check cannot see
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + conformance_store.DEFAULT_TRUST_S + 1)
    said: list[str] = []
    late = check_lock(lock, Prefix(prefix), progress=said.append)
    assert not late.clean and any(p.modified == ("lib/libfoo.txt",) for p in late.report.packages)
    assert late.read_every_byte != first and any("reading every byte" in line for line in said)
    monkeypatch.setattr(time, "time", real)
    monkeypatch.setenv("LOCKGEN_STAT_TRUST_S", "0")
    assert not check_lock(lock, Prefix(prefix)).clean


@pytest.mark.slow
def test_the_drift_check_s_trust_ends_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`check --prefix` (and a repeated materialize): the record's fingerprints stand a day after the look that read
    every byte, then every byte is read; `check` says when that was, in text and `--json`; a window that is not a
    number of seconds is one error."""
    from lockgen.api.check import check_prefix

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    lock = make_lock(tmp_path, "1.0")
    prefix, _ = materialize(lock, None, tmp_path / "env", lambda _: None)
    first = check_prefix(prefix, full=False)
    assert first.clean and first.read_every_byte is not None
    _stat_blind_edit(prefix / "lib" / "libfoo.txt")
    assert check_prefix(prefix, full=False).clean  # the window
    done = run_cli("check", "--prefix", str(prefix), "--json", env={"LOCKGEN_HOME": str(tmp_path / "home")})
    assert done.returncode == 0 and json.loads(done.stdout)["read_every_byte"] == first.read_every_byte, done.stdout
    assert f"every byte of {prefix} last read {first.read_every_byte}" in done.stderr
    assert materialize(lock, None, prefix, lambda _: None)[0] == prefix  # found unchanged, in the window
    monkeypatch.setenv("LOCKGEN_STAT_TRUST_S", "0")
    with pytest.raises(UserError, match="changed since it was made"):  # `run` finds it so too: the same step
        materialize(lock, None, prefix, lambda _: None)
    monkeypatch.delenv("LOCKGEN_STAT_TRUST_S")
    done = run_cli(
        "check", "--prefix", str(prefix), env={"LOCKGEN_HOME": str(tmp_path / "home"), "LOCKGEN_STAT_TRUST_S": "0"}
    )
    assert done.returncode == 1 and "modified lib/libfoo.txt" in done.stdout, done.stdout + done.stderr
    done = run_cli(
        "check", "--prefix", str(prefix), env={"LOCKGEN_HOME": str(tmp_path / "home"), "LOCKGEN_STAT_TRUST_S": "a day"}
    )
    assert (
        done.returncode == 1
        and "error: LOCKGEN_STAT_TRUST_S='a day' is not a number of seconds" in done.stderr
        and "hint: " in done.stderr
    ), done.stderr


@pytest.mark.slow
def test_an_edit_through_a_mapping_opened_before_the_check_is_found_when_the_window_ends(
    checked: tuple[Path, Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mapping window, for real: a page written through a shared mapping, checked, then written again (no stat
    moves: the kernel stamps only a clean page's first write) passes `check --lock`, `check --prefix` and a
    repeated materialize (what `run` does) on their kept verdicts, and each finds it once the stat trust ends."""
    import mmap

    from lockgen.api.check import check_prefix

    lock, prefix, _ = checked
    target = prefix / "lib" / "libfoo.txt"
    descriptor = os.open(target, os.O_RDWR)
    mapped = mmap.mmap(descriptor, 0)
    try:
        mapped[:1] = mapped[:1]  # the page is written (dirty): the kernel stamps the file now, not again
        _settle()
        assert check_lock(lock, Prefix(prefix)).clean and check_prefix(prefix, full=False).clean
        _settle()  # the drift check refreshed the record's fingerprint of the file (its ctime moved): settled again
        assert check_prefix(prefix, full=False).clean and conformance_store.drift_verdict(prefix) is not None
        before = target.stat()
        mapped[:1] = bytes([mapped[0] ^ 1])
        after = target.stat()
        if (before.st_mtime_ns, before.st_ctime_ns) != (after.st_mtime_ns, after.st_ctime_ns):
            pytest.skip("the page was written back meanwhile, so the kernel stamped the write: nothing hidden to find")
        # the window the docs name
        assert check_lock(lock, Prefix(prefix)).clean and check_prefix(prefix, full=False).clean
        assert materialize(lock, None, prefix, lambda _: None)[0] == prefix
        monkeypatch.setenv("LOCKGEN_STAT_TRUST_S", "0")
        with pytest.raises(UserError, match="changed since it was made"):
            materialize(lock, None, prefix, lambda _: None)
        assert not check_lock(lock, Prefix(prefix)).clean and check_prefix(prefix, full=False).modified == [
            "lib/libfoo.txt"
        ]
    finally:
        mapped.close()
        os.close(descriptor)
