"""Materialize and check on channels of real archives the tests build: hash-checked, placeholders
rewritten for the final prefix, content-addressed and instant the second time, the same digest on two
machines (two stores), atomic under interruption and concurrency, unsafe archives refused, drift found."""

from __future__ import annotations

import json
import marshal
import os
import py_compile
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockgen.api import resolve as api
from lockgen.adapters.proof import prefix_observer
from lockgen.adapters.store import env_manifest
from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.api.check import check_lock, check_prefix as check
from lockgen.model.requests import Prefix
from lockgen.api.materialize import materialize
from lockgen.errors import LockFormatError
from tests.channel_factory import PLACEHOLDER, Pkg, build_channel
from tests.conftest import REPO, run_cli
from tests.open_audit import opened


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def short_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home on a short path: a console script's shebang names the prefix, and one past Linux's 127
    characters becomes a `/bin/sh` trampoline, which a deep pytest temporary folder can reach."""
    folder = Path(tempfile.mkdtemp(prefix="lg-", dir="/tmp"))
    monkeypatch.setenv("LOCKGEN_HOME", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def tiny_lock(tmp_path: Path) -> tuple[Path, Path]:
    channel = build_channel(
        tmp_path / "channel",
        [
            Pkg(
                "libfoo",
                "1.0",
                files={"lib/libfoo.txt": "foo\n", "bin/foo": "#!/bin/sh\necho foo\n", "lib/foo.py": "x = 1\n"},
            ),
            Pkg("foo-data", "2.0", subdir="noarch", archive=".tar.bz2", depends=("libfoo",)),
        ],
    )
    stack = tmp_path / "stack" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(
        f'[stack]\nname = "tiny"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\nfoo-data = '
        '"*"\n[targets.cpu]\narch = "cpu"\n'
    )
    api.resolve(stack)
    return stack.parent / "locks" / "cpu.conda-lock.yml", channel


def test_materialize_installs_exactly_the_lock(home: Path, tiny_lock: tuple[Path, Path]) -> None:
    lock, _ = tiny_lock
    prefix, digest = materialize(lock, None, None, lambda _: None)
    assert prefix.parent == home / "envs" and prefix.name.endswith("-cpu-linux-64")
    assert (prefix / "lib" / "libfoo.txt").read_text() == "foo\n"
    placeholder_file = prefix / "etc" / "libfoo" / "prefix.txt"
    assert placeholder_file.read_text() == f"installed at {prefix}\n"  # the final path, never the temp one
    assert PLACEHOLDER not in placeholder_file.read_text()
    again, same = materialize(lock, None, None, lambda _: None)
    assert (again, same) == (prefix, digest)
    assert not list(prefix.parent.glob(".*.tmp-*"))


def test_same_digest_from_two_stores_at_one_path(tmp_path: Path, tiny_lock: tuple[Path, Path], monkeypatch) -> None:
    lock, _ = tiny_lock
    digests = []
    for store in ("machine-a", "machine-b"):
        monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / store))
        shutil.rmtree(tmp_path / "env", ignore_errors=True)
        digests.append(materialize(lock, None, tmp_path / "env", lambda _: None)[1])
    assert digests[0] == digests[1]


def test_drift_is_found(home: Path, tiny_lock: tuple[Path, Path]) -> None:
    prefix, _ = materialize(tiny_lock[0], None, None, lambda _: None)
    assert check(prefix, full=True).clean
    (prefix / "lib" / "libfoo.txt").write_text("changed\n")
    (prefix / "lib" / "extra.txt").write_text("x\n")
    (prefix / "bin" / "foo").unlink()
    drift = check(prefix, full=False)
    assert (drift.missing, drift.extra, drift.modified) == (["bin/foo"], ["lib/extra.txt"], ["lib/libfoo.txt"])


@pytest.mark.parametrize("full", [False, True])
def test_drift_that_keeps_content_is_found_in_both_modes(home: Path, tiny_lock: tuple[Path, Path], full: bool) -> None:
    """Modes no package installs, a changed exec bit, a same-size edit with the mtime put back, and what the
    manifest leaves out by design (byte-code caches, .lockgen/, folders) are each drift, fast mode too."""
    prefix, _ = materialize(tiny_lock[0], None, None, lambda _: None)
    assert check(prefix, full=False).clean and check(prefix, full=True).clean
    data, tool = prefix / "lib" / "libfoo.txt", prefix / "bin" / "foo"
    before = data.stat()
    data.write_bytes(bytes([data.read_bytes()[0] ^ 1]) + data.read_bytes()[1:])  # same size
    os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns))  # mtime put back: only ctime tells
    tool.chmod(0o644)  # exec bit dropped
    (prefix / "lib" / "__pycache__").mkdir()
    (prefix / "lib" / "__pycache__" / "evil.cpython-312.pyc").write_bytes(b"\x00" * 16)  # no evil.py recorded
    (prefix / "lib" / "sneaky.pyc").write_bytes(b"\x00" * 16)
    (prefix / ".lockgen" / "hook.sh").write_text("x\n")
    (prefix / "empty").mkdir()
    drift = check(prefix, full=full)
    assert drift.modified == ["bin/foo", "lib/libfoo.txt"]
    assert drift.extra == [".lockgen/hook.sh", "empty/", "lib/__pycache__/evil.cpython-312.pyc", "lib/sneaky.pyc"]
    assert drift.unsafe == []


@pytest.mark.parametrize("mode, why", [(0o4755, "setuid"), (0o2755, "setgid"), (0o666, "world-writable")])
def test_a_mode_no_package_installs_is_drift(home: Path, tiny_lock: tuple[Path, Path], mode: int, why: str) -> None:
    prefix, _ = materialize(tiny_lock[0], None, None, lambda _: None)
    installed = stat.S_IMODE((prefix / "bin" / "foo").stat().st_mode)  # 0o555: a link to the read-only store
    (prefix / "bin" / "foo").chmod(mode)
    for full in (False, True):
        drift = check(prefix, full=full)
        assert drift.unsafe == [f"bin/foo ({why})"] and "bin/foo" in drift.modified and not drift.clean
    (prefix / "bin" / "foo").chmod(installed)
    (prefix / "lib").chmod(0o777)
    assert check(prefix, full=False).unsafe == ["lib (world-writable)"]
    (prefix / "lib").chmod(0o755)
    (prefix / "lib" / "libfoo.txt").chmod(0o600)  # a narrower mode is drift too (the file's recorded mode moved)
    assert check(prefix, full=False).modified == ["lib/libfoo.txt"]


def test_caches_of_recorded_sources_are_not_drift(home: Path, tiny_lock: tuple[Path, Path]) -> None:
    prefix, _ = materialize(tiny_lock[0], None, None, lambda _: None)
    sources = [e["path"] for e in env_manifest.read(prefix)[0]["files"] if e["path"].endswith(".py")]
    assert sources
    for source in sources:  # what running the environment's python leaves behind
        folder = (prefix / source).parent / "__pycache__"
        folder.mkdir(exist_ok=True)
        cached = folder / f"{Path(source).stem}.{sys.implementation.cache_tag}.pyc"
        py_compile.compile(str(prefix / source), cfile=str(cached), doraise=True)
    assert check(prefix, full=False).clean
    cached.write_bytes(cached.read_bytes()[:16] + marshal.dumps(compile("print('other')", "x", "exec")))
    assert check(prefix, full=False).extra == [f"{cached.relative_to(prefix)} (not the byte code of its source)"]


def test_a_tampered_archive_is_refused(home: Path, tiny_lock: tuple[Path, Path]) -> None:
    lock, channel = tiny_lock
    archive = next((channel / "linux-64").glob("libfoo-*.conda"))
    archive.write_bytes(archive.read_bytes() + b"tampered")
    with pytest.raises(LockFormatError, match="does not have the sha256 the lock pins"):
        materialize(lock, None, None, lambda _: None)
    assert not (home / "envs").exists() or not [p for p in (home / "envs").iterdir() if not p.name.endswith(".lock")]


def test_an_archive_writing_outside_the_prefix_is_refused(home: Path, tmp_path: Path, tiny_lock) -> None:
    lock, channel = tiny_lock
    import io
    import tarfile

    from tests.channel_factory import _contents

    bad = Pkg("foo-data", "2.0", subdir="noarch", archive=".tar.bz2", depends=("libfoo",))
    info, files = _contents(bad)
    files["../../escaped.txt"] = b"owned\n"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:bz2") as tar:
        for name, data in sorted({**info, **files}.items()):
            entry = tarfile.TarInfo(name)
            entry.size = len(data)
            tar.addfile(entry, io.BytesIO(data))
    (channel / "noarch" / f"{bad.stem}.tar.bz2").write_bytes(buffer.getvalue())
    build_channel(channel, [])  # re-index: the lock must be re-resolved to match the new archive's hash
    api.resolve(lock.parent.parent / "stack.toml")
    with pytest.raises(LockFormatError, match="leaves the prefix"):
        materialize(lock, None, tmp_path / "env", lambda _: None)
    assert not (tmp_path / "env").exists() and not (tmp_path / "escaped.txt").exists()


@pytest.mark.slow
def test_interrupted_and_concurrent_runs(home: Path, tiny_lock: tuple[Path, Path]) -> None:
    lock, _ = tiny_lock
    envs = home / "envs"
    envs.mkdir(parents=True)
    command = [sys.executable, "-m", "lockgen", "materialize", str(lock)]
    first = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=REPO)
    killed = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=REPO)
    killed.kill()  # kill -9 at an arbitrary moment
    second = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    out_first, _ = first.communicate(timeout=120)
    killed.wait()
    assert second.returncode == 0 and first.returncode == 0
    assert out_first.strip() == second.stdout.strip()  # one environment for both
    prefix = Path(second.stdout.strip())
    time.sleep(prefix_observer.RACY_NS / 1e9 + 0.05)  # settled: the clean check below keeps its verdict
    assert check(prefix, full=True).clean
    (envs / f".{prefix.name}.tmp-999999999").mkdir()  # as a kill -9 mid-build leaves it
    materialize(lock, None, None, lambda _: None)  # found unchanged by the verdict: returns at once, and sweeps
    assert not [p for p in envs.iterdir() if ".tmp-" in p.name]
    shutil.rmtree(prefix)
    (envs / f".{prefix.name}.tmp-999999998").mkdir()
    assert materialize(lock, None, None, lambda _: None)[0] == prefix
    assert not [p for p in envs.iterdir() if ".tmp-" in p.name]
    shutil.rmtree(prefix)  # six at once: one builds, the others wait on the guard and find it made
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=REPO) for _ in range(6)]
    outputs = {run.communicate(timeout=120)[0].strip() for run in runs}
    assert outputs == {str(prefix)} and all(run.returncode == 0 for run in runs)
    assert not list(envs.glob(".*.lock")) and check(prefix, full=True).clean


def test_envs_and_gc(home: Path, tiny_lock: tuple[Path, Path], tmp_path: Path) -> None:
    from lockgen.api.store import gc, list_envs

    lock, _ = tiny_lock
    prefix, _ = materialize(lock, None, None, lambda _: None)
    assert [e.path for e in list_envs()] == [prefix]
    assert gc([lock.parent], dry_run=False) == []
    other = tmp_path / "unrelated"
    other.mkdir()
    (other / "other.conda-lock.yml").write_text(lock.read_text() + "# another lock\n")
    assert gc([other], dry_run=True) == [prefix] and prefix.exists()
    assert gc([other], dry_run=False) == [prefix] and not prefix.exists()
    assert list_envs() == []


def test_freeze_round_trips_a_materialized_environment(
    home: Path, tiny_lock: tuple[Path, Path], tmp_path: Path
) -> None:
    from lockgen.api.freeze import freeze

    lock, _ = tiny_lock
    prefix, _ = materialize(lock, None, None, lambda _: None)
    frozen_path, frozen = freeze(prefix, None, "again", tmp_path / "frozen.conda-lock.yml", False)
    original = load_lock(lock)
    assert {(p.name, p.version, p.build, p.url, p.hash.sha256) for p in frozen.package} == {
        (p.name, p.version, p.build, p.url, p.hash.sha256) for p in original.package
    }
    again, _ = materialize(frozen_path, None, tmp_path / "again", lambda _: None)
    files = {e["path"] for e in json.loads((again / ".lockgen/manifest.json").read_text())["files"]}
    assert "lib/libfoo.txt" in files and "etc/libfoo/prefix.txt" in files


@pytest.mark.slow
def test_freeze_refuses_index_installed_distributions(tmp_path: Path) -> None:
    import sys

    from lockgen.api.freeze import freeze
    from lockgen.errors import UserError

    with pytest.raises(UserError, match="installed from an index"):
        freeze(None, sys.executable, "host", tmp_path / "x.yml", False)
    assert not (tmp_path / "x.yml").exists()


def test_materialize_from_a_channel_served_over_http(home: Path, tmp_path: Path, http_channel) -> None:
    channel = build_channel(
        tmp_path / "channel", [Pkg("libfoo", "1.0"), Pkg("bar", "1.0", subdir="noarch", archive=".tar.bz2")]
    )
    url = http_channel(channel)
    stack = tmp_path / "stack" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(
        f'[stack]\nname = "http"\nchannels = ["{url}"]\n[dependencies]\nlibfoo = "*"\nbar = '
        '"*"\n[targets.cpu]\narch = "cpu"\n'
    )
    api.resolve(stack)
    lock = stack.parent / "locks" / "cpu.conda-lock.yml"
    prefix, _ = materialize(lock, None, None, lambda _: None)
    assert (prefix / "share" / "bar" / "README").is_file()
    assert all(p.url.startswith("http://") for p in load_lock(lock).package)


def test_check_an_environment_made_by_rattler_directly(
    home: Path, tiny_lock: tuple[Path, Path], tmp_path: Path
) -> None:
    from lockgen.adapters.store import installers, package_store

    lock, _ = tiny_lock
    conda = [p for p in load_lock(lock).package if p.manager == "conda"]
    archives = [package_store.fetch(p) for p in conda]
    prefix = tmp_path / "by-rattler"
    installers.install_conda(archives, prefix, prefix, "linux-64", tmp_path / "cache")
    assert check(prefix, full=True).clean
    (prefix / "lib" / "libfoo.txt").write_text("changed\n")
    (prefix / "lib" / "new.txt").write_text("new\n")
    drift = check(prefix, full=True)
    assert drift.modified == ["lib/libfoo.txt"] and drift.extra == ["lib/new.txt"]


def test_noarch_python_package_and_entry_points(short_home: Path, tmp_path: Path) -> None:
    """A noarch: python package lands in lib/python3.11/site-packages and gets a console script whose
    shebang names the final prefix. The `python` package here is a stand-in that runs the host's
    Python 3 with the prefix's site-packages (real CPython packages are not reachable offline)."""
    stand_in = (
        '#!/bin/sh\nhere="$(cd "$(dirname "$0")/.." && pwd)"\nPYTHONPATH="$here/lib/python3.11/site-packages" exec '
        'python3 "$@"\n'
    )
    channel = build_channel(
        tmp_path / "channel",
        [
            Pkg("python", "3.11.7", files={"bin/python3.11": stand_in}),
            Pkg(
                "pyfoo",
                "1.0",
                subdir="noarch",
                depends=("python >=3.11",),
                entry_points=("pyfoo-cli = pyfoo:main",),
                files={"site-packages/pyfoo/__init__.py": "def main():\n    print('pyfoo says hi')\n"},
            ),
        ],
    )
    stack = tmp_path / "stack" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(
        f'[stack]\nname = "py"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\npyfoo = '
        '"*"\n[targets.cpu]\narch = "cpu"\n'
    )
    api.resolve(stack)
    prefix, _ = materialize(stack.parent / "locks" / "cpu.conda-lock.yml", None, None, lambda _: None)
    assert (prefix / "lib" / "python3.11" / "site-packages" / "pyfoo" / "__init__.py").is_file()
    script = prefix / "bin" / "pyfoo-cli"
    assert script.read_text().splitlines()[0] == f"#!{prefix}/bin/python3.11"
    ran = subprocess.run([str(script)], capture_output=True, text=True)
    assert ran.stdout == "pyfoo says hi\n", ran.stderr
    assert check(prefix, full=True).clean
    lock = stack.parent / "locks" / "cpu.conda-lock.yml"
    proven = check_lock(lock, Prefix(prefix))  # the launcher rattler wrote is the entry point's, by shape
    assert proven.clean, proven.lines()
    script.write_text(script.read_text() + "import os\nos.system('id')\n")
    assert "foreign: bin/pyfoo-cli" in check_lock(lock, Prefix(prefix)).lines()


def test_hard_link_churn_costs_one_rehash_then_the_fast_check_is_fast_again(
    home: Path, tiny_lock: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hard link elsewhere (`cp -al`, a sibling environment from the same package cache) moves every linked
    file's ctime: the next fast check re-hashes them, finds them equal and records that; the one after
    re-hashes nothing. A real edit is still found."""
    prefix, _ = materialize(tiny_lock[0], None, None, lambda _: None)
    subprocess.run(["cp", "-al", str(prefix), str(tmp_path / "linked")], check=True)
    hashed: list[str] = []
    original = env_manifest.entry_of
    monkeypatch.setattr(env_manifest, "entry_of", lambda p, r: hashed.append(r) or original(p, r))
    assert check(prefix, full=False).clean and hashed
    hashed.clear()
    assert check(prefix, full=False).clean and hashed == []
    (prefix / "lib" / "libfoo.txt").write_text("changed\n")
    assert check(prefix, full=False).modified == ["lib/libfoo.txt"]


def test_a_relative_prefix_is_checked_as_the_folder_it_names(
    home: Path, tiny_lock: tuple[Path, Path], tmp_path: Path
) -> None:
    """A placeholder file holds the absolute prefix it was installed at: `check --prefix env`, run beside it,
    must compare against that path (it once expected the text `env` and called the package modified)."""
    lock = tiny_lock[0]
    materialize(lock, None, tmp_path / "env", lambda _: None)
    checked = run_cli("check", "--lock", str(lock), "--prefix", "env", cwd=tmp_path, env={"LOCKGEN_HOME": str(home)})
    assert checked.returncode == 0, checked.stderr
    assert "is the environment of" in checked.stdout + checked.stderr
    assert Prefix(Path("env")).path == Path.cwd() / "env"


@pytest.mark.slow
def test_byte_code_is_trusted_by_its_fingerprint_and_its_proof_kept(
    home: Path, tiny_lock: tuple[Path, Path], tmp_path: Path
) -> None:
    """A check whose kept verdict cannot stand (another file moved) proves the byte code by its fingerprint and
    its kept proof, without reading it (it once hashed every `.pyc` on every check); byte code swapped for
    other code, its size and mtime put back, is still refused."""
    lock = tiny_lock[0]
    prefix, _ = materialize(lock, None, tmp_path / "env", lambda _: None)
    cached = prefix / "lib" / "__pycache__" / f"foo.{sys.implementation.cache_tag}.pyc"
    cached.parent.mkdir()
    py_compile.compile(str(prefix / "lib" / "foo.py"), cfile=str(cached), doraise=True)
    time.sleep(prefix_observer.RACY_NS / 1e9 + 0.05)  # settled: the first check keeps fingerprints of both
    assert check_lock(lock, Prefix(prefix)).clean
    (prefix / "lib" / "libfoo.txt").write_text("foo\n")  # same bytes, a new ctime: the verdict cannot stand
    with opened(cached) as counts:
        assert check_lock(lock, Prefix(prefix)).clean
    assert counts[str(cached)] == 0
    before = cached.stat()
    other = cached.read_bytes()[:16] + marshal.dumps(compile("x = 2\n", "x", "exec"))
    cached.write_bytes(other[: before.st_size].ljust(before.st_size, b"\0"))
    os.utime(cached, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert f"lib/__pycache__/{cached.name} (not the byte code of its source)" in " ".join(
        check_lock(lock, Prefix(prefix)).lines()
    )


@pytest.mark.parametrize(
    "manifest, stats",
    [
        (lambda data: data[:10], None),  # cut short by a crash or a full disk
        (lambda data: b"\xff\xfe" + data, None),  # not UTF-8
        (lambda data: b"[" * 100_000 + b"]" * 100_000, None),  # nested past the parser
        (lambda data: b'{"files": "x"}', None),
        (lambda data: b'{"files": [null]}', None),
        (lambda data: b'{"files": [{"path": "a", "type": "file"}]}', None),
        (None, lambda data: b'{"files": 5}'),  # stats: a cache, read as no fingerprints
        (None, lambda data: b'{"files": {"lib/libfoo.txt": 7}}'),
        (None, lambda data: data[:7]),
        (None, lambda data: b'{"files": {}}'),  # no folders: crashed (KeyError) where every file was hashed again
        (None, lambda data: b'{"files": {}, "dirs": 5}'),  # crashed (TypeError)
        (None, lambda data: b'{"layout":2,"dirs":[],"paths":["lib/libfoo.txt"],"fingerprints":[1,2,3,4,5]}'),
        (None, lambda data: b'{"layout":2,"dirs":[],"paths":[7],"fingerprints":[1,2,3,4,5,6]}'),
        (None, lambda data: b'{"layout":2,"dirs":[],"paths":["lib/libfoo.txt"],"fingerprints":[1,2,3,4,5,true]}'),
        (None, lambda data: data.replace(b'"layout":2', b'"layout":1')),  # another layout: none, never misread
    ],
)
@pytest.mark.slow
def test_a_damaged_environment_record_is_one_error_or_rehashed(
    home: Path, tiny_lock: tuple[Path, Path], tmp_path: Path, manifest, stats
) -> None:
    """A prefix's `.lockgen/manifest.json` cut short or edited ended check --prefix and materialize with exit 3
    (JSONDecodeError, RecursionError, TypeError, AttributeError: found by an attack battery): now one error
    naming it. Damaged stats (fingerprints, a cache) make every file hashed again, and the check still holds."""
    from tests.conftest import run_cli

    prefix, _ = materialize(tiny_lock[0], None, tmp_path / "env", lambda _: None)
    for name, damage in ((".lockgen/manifest.json", manifest), (".lockgen/stats.json", stats)):
        if damage is not None:
            (prefix / name).write_bytes(damage((prefix / name).read_bytes()))
    checked = run_cli("check", "--prefix", str(prefix), env={"LOCKGEN_HOME": str(home)})
    again = run_cli("materialize", str(tiny_lock[0]), "--prefix", str(prefix), env={"LOCKGEN_HOME": str(home)})
    for result in (checked, again):
        assert "Traceback" not in result.stderr and "error: unexpected" not in result.stderr, result.stderr
        if manifest is not None:
            assert (
                result.returncode == 1 and "manifest.json` is damaged" in result.stderr and "hint:" in result.stderr
            ), result.stderr
        else:
            assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "stats",
    [
        lambda kept: json.dumps(kept, sort_keys=True).encode(),  # an older lockgen's: an object of lists per path
        lambda kept: b"{}",  # damaged: every file was hashed again at every check, none kept
    ],
)
def test_stats_not_lockgens_now_are_re_hashed_once_then_kept(
    home: Path, tiny_lock: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stats
) -> None:
    """Stats of another layout read as none: the check re-hashes every file, finds each equal, and keeps its
    fingerprint (past the racy second), so the next check reads none of them again."""
    from lockgen.api.steps import shared_steps

    prefix, _ = materialize(tiny_lock[0], None, tmp_path / "env", lambda _: None)
    kept = env_manifest.read(prefix)[1]
    files = kept["files"]
    assert files  # the stats written now are read
    (prefix / env_manifest.STATS).write_bytes(stats(kept))
    time.sleep(1.1)  # the files made more than `stat_walk.RACY_NS` ago: a racy one is not kept unread
    read: list[str] = []
    real = env_manifest.entry_of
    monkeypatch.setattr(
        env_manifest, "entry_of", lambda where, relative: read.append(relative) or real(where, relative)
    )
    assert shared_steps._drift(prefix, False, *env_manifest.read(prefix)).clean
    assert sorted(read) == sorted(files)  # every file read again, none misread as proven
    read.clear()
    assert shared_steps._drift(prefix, False, *env_manifest.read(prefix)).clean and read == []


def test_a_folder_added_beside_stats_of_the_older_layout_is_reported(
    home: Path, tiny_lock: tuple[Path, Path], tmp_path: Path
) -> None:
    """Stats an older lockgen wrote (layout 1: an object of fingerprint lists per path, beside the folders it made)
    keep their folders: a check reports a folder added since as extra (it reported none, its fingerprints read as
    none and its folders with them, until the environment was materialized again), and the stats it writes anew
    keep them, so the next check reports it too."""
    from lockgen.api.steps import shared_steps

    prefix, _ = materialize(tiny_lock[0], None, tmp_path / "env", lambda _: None)
    kept = env_manifest.read(prefix)[1]
    assert kept["dirs"]
    (prefix / env_manifest.STATS).write_bytes(json.dumps(kept, sort_keys=True).encode())
    (prefix / "added").mkdir()
    time.sleep(1.1)  # the files made more than `stat_walk.RACY_NS` ago: their fingerprints are kept anew
    assert shared_steps._drift(prefix, False, *env_manifest.read(prefix)).extra == ["added/"]
    assert b'"layout":2' in (prefix / env_manifest.STATS).read_bytes()  # written anew, in this layout
    assert shared_steps._drift(prefix, False, *env_manifest.read(prefix)).extra == ["added/"]


def test_a_file_a_package_left_in_lockgens_record_folder_is_refused_and_never_written_through(tmp_path: Path) -> None:
    """A wheel member its RECORD does not list, `NAME.data/data/.lockgen/manifest.json`, is installed by uv as a
    hard link into uv's cache; lockgen then wrote its record through that link, into the cache and every other
    environment linked to it (found by a review). A fresh build holding anything in `.lockgen/` is refused, and
    the record is replaced, never written in place."""
    from lockgen.api.steps import shared_steps

    prefix = tmp_path / "env"
    (prefix / ".lockgen").mkdir(parents=True)
    (tmp_path / "cache-file").write_text("the store's bytes\n")
    os.link(tmp_path / "cache-file", prefix / ".lockgen" / "manifest.json")
    walked, _ = env_manifest.scan_tree(prefix)
    with pytest.raises(LockFormatError, match=r"\.lockgen/manifest\.json in \.lockgen/"):
        shared_steps._nothing_unstated(prefix, prefix, [], walked)
    env_manifest.write(prefix, {"format": 1, "files": []}, {"files": {}, "dirs": []}, {})
    assert (tmp_path / "cache-file").read_text() == "the store's bytes\n"
